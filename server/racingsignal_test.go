package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// gatedResume calls issue_refund for a user's message and, after the
// refund's result, waits for gate (entered is sent once it waits)
// before it answers.
type gatedResume struct {
	gate    chan struct{}
	entered chan struct{}
}

func (m *gatedResume) Ready(context.Context) error { return nil }

func (m *gatedResume) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	msgs := req.Transcript()
	if last := msgs[len(msgs)-1]; last.Role == llm.RoleUser {
		return &llm.Response{Message: llm.AssistantToolCalls(llm.ToolCall{ID: "r1", Name: "issue_refund",
			Arguments: json.RawMessage(`{"order":"7","amount":30}`)}), FinishReason: llm.FinishToolCalls}, nil
	}
	m.entered <- struct{}{}
	select {
	case <-m.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &llm.Response{Message: llm.AssistantText("Refunded."), FinishReason: llm.FinishStop}, nil
}

// gated is a server of an agent on a gatedResume model, over a SQLite
// store with run records (stopped when the test ends).
type gated struct {
	m       *gatedResume
	release func() // opens the gate (once)
	a       *agent.Agent
	store   *sqlite.Store
	rec     *runtime.Recorder
	srv     *server.Server
}

func newGated(t *testing.T) *gated {
	t.Helper()
	ctx := context.Background()
	g := &gated{m: &gatedResume{gate: make(chan struct{}), entered: make(chan struct{}, 1)}}
	g.release = sync.OnceFunc(func() { close(g.m.gate) })
	t.Cleanup(g.release) // a failing test does not leave a resume blocked
	var err error
	if g.a, err = agent.New(agent.Config{Provider: g.m, Tools: demo.Tools()}); err != nil {
		t.Fatal(err)
	}
	g.store = servertest.SQLite(t)
	if g.rec, err = runtime.NewRecorder(runtime.RecorderConfig{Store: g.store.Runs()}); err != nil {
		t.Fatal(err)
	}
	if g.srv, err = server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: servertest.Harness(t, g.store, g.a)}}, Sessions: g.store, Runs: g.rec}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.srv.Stop(ctx); _ = g.rec.Close(ctx) })
	return g
}

