package graph_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

var (
	approved  = graph.NewField[bool]("approved")
	doneFlag  = graph.NewField[bool]("done")
	trail     = graph.NewListField[string]("trail", graph.Append)
	gateCalls atomic.Int32
)

// phaseRecorder records "node:phase" for every node event.
type phaseRecorder struct {
	mu  sync.Mutex
	got []string
}

func (r *phaseRecorder) observe(ctx context.Context, ev graph.Event) error {
	if e, ok := ev.(*graph.NodeEvent); ok {
		r.mu.Lock()
		r.got = append(r.got, e.NodeName+":"+string(e.Phase))
		r.mu.Unlock()
	}
	return nil
}

func (r *phaseRecorder) phases() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// approvalGraph: work → gate (suspends unless approved) → finish.
func approvalGraph(t *testing.T, gateOpts []graph.SuspendOption, mw []graph.Middleware, copts ...graph.CompileOption) *graph.Graph {
	t.Helper()
	return mustCompile(t, graph.NewBuilder(mustSchema(t, approved, doneFlag, trail)).
		AddNode("work", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return trail.Add("work"), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			gateCalls.Add(1)
			if !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approval-1", Metadata: map[string]any{"kind": "approval"}}, gateOpts...)
			}
			return trail.Add("gate passed"), nil
		}, graph.WithMiddleware(mw...)).
		AddNode("finish", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return doneFlag.Set(true).With(trail.Add("finish")), nil
		}).
		AddEdge("work", "gate").AddEdge("gate", "finish").AddEdge("finish", graph.End).
		SetEntry("work"), copts...)
}

func TestSuspendAndResume(t *testing.T) {
	g := approvalGraph(t, nil, nil)
	rec := &phaseRecorder{}
	res, err := g.Invoke(t.Context(), nil, graph.WithObserver(rec.observe))
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("Invoke = %v, %v; want suspended", res.Status, err)
	}
	sus := res.Suspension
	if sus.Descriptor.SignalID != "approval-1" || sus.Descriptor.Metadata["kind"] != "approval" ||
		sus.NodeName != "gate" || sus.SuspendingNode != "gate" || fmt.Sprint(sus.Namespace) != "[gate]" || sus.RerunOnResume {
		t.Errorf("suspension = %+v", sus)
	}
	if got := stateJSON(t, res.State); got != `{"approved":false,"done":false,"trail":["work"]}` {
		t.Errorf("suspended state = %s", got)
	}
	drain(t, g)
	if got := strings.Join(rec.phases(), " "); got != "work:started work:completed gate:started gate:suspended" {
		t.Errorf("events = %s; the suspending node ends with suspended, never completed", got)
	}
	id := res.InvocationID
	res2, err := g.Resume(t.Context(), id, graph.Update{"approved": true, "undeclared": 1})
	if err != nil || res2.Status != graph.Completed {
		t.Fatalf("Resume = %v, %v", res2.Status, err)
	}
	if res2.InvocationID != id || res2.CorrelationID != res.CorrelationID {
		t.Errorf("resume ids = %s/%s, want the suspended invocation's %s/%s", res2.InvocationID, res2.CorrelationID, id, res.CorrelationID)
	}
	if fmt.Sprint(res2.Path) != "[finish]" || stateJSON(t, res2.State) != `{"approved":true,"done":true,"trail":["work","finish"]}` {
		t.Errorf("resumed path %v, state %s; the gate must not run again", res2.Path, stateJSON(t, res2.State))
	}
	if _, err := g.Resume(t.Context(), id, graph.Update{}); !errors.Is(err, errcat.SuspensionRecordInvalid) {
		t.Errorf("a second resume = %v, want suspension_record_invalid", err)
	}
	if _, err := g.Resume(t.Context(), "never-suspended", graph.Update{}); !errors.Is(err, errcat.SuspensionRecordInvalid) {
		t.Errorf("resume of an unknown id = %v, want suspension_record_invalid", err)
	}
}

