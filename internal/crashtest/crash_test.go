package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

const (
	childEnv  = "ARMATURE_CRASHTEST_CHILD"
	dbEnv     = "ARMATURE_CRASHTEST_DB"
	sessions  = 4
	perTurn   = 2 // messages a turn appends: the user's and the reply
	approvalN = 3 // every third turn suspends for approval first
)

var (
	messages = graph.NewListField[string]("messages", graph.Append)
	approved = graph.NewField[bool]("approved")
)

// turnGraph appends the user's message, and a reply once approved when
// the turn needs approval.
func turnGraph(store *sqlite.Store) (*graph.Graph, error) {
	schema, err := graph.NewSchema(messages, approved)
	if err != nil {
		return nil, err
	}
	return graph.NewBuilder(schema).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := messages.Get(s)
			if strings.HasSuffix(msgs[len(msgs)-1], "!approval") && !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: graph.SessionID(ctx)})
			}
			return nil, nil
		}).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := messages.Get(s)
			return messages.Add("reply to " + msgs[len(msgs)-1]).With(approved.Set(false)), nil
		}).
		AddEdge("gate", "reply").
		AddEdge("reply", graph.End).
		SetEntry("gate").
		Compile(
			graph.WithSessions(graph.SessionConfig{Store: store, Fields: []string{"messages", "approved"}, SchemaVersion: "v1"}),
			graph.WithCheckpointStore(store.Checkpoints()),
		)
}

// TestCrashChild is the child process's body; it runs only when the parent
// sets childEnv.
func TestCrashChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as the crash-test child process only")
	}
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: os.Getenv(dbEnv)})
	if err != nil {
		t.Fatal(err)
	}
	g, err := turnGraph(store)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("s%d", i%sessions)
		// A turn interrupted while suspended is resumed first.
		paused, err := store.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(paused.Records) > 0 {
			if _, err := g.Resume(ctx, paused.Records[0].InvocationID, approved.Set(true)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		n, err := turns(ctx, store, id)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("%s turn %d", id, n)
		if n%approvalN == approvalN-1 {
			msg += " !approval"
		}
		res, err := g.Invoke(ctx, messages.Add(msg), graph.WithSessionID(id))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == graph.Suspended {
			if _, err := g.Resume(ctx, res.InvocationID, approved.Set(true)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// turns returns how many whole turns a session holds.
func turns(ctx context.Context, store session.Store, id string) (int, error) {
	msgs, err := stored(ctx, store, id)
	return len(msgs) / perTurn, err
}

func stored(ctx context.Context, store session.Store, id string) ([]string, error) {
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: id})
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []string
	if raw, ok := rec.State["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

func TestKillDuringTurns(t *testing.T) {
	if testing.Short() {
		t.Skip("slow: kills a child process many times")
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("parent only")
	}
	db := filepath.Join(t.TempDir(), "crash.db")
	kills := 25
	if s := os.Getenv("ARMATURE_CRASHTEST_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", dbEnv+"="+db)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		check(t, db, k)
	}
}

// check verifies the invariants after a kill.
func check(t *testing.T, db string, k int) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	if err != nil {
		t.Fatalf("kill %d: the file does not reopen: %v", k, err)
	}
	defer store.Close(ctx)
	total := 0
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		msgs, err := stored(ctx, store, id)
		if err != nil {
			t.Fatalf("kill %d: session %s does not load: %v", k, id, err)
		}
		paused, err := store.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		// A paused turn's session holds its user message without a reply.
		if len(paused.Records) > 0 {
			if len(msgs)%perTurn != 1 || !strings.HasSuffix(msgs[len(msgs)-1], "!approval") {
				t.Fatalf("kill %d: session %s has a paused record but its state is %q", k, id, msgs)
			}
			msgs = msgs[:len(msgs)-1]
		}
		if len(msgs)%perTurn != 0 {
			t.Fatalf("kill %d: session %s holds a torn turn: %q", k, id, msgs)
		}
		for n := 0; n < len(msgs)/perTurn; n++ {
			want := fmt.Sprintf("%s turn %d", id, n)
			if n%approvalN == approvalN-1 {
				want += " !approval"
			}
			if msgs[2*n] != want || msgs[2*n+1] != "reply to "+want {
				t.Fatalf("kill %d: session %s turn %d = %q, %q", k, id, n, msgs[2*n], msgs[2*n+1])
			}
		}
		total += len(msgs) / perTurn
	}
	t.Logf("after kill %d: %d whole turns stored", k, total)
}
