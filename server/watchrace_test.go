package server_test

import (
	"context"
	"fmt"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/postgres"
)

// raceModel counts how each turn called it: whole (Complete: nobody was
// seen watching the session) or streamed (Stream: somebody was).
type raceModel struct{ whole, streamed atomic.Int32 }

func (m *raceModel) Ready(context.Context) error { return nil }

func (m *raceModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	m.whole.Add(1)
	return &llm.Response{Message: llm.AssistantText("one two three"), FinishReason: llm.FinishStop}, nil
}

func (m *raceModel) Stream(context.Context, *llm.Request) iter.Seq2[*llm.Chunk, error] {
	m.streamed.Add(1)
	return func(yield func(*llm.Chunk, error) bool) {
		for _, w := range []string{"one", " two", " three"} {
			if !yield(&llm.Chunk{Content: w}, nil) {
				return
			}
		}
		yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
	}
}

// raceReplica serves one armature serve replica (as internal/cli wires
// it: the store is the EventNotifier, CancelRelay and WatchRelay) on
// addr until the test ends.
func raceReplica(t *testing.T, schema string, model *raceModel) (url string) {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, postgres.Config{URL: pgtest.URL(), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	l := st.SessionLocker(postgres.LockerConfig{})
	t.Cleanup(l.Close)
	ag, err := agent.New(agent.Config{Provider: model})
	if err != nil {
		t.Fatal(err)
	}
	g, err := ag.Compile(graph.WithSessions(graph.SessionConfig{Store: st}), graph.WithCheckpointStore(st.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(st.Checkpoints()), Locker: l})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h}}, Sessions: st, Runs: rec,
		EventNotifier: st, CancelRelay: st, WatchRelay: st})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Serve(sctx, ln, time.Second) })
	t.Cleanup(func() { stop(); wg.Wait(); _ = rec.Close(ctx) })
	return "http://" + ln.Addr().String()
}

// A client that watches a session on replica B (GET .../events, its
// response's headers received) and then sends a message that replica A
// runs — what the chat page does for a new conversation behind a load
// balancer (send: createSession, listen(0), await the stream 'live',
// POST) — must see the reply stream, as it does when both requests
// reach one replica: the stream was open before the turn began. B
// announces the watch before the stream's headers, and A, with a
// WatchRelay, calls its model streaming whether or not it heard yet.
// Before, B announced after the headers and A often began the turn
// before hearing it: the model was called for whole text, and the
// watcher got the reply at the turn's end.
func TestWatchOpenedBeforeTurnStreamsAcrossReplicas(t *testing.T) {
	schema, _ := pgtest.Schema(t)
	model := &raceModel{}
	a := raceReplica(t, schema, model)
	b := raceReplica(t, schema, model)
	time.Sleep(500 * time.Millisecond) // both replicas listen

	const n = 20
	for i := range n {
		session := fmt.Sprintf("race-%d-%d", time.Now().UnixNano(), i)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", b+"/v1/sessions/"+session+"/events", nil)
		resp, err := http.DefaultClient.Do(req) // returns once B's headers came: the stream is live
		if err != nil {
			t.Fatal(err)
		}
		code, body := pgCall(t, "POST", a+"/v1/sessions/"+session+"/messages", `{"content":"hi"}`)
		if code != http.StatusOK || !strings.Contains(string(body), `"completed"`) {
			t.Fatalf("turn: %d %s", code, body)
		}
		cancel()
		resp.Body.Close()
		time.Sleep(50 * time.Millisecond)
	}
	if w := model.whole.Load(); w > 0 {
		t.Fatalf("%d of %d turns whose session was already watched on the other replica were run for whole text "+
			"(streamed: %d): their watcher got the reply only at the turn's end", w, n, model.streamed.Load())
	}
}

// Control: both requests on one replica: every turn streams.
func TestWatchOpenedBeforeTurnStreamsOnOneReplica(t *testing.T) {
	schema, _ := pgtest.Schema(t)
	model := &raceModel{}
	a := raceReplica(t, schema, model)
	const n = 20
	for i := range n {
		session := fmt.Sprintf("same-%d-%d", time.Now().UnixNano(), i)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", a+"/v1/sessions/"+session+"/events", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if code, body := pgCall(t, "POST", a+"/v1/sessions/"+session+"/messages", `{"content":"hi"}`); code != http.StatusOK {
			t.Fatalf("turn: %d %s", code, body)
		}
		cancel()
		resp.Body.Close()
	}
	if w := model.whole.Load(); w > 0 {
		t.Fatalf("%d of %d watched turns run for whole text on one replica", w, n)
	}
}