func TestSuspendRerunOnResume(t *testing.T) {
	gateCalls.Store(0)
	g := approvalGraph(t, []graph.SuspendOption{graph.RerunOnResume()}, nil)
	res, _ := g.Invoke(t.Context(), nil)
	if res.Status != graph.Suspended || !res.Suspension.RerunOnResume {
		t.Fatalf("status %v", res.Status)
	}
	res2, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true))
	if err != nil || fmt.Sprint(res2.Path) != "[gate finish]" || gateCalls.Load() != 2 {
		t.Fatalf("resume path %v, gate calls %d, err %v; want the gate re-run", res2.Path, gateCalls.Load(), err)
	}
}

func TestSuspendPayloadInvalidKeepsRecord(t *testing.T) {
	g := approvalGraph(t, nil, nil)
	res, _ := g.Invoke(t.Context(), nil)
	_, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"approved": "yes please"})
	var se *graph.SuspensionError
	if !errors.Is(err, errcat.SuspensionResumePayloadInvalid) || !errors.As(err, &se) || se.Field != "approved" {
		t.Fatalf("Resume with a bad payload = %v", err)
	}
	if res2, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true)); err != nil || res2.Status != graph.Completed {
		t.Fatalf("a corrected resume = %v, %v", res2.Status, err)
	}
}

func TestSuspendCannotBeSwallowed(t *testing.T) {
	v := graph.NewField[int]("v")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, v)).
		AddNode("sneaky", func(ctx context.Context, s graph.State) (u graph.Update, err error) {
			defer func() { _ = recover() }() // swallows the unwinding
			_ = graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"})
			return v.Set(1), nil
		}).AddEdge("sneaky", graph.End).SetEntry("sneaky"))
	res, err := g.Invoke(t.Context(), nil)
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("a node that recovered the suspension still suspends: %v, %v", res.Status, err)
	}
}

func TestSuspendMiddlewareRules(t *testing.T) {
	var log []string
	mw := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		log = append(log, "pre")
		u, err := next(ctx, s)
		log = append(log, "post")
		return u, err
	})
	g := approvalGraph(t, nil, []graph.Middleware{mw})
	if res, _ := g.Invoke(t.Context(), nil); res.Status != graph.Suspended || fmt.Sprint(log) != "[pre]" {
		t.Fatalf("status %v, middleware log %v; the post phase must not run", res.Status, log)
	}
	suspender := graph.MiddlewareFunc(func(ctx context.Context, s graph.State, next graph.Next) (graph.Update, error) {
		if err := graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "mw"}); err != nil {
			return nil, err
		}
		return next(ctx, s)
	})
	g = approvalGraph(t, nil, []graph.Middleware{suspender})
	res, err := g.Invoke(t.Context(), approved.Set(true))
	if !errors.Is(err, errcat.SuspensionInUnsupportedContext) || errcat.Of(err) != errcat.SuspensionInUnsupportedContext || res.Status != graph.Errored {
		t.Fatalf("suspend from middleware = %v (category %q)", err, errcat.Of(err))
	}
	if err := graph.Suspend(t.Context(), graph.SignalDescriptor{SignalID: "x"}); !errors.Is(err, errcat.SuspensionInUnsupportedContext) {
		t.Errorf("Suspend outside an invocation = %v", err)
	}
}

func TestSuspendInSubgraph(t *testing.T) {
	innerDone := graph.NewField[bool]("inner_done")
	inner := mustCompile(t, graph.NewBuilder(mustSchema(t, innerDone)).
		AddNode("inner_suspend", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sub"})
		}).
		AddNode("inner_post", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return innerDone.Set(true), nil
		}).
		AddEdge("inner_suspend", "inner_post").AddEdge("inner_post", graph.End).SetEntry("inner_suspend"))
	result := graph.NewField[bool]("result")
	after := graph.NewField[bool]("after")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, result, after)).
		AddSubgraph("wrapper", inner, graph.Outputs(map[string]string{"result": "inner_done"})).
		AddNode("after_subgraph", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return after.Set(true), nil
		}).
		AddEdge("wrapper", "after_subgraph").AddEdge("after_subgraph", graph.End).SetEntry("wrapper"))
	res, err := g.Invoke(t.Context(), nil)
	if err != nil || res.Status != graph.Suspended || res.Suspension.SuspendingNode != "wrapper" ||
		res.Suspension.NodeName != "inner_suspend" || fmt.Sprint(res.Suspension.Namespace) != "[wrapper inner_suspend]" {
		t.Fatalf("suspension = %+v, %v", res.Suspension, err)
	}
	res2, err := g.Resume(t.Context(), res.InvocationID, graph.Update{})
	if err != nil || stateJSON(t, res2.State) != `{"result":true,"after":true}` {
		t.Fatalf("resumed = %v, %v", stateJSON(t, res2.State), err)
	}
}