// TestRacingSignalRetransmission: the same approval (one request id,
// as an OpenHarness request_id or a Responses Idempotency-Key makes it)
// sent again while its original resume still runs resumes the turn
// once; every copy answers the original's outcome and run id, and opens
// no run (a copy reaching another replica opens one that ends naming
// the original, "replay_of"). Before, each copy answered a run id of its
// own (a Responses id that was then not found) and was recorded as a
// second completed resume, its approval resolved again.
func TestRacingSignalRetransmission(t *testing.T) {
	ctx := context.Background()
	gs := newGated(t)
	m, release, a, store, rec, srv := gs.m, gs.release, gs.a, gs.store, gs.rec, gs.srv
	// Another replica on the same store.
	rec2, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: servertest.Harness(t, store, a)}}, Sessions: store, Runs: rec2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Stop(ctx); _ = rec2.Close(ctx) })
	runs := func() []runtime.Run {
		resp, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Runs
	}
	first, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 7")})
	if err != nil {
		t.Fatal(err)
	}
	s, ok := first.Outcome.(*chat.Suspended)
	if !ok {
		t.Fatalf("the refund: %#v", first.Outcome)
	}
	// The original on srv; then copies on srv and on the other replica.
	const copies = 5
	answers := make([]*adapter.Response, copies)
	var wg sync.WaitGroup
	approve := func(i int, on *server.Server) {
		answers[i], _ = on.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{
			SignalID: s.Descriptor.SignalID, Payload: agent.Approve(""), RequestID: "approve-1"}})
	}
	wg.Go(func() { approve(0, srv) })
	<-m.entered // the original resume ran the refund and waits for its answer
	for i := 1; i < copies; i++ {
		on := srv
		if i%2 == 0 {
			on = other
		}
		wg.Go(func() { approve(i, on) })
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// The other replica's first copy opens its run while the original
		// runs (its second waits for the first, as on any server).
		n := 0
		for _, r := range runs() {
			if r.ParentID != "" {
				n++
			}
		}
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			release()
			t.Fatalf("the other replica's copies opened no runs: %d of %+v", n, runs())
		}
	}
	release()
	wg.Wait()
	var original string
	for _, r := range answers {
		if r == nil || !isCompletedOutcome(r.Outcome) {
			var got []string
			for i, a := range answers {
				switch {
				case a == nil:
					got = append(got, fmt.Sprintf("%d: no answer", i))
				case a.Outcome == nil:
					got = append(got, fmt.Sprintf("%d: run %s, no outcome", i, a.RunID))
				default:
					info := a.Outcome.Info()
					cat := ""
					if e, ok := a.Outcome.(*chat.Errored); ok {
						cat = string(e.Category) + ": " + fmt.Sprint(e.Err)
					}
					got = append(got, fmt.Sprintf("%d: run %s %T replayed=%v %s", i, a.RunID, a.Outcome, info.Replayed, cat))
				}
			}
			t.Fatalf("answers:\n%s", strings.Join(got, "\n"))
		}
		if !r.Outcome.Info().Replayed {
			if original != "" {
				t.Fatalf("two copies resumed the turn: %+v", answers)
			}
			original = r.RunID
		}
	}
	for _, r := range answers {
		if r.RunID != original || original == "" {
			t.Fatalf("a copy answered run %q, the original %q", r.RunID, original)
		}
	}
	if err := errors.Join(rec.Flush(ctx), rec2.Flush(ctx)); err != nil {
		t.Fatal(err)
	}
	// On the original's server the copies wait for it and open no run
	// (one resuming nothing would record the approval resolved again); on
	// the other replica the first opens one, which ends naming it, and the
	// next waits for that one.
	replays := 0
	for _, r := range runs() {
		if r.ParentID == "" {
			continue
		}
		switch out := string(r.Output); {
		case r.ID == original:
			if r.Status != runtime.StatusCompleted || !strings.Contains(out, "Refunded.") {
				t.Fatalf("the original resume's run: %+v", r)
			}
		case r.Status == runtime.StatusCompleted && strings.Contains(out, `"replay_of":"`+original+`"`):
			replays++
		default:
			t.Fatalf("a run %s %s %s", r.ID, r.Status, out)
		}
	}
	if replays != 1 {
		t.Fatalf("%d runs name the original, want the other replica's one", replays)
	}
	// The approval resolved once: in the original's run, not in the run
	// the other replica's copy opened (it did until it recorded the
	// decision only once the turn resumed).
	evs, err := store.Runs().Events(ctx, runtime.EventsRequest{Tenant: server.DefaultTenant, SessionID: "s", Limit: runtime.MaxEventsLimit})
	if err != nil {
		t.Fatal(err)
	}
	resolved := 0
	for _, e := range evs {
		if e.Type == runtime.EventApprovalResolved {
			resolved++
			if e.RunID != original {
				t.Errorf("approval.resolved recorded in run %s, not the original's %s", e.RunID, original)
			}
		}
	}
	if resolved != 1 {
		t.Fatalf("approval.resolved recorded %d times", resolved)
	}
	hist := 0
	for _, msg := range historyOf(t, store, "s") {
		if msg.Role == llm.RoleTool && strings.Contains(msg.Text(), "refunded") {
			hist++
		}
	}
	if hist != 1 {
		t.Fatalf("the refund's result is in the history %d times", hist)
	}
}

// lookupHook is a store coordinator that calls at before each look-up
// of a signal (done false) and after it (done true).
type lookupHook struct {
	harness.StoreCoordinator
	at func(ref harness.SignalRef, done bool)
}

func (c lookupHook) Resolve(ctx context.Context, ref harness.SignalRef) (harness.Subscription, error) {
	c.at(ref, false)
	sub, err := c.StoreCoordinator.Resolve(ctx, ref)
	c.at(ref, true)
	return sub, err
}

