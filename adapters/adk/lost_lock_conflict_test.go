package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/store/sqlite"
)

// noSessionLock lets every turn in at once: what two replicas see when
// one lost its session lock's connection while its turn ran.
type noSessionLock struct{}

func (noSessionLock) Lock(context.Context, string) (func(), error) { return func() {}, nil }

// gateModel answers "ok" at once, except to a user message "slow",
// which it answers once gate is closed.
type gateModel struct{ entered, gate chan struct{} }

func (*gateModel) Ready(context.Context) error { return nil }

func (m *gateModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if last := req.Messages[len(req.Messages)-1]; last.Role == llm.RoleUser && strings.TrimSpace(last.Text()) == "slow" {
		close(m.entered)
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

// TestLostLockIsWriteConflict: README ("Running replicas
// on PostgreSQL"): "A turn whose replica lost its session lock while the
// turn ran ... and whose session another replica's turn wrote meanwhile
// fails with session_write_conflict (retryable) rather than write over
// that turn" (server/adapteragent.go says the same of adapter agents).
// Two replicas of an ADK-Go agent whose sessions are on PostgreSQL
// (driver: postgres, shared), the session stores shared, writes
// conditional (Optimistic, as server.NewAdapterAgent compiles them), and
// no shared lock (replica A lost it): A's slow turn, overtaken by B's
// turn on the same session, fails with session_write_conflict (ADK-Go's
// "stale session error"), not node_exception.
func TestLostLockIsWriteConflict(t *testing.T) {
	url := postgresURL(t)
	schema := fmt.Sprintf("adk_lostlock_%d", time.Now().UnixNano())
	t.Cleanup(func() { dropSchema(url, schema) })
	section := `{"session":{"driver":"postgres","url_env":"ARMATURE_POSTGRES_URL","schema":"` + schema + `"}}`
	m := &gateModel{entered: make(chan struct{}), gate: make(chan struct{})}
	path := filepath.Join(t.TempDir(), "armature.db")
	replica := func() *chat.Harness {
		// Each replica opens the shared store on its own (its own
		// in-process session locks), as a process does.
		st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close(context.Background()) })
		sessions, cps := st, st.Checkpoints()
		reg := &adapter.Registry{}
		if err := adk.Register(reg); err != nil {
			t.Fatal(err)
		}
		ag := &adapter.Agent{ID: "helper", Backend: adk.Name, Provider: m, Model: "script", Config: json.RawMessage(section)}
		a, err := reg.Build(context.Background(), adapter.FactoryRequest{Agent: ag})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.(*adk.Adapter).Close() })
		g, err := adapter.Compile(a, nil, ag, graph.WithName(ag.ID), graph.WithSessions(graph.SessionConfig{Store: sessions, Optimistic: true}), graph.WithCheckpointStore(cps))
		if err != nil {
			t.Fatal(err)
		}
		h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(cps), OnDelete: adapter.OnDelete(a), Locker: noSessionLock{}})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	ha, hb := replica(), replica()
	ctx := context.Background()
	const sid = "acme/s"
	if _, err := ha.Send(ctx, sid, llm.UserText("init")); err != nil {
		t.Fatal(err)
	}
	type res struct {
		out chat.Outcome
		err error
	}
	done := make(chan res, 1)
	go func() {
		out, err := ha.Send(ctx, sid, llm.UserText("slow"))
		done <- res{out, err}
	}()
	<-m.entered
	out, err := hb.Send(ctx, sid, llm.UserText("fast"))
	if _, ok := out.(*chat.Completed); err != nil || !ok {
		t.Fatalf("B's turn: %#v %v", out, err)
	}
	close(m.gate)
	r := <-done
	cat := errcat.Of(r.err)
	if e, ok := r.out.(*chat.Errored); ok {
		cat = e.Category
		t.Logf("A's turn: %v", e.Err)
	}
	if cat != errcat.SessionWriteConflict {
		t.Errorf("A's overtaken turn: category %q, want %q (outcome %T, err %v)", cat, errcat.SessionWriteConflict, r.out, r.err)
	}
}