func TestSuspendInFanOutAndBranches(t *testing.T) {
	x := graph.NewField[int]("x")
	y := graph.NewField[int]("y")
	var cancelled atomic.Int32
	leaf := mustCompile(t, graph.NewBuilder(mustSchema(t, x, y)).
		AddNode("maybe", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if x.Get(s) == 1 {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "item-1", Metadata: map[string]any{"k": "v"}})
			}
			<-ctx.Done() // siblings wait until cancelled
			cancelled.Add(1)
			return nil, ctx.Err()
		}).AddEdge("maybe", graph.End).SetEntry("maybe"))
	items := graph.NewListField[int]("items", graph.LastWriteWins)
	out := graph.NewListField[int]("out", graph.Append)
	build := func(policy graph.ErrorPolicy) *graph.Graph {
		return mustCompile(t, graph.NewBuilder(mustSchema(t, items, out)).
			AddFanOut("fan", graph.FanOut{Subgraph: leaf, ItemsField: "items", ItemField: "x", CollectField: "y",
				TargetField: "out", ErrorPolicy: policy, Unbounded: true}).
			AddEdge("fan", graph.End).SetEntry("fan"))
	}
	res, err := build(graph.FailFast).Invoke(t.Context(), items.Set([]int{0, 1, 2}))
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("fan-out suspension = %v, %v", res.Status, err)
	}
	md := res.Suspension.Descriptor.Metadata
	// Instance 0 was running and is cancelled; instance 2 is cancelled
	// too if it started before instance 1 suspended.
	if c := cancelled.Load(); res.Suspension.SuspendingNode != "fan" || md["fan_out_index"] != 1 || md["k"] != "v" || c < 1 || c > 2 {
		t.Errorf("suspension %+v, cancelled siblings %d", res.Suspension, cancelled.Load())
	}
	res, err = build(graph.Collect).Invoke(t.Context(), items.Set([]int{1}))
	if !errors.Is(err, errcat.SuspensionInUnsupportedContext) || res.Status != graph.Errored {
		t.Errorf("suspend in a collect fan-out = %v, %v", res.Status, err)
	}

	flag := graph.NewField[string]("flag")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, flag)).
		AddParallelBranches("par", graph.ParallelBranches{Branches: []graph.Branch{
			{Name: "ask", Call: func(ctx context.Context, s graph.State) (graph.Update, error) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "branch"})
			}},
		}}).AddEdge("par", graph.End).SetEntry("par"))
	rec := &phaseRecorder{}
	res, err = g.Invoke(t.Context(), nil, graph.WithObserver(rec.observe))
	drain(t, g)
	if err != nil || res.Status != graph.Suspended || res.Suspension.Descriptor.Metadata["branch_name"] != "ask" {
		t.Fatalf("branch suspension = %+v, %v", res.Suspension, err)
	}
	if got := strings.Join(rec.phases(), " "); got != "par:started ask:started ask:suspended par:suspended" {
		t.Errorf("events = %s", got)
	}
}

// failingPaused is a checkpoint store whose saves fail.
type failingPaused struct{ *checkpoint.MemoryStore }

func (failingPaused) Save(context.Context, checkpoint.Record) error { return errors.New("disk full") }