// TestSignalCopyCrossingItsOriginal forces the interleavings of
// TestRacingSignalRetransmission's flake: a copy of an approval (the same
// request id) reaches another replica while the original resumes the
// turn, and finds the paused record; the original then commits (its
// outcome recorded, the paused record removed, in one write) before the
// copy looks at the record again. The copy answers the original's
// recorded outcome and run id, and a run it opened ends naming the
// original. Before, it answered harness_signal_correlation_failed:
//
//   - after the copy's run opened, its chat harness read the outcomes
//     recorded under the request id (none yet), then looked the paused
//     invocation up (gone): "no paused invocation awaits the signal";
//   - after the server's look-up of the signal, its check of the
//     payload against the paused record (gone) refused the copy without
//     reading the recorded outcomes: "no suspended turn of this session
//     awaits the signal".
func TestSignalCopyCrossingItsOriginal(t *testing.T) {
	for _, tc := range []struct {
		name string
		// crossAt reports whether the original commits at this point of
		// the copy's: before a look-up (done false) or after it.
		crossAt func(ref harness.SignalRef, done bool) bool
		// opensRun: the copy opened a run before the original committed.
		opensRun bool
	}{
		{"before the chat harness's look-up", func(ref harness.SignalRef, done bool) bool { return ref.InvocationID != "" && !done }, true},
		{"before the server's check of the payload", func(ref harness.SignalRef, done bool) bool { return ref.InvocationID == "" && done }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			gs := newGated(t)
			m, release, a, store, rec, srv := gs.m, gs.release, gs.a, gs.store, gs.rec, gs.srv
			// The other replica: the copy's server looks the signal up by
			// its id; once it opened a run, its chat harness looks the
			// paused invocation up by the invocation's id. At the chosen
			// point the copy lets the original go on and waits until it
			// answered.
			originalDone := make(chan struct{})
			var crossed atomic.Bool
			hook := lookupHook{StoreCoordinator: harness.NewStoreCoordinator(store.Checkpoints()), at: func(ref harness.SignalRef, done bool) {
				if !tc.crossAt(ref, done) || !crossed.CompareAndSwap(false, true) {
					return
				}
				release()
				select {
				case <-originalDone:
				case <-time.After(10 * time.Second):
					t.Error("the original did not answer")
				}
			}}
			g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
			if err != nil {
				t.Fatal(err)
			}
			h, err := chat.New(chat.Config{Graph: g, Coordinator: hook, Locker: store.SessionLocker(sqlite.LockerConfig{})})
			if err != nil {
				t.Fatal(err)
			}
			rec2, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
			if err != nil {
				t.Fatal(err)
			}
			other, err := server.New(server.Config{Agents: []*server.Agent{{ID: "x", Chat: h}}, Sessions: store, Runs: rec2})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Stop(ctx); _ = rec2.Close(ctx) })
			first, err := srv.Submit(ctx, adapter.SubmitRequest{SessionID: "s", Message: llm.UserText("refund order 7")})
			if err != nil {
				t.Fatal(err)
			}
			s, ok := first.Outcome.(*chat.Suspended)
			if !ok {
				t.Fatalf("the refund: %#v", first.Outcome)
			}
			approval := adapter.SubmitRequest{SessionID: "s", Signal: &adapter.Signal{
				SignalID: s.Descriptor.SignalID, Payload: agent.Approve(""), RequestID: "approve-1"}}
			var original *adapter.Response
			var wg sync.WaitGroup
			wg.Go(func() {
				defer close(originalDone)
				original, _ = srv.Submit(ctx, approval)
			})
			<-m.entered // the original resume ran the refund and waits for its answer
			dup, err := other.Submit(ctx, approval)
			release()
			wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if !crossed.Load() {
				t.Fatal("the copy made no such look-up")
			}
			if original == nil || !isCompletedOutcome(original.Outcome) || original.Outcome.Info().Replayed {
				t.Fatalf("the original: %+v", original)
			}
			if c, ok := dup.Outcome.(*chat.Completed); !ok || !c.Replayed || dup.RunID != original.RunID {
				desc := fmt.Sprintf("%T", dup.Outcome)
				if e, ok := dup.Outcome.(*chat.Errored); ok {
					desc += " " + string(e.Category) + ": " + fmt.Sprint(e.Err)
				}
				t.Fatalf("the copy answered run %s, %s; want the original's run %s, replayed", dup.RunID, desc, original.RunID)
			}
			if err := errors.Join(rec.Flush(ctx), rec2.Flush(ctx)); err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Runs(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, SessionID: "s"})
			if err != nil {
				t.Fatal(err)
			}
			replays := 0
			for _, r := range resp.Runs {
				if r.ParentID != "" && r.ID != original.RunID {
					if r.Status != runtime.StatusCompleted || !strings.Contains(string(r.Output), `"replay_of":"`+original.RunID+`"`) {
						t.Fatalf("the copy's run: %s %s %s", r.ID, r.Status, r.Output)
					}
					replays++
				}
			}
			if want := map[bool]int{true: 1}[tc.opensRun]; replays != want {
				t.Fatalf("%d runs name the original, want %d", replays, want)
			}
		})
	}
}