func TestSuspendWithSessions(t *testing.T) {
	store := session.NewMemoryStore(session.MemoryConfig{})
	g := approvalGraph(t, nil, nil, graph.WithSessions(graph.SessionConfig{Store: store}))
	res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("u1"))
	if err != nil || res.Status != graph.Suspended {
		t.Fatal(res.Status, err)
	}
	if got := stored(t, store, "u1")["trail"]; got != `["work"]` {
		t.Errorf("session at suspend = %s; it must be saved with the paused record", got)
	}
	res2, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true))
	if err != nil || res2.Status != graph.Completed {
		t.Fatal(res2.Status, err)
	}
	if got := stored(t, store, "u1")["trail"]; got != `["work","finish"]` {
		t.Errorf("session after resume = %s", got)
	}

	// Atomic suspend: the paused record cannot be written → errored.
	g = approvalGraph(t, nil, nil, graph.WithCheckpointStore(failingPaused{checkpoint.NewMemoryStore(nil)}))
	res, err = g.Invoke(t.Context(), nil)
	if !errors.Is(err, errcat.SuspensionPersistenceFailed) || res.Status != graph.Errored || res.Suspension != nil {
		t.Fatalf("suspend with a failing store = %v, %v", res.Status, err)
	}
}

// atomicStore is a checkpoint store that can write a session and a paused
// record together; fail makes the combined write fail as a whole.
type atomicStore struct {
	*checkpoint.MemoryStore
	sessions *session.MemoryStore
	calls    int
	fail     bool
	failErr  error // when set, the combined write fails with it
}

func (a *atomicStore) SessionStore() session.Store { return a.sessions }

func (a *atomicStore) WriteResumed(ctx context.Context, w checkpoint.ResumeWrite) (session.WriteResult, error) {
	if _, err := a.MemoryStore.Take(ctx, w.Key); err != nil {
		return session.WriteResult{}, err
	}
	if w.Append != nil {
		return a.sessions.Append(ctx, *w.Append)
	}
	return a.sessions.Save(ctx, *w.Save)
}

func (a *atomicStore) WriteSuspended(ctx context.Context, w checkpoint.SuspendWrite) (session.WriteResult, error) {
	a.calls++
	if a.failErr != nil {
		return session.WriteResult{}, a.failErr
	}
	if a.fail {
		return session.WriteResult{}, errors.New("transaction rolled back")
	}
	var res session.WriteResult
	var err error
	if w.Append != nil {
		res, err = a.sessions.Append(ctx, *w.Append)
	} else {
		res, err = a.sessions.Save(ctx, *w.Save)
	}
	if err != nil {
		return res, err
	}
	return res, a.MemoryStore.Save(ctx, w.Record)
}

func TestSuspendAtomicWriter(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprint("fail=", fail), func(t *testing.T) {
			as := &atomicStore{MemoryStore: checkpoint.NewMemoryStore(nil), sessions: session.NewMemoryStore(session.MemoryConfig{}), fail: fail}
			g := approvalGraph(t, nil, nil, graph.WithSessions(graph.SessionConfig{Store: as.sessions}), graph.WithCheckpointStore(as))
			res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("u"))
			if as.calls != 1 {
				t.Fatalf("WriteSuspended calls = %d, want 1", as.calls)
			}
			_, loadErr := as.sessions.Load(t.Context(), session.LoadRequest{SessionID: "u"})
			paused, _ := as.List(t.Context(), checkpoint.ListRequest{Kind: checkpoint.KindSuspended})
			if fail {
				if !errors.Is(err, errcat.SuspensionPersistenceFailed) || !errors.Is(loadErr, session.ErrNotFound) || len(paused.Records) != 0 {
					t.Fatalf("a failed atomic write: err %v, session %v, paused %d", err, loadErr, len(paused.Records))
				}
				return
			}
			if err != nil || res.Status != graph.Suspended || loadErr != nil || len(paused.Records) != 1 {
				t.Fatalf("atomic suspend: %v, %v, session %v, paused %d", res.Status, err, loadErr, len(paused.Records))
			}
			if res, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true)); err != nil || res.Status != graph.Completed {
				t.Fatalf("resume: %v, %v", res.Status, err)
			}
		})
	}
}

// TestOnPersistFailed: the callback runs when a suspension's write
// failed and stored nothing that could resume the invocation, and never
// when the suspension was persisted or may have been: a paused record's
// failed save, a transactional write's failure other than a conflict, a
// resumed run's new suspension (the record it resumed stays), a
// checkpointed invocation (its checkpoint stays).
func TestOnPersistFailed(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup returns the graph's compile options and invoke options.
		setup      func(sessions *spyStore) ([]graph.CompileOption, []graph.InvokeOption)
		resumed    bool // the failing suspension is a resumed run's
		wantCalled bool
	}{
		{name: "persisted", setup: func(*spyStore) ([]graph.CompileOption, []graph.InvokeOption) { return nil, nil }},
		{name: "session write fails", wantCalled: true, setup: func(s *spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			s.failSave = errors.New("disk full")
			return nil, nil
		}},
		{name: "session check refuses", wantCalled: true, setup: func(*spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			return nil, []graph.InvokeOption{graph.WithSessionCheck(func(_, _ graph.State) error { return errors.New("refused") })}
		}},
		{name: "paused record save fails", setup: func(*spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			return []graph.CompileOption{graph.WithCheckpointStore(failingPaused{checkpoint.NewMemoryStore(nil)})}, nil
		}},
		{name: "atomic write fails", setup: func(s *spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			as := &atomicStore{MemoryStore: checkpoint.NewMemoryStore(nil), sessions: s.MemoryStore, fail: true}
			return []graph.CompileOption{graph.WithSessions(graph.SessionConfig{Store: as.sessions}), graph.WithCheckpointStore(as)}, nil
		}},
		{name: "atomic write conflicts", wantCalled: true, setup: func(s *spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			as := &atomicStore{MemoryStore: checkpoint.NewMemoryStore(nil), sessions: s.MemoryStore, failErr: fmt.Errorf("%w: injected", session.ErrWriteConflict)}
			return []graph.CompileOption{graph.WithSessions(graph.SessionConfig{Store: as.sessions}), graph.WithCheckpointStore(as)}, nil
		}},
		{name: "resumed run's write fails", resumed: true, setup: func(*spyStore) ([]graph.CompileOption, []graph.InvokeOption) { return nil, nil }},
		{name: "checkpointed", setup: func(s *spyStore) ([]graph.CompileOption, []graph.InvokeOption) {
			s.failSave = errors.New("disk full")
			return []graph.CompileOption{graph.WithCheckpointer(checkpoint.NewMemoryStore(nil))}, nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sessions := newSpy()
			copts, iopts := tc.setup(sessions)
			var calls []error // each call's context's error
			g := mustCompile(t, graph.NewBuilder(mustSchema(t, approved, trail)).
				AddNode("ask", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if approved.Get(s) {
						return nil, nil
					}
					return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"}, graph.RerunOnResume(),
						graph.OnPersistFailed(func(ctx context.Context) { calls = append(calls, ctx.Err()) }))
				}).AddEdge("ask", graph.End).SetEntry("ask"),
				append([]graph.CompileOption{graph.WithSessions(graph.SessionConfig{Store: sessions})}, copts...)...)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			res, err := g.Invoke(ctx, trail.Add("asked"), append([]graph.InvokeOption{graph.WithSessionID("u")}, iopts...)...)
			if tc.resumed {
				if err != nil || res.Status != graph.Suspended {
					t.Fatalf("suspension = %v, %v", res.Status, err)
				}
				// The resumed run suspends again (its write appends the
				// payload's item), and that write fails.
				sessions.conflictAppends = 1
				res, err = g.Resume(ctx, res.InvocationID, graph.Update{"trail": []string{"asked", "again"}})
				if err == nil || res.Status != graph.Errored {
					t.Fatalf("resumed suspension = %v, %v", res.Status, err)
				}
				if _, err := g.Resume(ctx, res.InvocationID, approved.Set(true)); err != nil {
					t.Fatalf("the paused record the failed run resumed: %v", err)
				}
			}
			if len(calls) > 0 && calls[0] != nil {
				t.Errorf("the callback's context ended: %v", calls[0])
			}
			if got := len(calls) == 1; got != tc.wantCalled || len(calls) > 1 {
				t.Fatalf("called %d times (outcome %v, %v), want called: %v", len(calls), res.Status, err, tc.wantCalled)
			}
			if tc.name == "persisted" {
				if err != nil || res.Status != graph.Suspended {
					t.Fatalf("suspension = %v, %v", res.Status, err)
				}
				if res, err := g.Resume(ctx, res.InvocationID, approved.Set(true)); err != nil || res.Status != graph.Completed {
					t.Fatalf("resume = %v, %v", res.Status, err)
				}
				if len(calls) != 0 {
					t.Fatalf("called for a persisted suspension")
				}
			} else if !tc.resumed && (err == nil || res.Status != graph.Errored) {
				t.Fatalf("failed suspension = %v, %v", res.Status, err)
			}
		})
	}
}