func isCompletedOutcome(out chat.Outcome) bool {
	_, ok := out.(*chat.Completed)
	return ok
}

// historyOf reads the stored history of the default tenant's session.
func historyOf(t *testing.T, st session.Store, id string) []llm.Message {
	t.Helper()
	rec, err := st.Load(context.Background(), session.LoadRequest{SessionID: server.DefaultTenant + "/" + id})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// A resumed turn that fails after its decision took effect is answered
// as the server's failure it is (502 for a reply the upstream sent that
// the server cannot use, 503 for an upstream down or rate-limited), but
// final: X-Should-Retry: false and no Retry-After, so that the SDKs,
// which retry a 5xx on their own, do not send the approval again (it
// is refused: the approved call's result is kept; the client goes on
// with a new message). The message names the response that holds what
// the turn did. Before, the openai SDK's retry turned a refund that ran
// into a 400 "nothing awaits the approval"; then the answer was a 400,
// which blamed a request that was fine.
func TestFailedResumeIsNotRetryable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cat    errcat.Category
		status int
	}{
		{"upstream unavailable", errcat.ProviderUnavailable, http.StatusServiceUnavailable},
		{"upstream reply unusable", errcat.ProviderInvalidResponse, http.StatusBadGateway},
		{"upstream rate limit", errcat.ProviderRateLimit, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := llmtest.New(
				llmtest.CallTools(llm.ToolCall{ID: "r1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"7","amount":30}`)}),
				llmtest.Fail(errcat.Wrap(tc.cat, "upstream", errors.New("from the model"))),
				llmtest.Reply("Anything else?"),
			)
			a, err := agent.New(agent.Config{Provider: p, Tools: demo.Tools()})
			if err != nil {
				t.Fatal(err)
			}
			ts := newOpenAIServerWith(t, a)
			susp, resp, e := respond(t, ts, `{"model": "demo", "input": "refund order 7"}`, nil)
			if resp.StatusCode != http.StatusOK || susp.XArmature.Outcome != "suspended" {
				t.Fatalf("the refund: %d %+v %+v", resp.StatusCode, susp, e)
			}
			body := fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": [{"type": "mcp_approval_response",
				"approval_request_id": %q, "approve": true}]}`, susp.ID, susp.Output[1].ID)
			_, resp, e = respond(t, ts, body, nil)
			if resp.StatusCode != tc.status || resp.Header.Get("Retry-After") != "" || resp.Header.Get(server.ShouldRetryHeader) != "false" ||
				e.Error.Code != string(tc.cat) || e.Error.Type != "server_error" {
				t.Fatalf("the approval whose turn failed: %d (Retry-After %q, X-Should-Retry %q) %+v, want %d %s, final",
					resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(server.ShouldRetryHeader), e, tc.status, tc.cat)
			}
			runs := runsOf(t, ts, susp.XArmature.SessionID)
			if len(runs) < 2 || !strings.Contains(e.Error.Message, "response "+runs[0]) || !strings.Contains(e.Error.Message, "request was fine") {
				t.Fatalf("the message %q names not the resumed turn's response (runs %v)", e.Error.Message, runs)
			}
			next, resp, e := respond(t, ts, fmt.Sprintf(`{"model": "demo", "previous_response_id": %q, "input": "did it go?"}`, susp.ID), nil)
			if resp.StatusCode != http.StatusOK || !strings.Contains(next.text(), "Anything else?") {
				t.Fatalf("the next message: %d %+v %+v", resp.StatusCode, next, e)
			}
			refunded := false
			for _, m := range p.Requests()[2].Transcript() {
				refunded = refunded || (m.Role == llm.RoleTool && strings.Contains(m.Text(), "refunded $30.00"))
			}
			if !refunded {
				t.Fatal("the next message's model call was not told the refund's result")
			}
		})
	}
}

// runsOf lists the ids of the default tenant's session's runs, newest
// first.
func runsOf(t *testing.T, ts *httptest.Server, session string) []string {
	t.Helper()
	var out struct {
		Runs []struct{ ID string } `json:"runs"`
	}
	if resp := call(t, ts, http.MethodGet, "/v1/sessions/"+session+"/runs", "", nil, &out); resp.StatusCode != http.StatusOK {
		t.Fatalf("the session's runs: %d", resp.StatusCode)
	}
	ids := make([]string, len(out.Runs))
	for i, r := range out.Runs {
		ids[i] = r.ID
	}
	return ids
}