func TestResumeCommitsExactlyOnce(t *testing.T) {
	g := approvalGraph(t, nil, nil)
	res, _ := g.Invoke(t.Context(), nil)
	var wg sync.WaitGroup
	var completed, invalid atomic.Int32
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true))
			switch {
			case err == nil && r.Status == graph.Completed:
				completed.Add(1)
			case errors.Is(err, errcat.SuspensionRecordInvalid):
				invalid.Add(1)
			default:
				t.Errorf("resume: %v, %v", r.Status, err)
			}
		}()
	}
	wg.Wait()
	if completed.Load() != 1 || invalid.Load() != 5 {
		t.Fatalf("completed %d, invalid %d; exactly one resume may take effect", completed.Load(), invalid.Load())
	}
}

func TestResumeThatErrorsRetiresTheRecord(t *testing.T) {
	boom := errors.New("downstream failure")
	g := mustCompile(t, graph.NewBuilder(mustSchema(t, approved, doneFlag, trail)).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "x"})
			}
			return nil, nil
		}).
		AddNode("fail", func(ctx context.Context, s graph.State) (graph.Update, error) { return nil, boom }).
		AddEdge("gate", "fail").AddEdge("fail", graph.End).SetEntry("gate"))
	res, _ := g.Invoke(t.Context(), nil)
	if _, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true)); !errors.Is(err, boom) {
		t.Fatalf("resume = %v, want the node failure", err)
	}
	if _, err := g.Resume(t.Context(), res.InvocationID, approved.Set(true)); !errors.Is(err, errcat.SuspensionRecordInvalid) {
		t.Fatalf("resuming an errored invocation = %v, want suspension_record_invalid", err)
	}
}

// TestResumeOnlyOwnGraph: graphs sharing one checkpoint store (the
// agents of one server) resume only the suspensions their own name
// wrote; an unnamed record (written before records carried a name) is
// resumed by any graph.
func TestResumeOnlyOwnGraph(t *testing.T) {
	store := checkpoint.NewMemoryStore(nil)
	a := approvalGraph(t, nil, nil, graph.WithCheckpointStore(store), graph.WithName("agent-a"))
	b := approvalGraph(t, nil, nil, graph.WithCheckpointStore(store), graph.WithName("agent-b"))
	unnamed := approvalGraph(t, nil, nil, graph.WithCheckpointStore(store))

	res, err := a.Invoke(t.Context(), nil)
	if err != nil || res.Status != graph.Suspended {
		t.Fatalf("Invoke = %v, %v; want suspended", res.Status, err)
	}
	drain(t, a)
	for _, g := range []*graph.Graph{b, unnamed} {
		err := g.CheckResume(t.Context(), res.InvocationID, graph.Update{"approved": true})
		if !errors.Is(err, graph.ErrOtherGraph) || !errors.Is(err, errcat.SuspensionRecordInvalid) {
			t.Errorf("%q: CheckResume of agent-a's record = %v, want ErrOtherGraph, suspension_record_invalid", g.Name(), err)
		}
		if _, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"approved": true}); !errors.Is(err, graph.ErrOtherGraph) {
			t.Errorf("%q: Resume of agent-a's record = %v, want ErrOtherGraph", g.Name(), err)
		}
	}
	// The refusals left the record for its own graph.
	if res2, err := a.Resume(t.Context(), res.InvocationID, graph.Update{"approved": true}); err != nil || res2.Status != graph.Completed {
		t.Fatalf("agent-a's Resume = %v, %v", res2.Status, err)
	}

	old, err := unnamed.Invoke(t.Context(), nil)
	if err != nil || old.Status != graph.Suspended {
		t.Fatalf("unnamed Invoke = %v, %v; want suspended", old.Status, err)
	}
	drain(t, unnamed)
	if res2, err := b.Resume(t.Context(), old.InvocationID, graph.Update{"approved": true}); err != nil || res2.Status != graph.Completed {
		t.Fatalf("agent-b's Resume of an unnamed record = %v, %v", res2.Status, err)
	}
}
