package graph_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

func approvalSuspGraph(t *testing.T, st checkpoint.Store, ss session.Store, extra bool) *graph.Graph {
	approved := graph.NewField[bool]("approved")
	count := graph.NewField[int]("count")
	log := graph.NewListField[string]("log", graph.Append)
	b := graph.NewBuilder(graph.MustSchema(approved, count, log)).
		AddNode("a", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return log.Add("a"), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig"})
			}
			return log.Add("gate"), nil
		}).
		AddNode("after", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return count.Set(count.Get(s) + 1).With(log.Add("after")), nil
		}).
		AddEdge("a", "gate").AddEdge("gate", "after").SetEntry("a")
	if extra {
		b.AddNode("extra", func(ctx context.Context, s graph.State) (graph.Update, error) { return log.Add("extra"), nil }).
			AddEdge("after", "extra").AddEdge("extra", graph.End)
	} else {
		b.AddEdge("after", graph.End)
	}
	opts := []graph.CompileOption{graph.WithCheckpointStore(st)}
	if ss != nil {
		opts = append(opts, graph.WithSessions(graph.SessionConfig{Store: ss}))
	}
	g, err := b.Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestResumeInvalidThenValid: a schema-violating payload fails
// with suspension_resume_payload_invalid and leaves the suspension
// resumable; concurrent resumes across two graph instances sharing the
// store run the post-suspension node once.
func TestResumeInvalidThenValid(t *testing.T) {
	st := checkpoint.NewMemoryStore(nil)
	ss := session.NewMemoryStore(session.MemoryConfig{})
	g := approvalSuspGraph(t, st, ss, false)
	res, err := g.Invoke(t.Context(), nil, graph.WithSessionID("s"))
	if err != nil || res.Status != graph.Suspended {
		t.Fatal(res.Status, err)
	}
	_, err = g.Resume(t.Context(), res.InvocationID, graph.Update{"approved": "yes"})
	if !errors.Is(err, errcat.SuspensionResumePayloadInvalid) {
		t.Fatalf("bad payload: %v", err)
	}
	_, err = g.Resume(t.Context(), res.InvocationID, graph.Update{"count": 1.5})
	if !errors.Is(err, errcat.SuspensionResumePayloadInvalid) {
		t.Errorf("count 1.5 into an int field: %v", err)
	}
	// Two workers (graphs compiled alike over one store) resume at once.
	g2 := approvalSuspGraph(t, st, ss, false)
	var wg sync.WaitGroup
	outs := make([]*graph.Result, 2)
	errs := make([]error, 2)
	for i, gg := range []*graph.Graph{g, g2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = gg.Resume(t.Context(), res.InvocationID, graph.Update{"approved": true})
		}()
	}
	wg.Wait()
	ok := 0
	for i := range outs {
		if errs[i] == nil {
			ok++
			t.Logf("worker %d: %v %v", i, outs[i].Status, outs[i].State.Map())
		} else {
			t.Logf("worker %d: %v", i, errs[i])
		}
	}
	if ok != 1 {
		t.Errorf("%d resumes succeeded, want 1", ok)
	}
	stt, err := g.SessionState(t.Context(), "s")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("session: %v", stt.Map())
	if c, _ := stt.Get("count"); c != 1 {
		t.Errorf("count = %v, want 1", c)
	}
}

// TestResumeRecompiled: a suspension resumed by a graph recompiled
// with an extra node after the suspension runs the new graph's path.
func TestResumeRecompiled(t *testing.T) {
	st := checkpoint.NewMemoryStore(nil)
	g := approvalSuspGraph(t, st, nil, false)
	res, err := g.Invoke(t.Context(), nil)
	if err != nil || res.Status != graph.Suspended {
		t.Fatal(res.Status, err)
	}
	g2 := approvalSuspGraph(t, st, nil, true)
	out, err := g2.Resume(t.Context(), res.InvocationID, graph.Update{"approved": true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%v", out.State.Map())
}

// TestResumeFailsThenRetry: a resumed run that fails (an outage
// in the node after the suspension; a cancellation mid-run) — can the
// suspension be resumed again?
func TestResumeFailsThenRetry(t *testing.T) {
	for _, mode := range []string{"error", "cancel"} {
		t.Run(mode, func(t *testing.T) {
			var fail bool
			approved := graph.NewField[bool]("approved")
			g := mustCompile(t, graph.NewBuilder(graph.MustSchema(approved)).
				AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if !approved.Get(s) {
						return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "sig"})
					}
					return nil, nil
				}).
				AddNode("act", func(ctx context.Context, s graph.State) (graph.Update, error) {
					if fail {
						if mode == "cancel" {
							<-ctx.Done()
							return nil, ctx.Err()
						}
						return nil, errors.New("outage")
					}
					return nil, nil
				}).AddEdge("gate", "act").AddEdge("act", graph.End).SetEntry("gate"))
			res, err := g.Invoke(t.Context(), nil)
			if err != nil || res.Status != graph.Suspended {
				t.Fatal(err)
			}
			fail = true
			ctx, cancel := context.WithCancel(t.Context())
			if mode == "cancel" {
				go func() { cancel() }()
			}
			_, err = g.Resume(ctx, res.InvocationID, graph.Update{"approved": true})
			cancel()
			t.Logf("first resume: %v (%s)", err, errcat.Of(err))
			fail = false
			out, err := g.Resume(t.Context(), res.InvocationID, graph.Update{"approved": true})
			if err != nil {
				t.Logf("second resume: %v (%s)", err, errcat.Of(err))
			} else {
				t.Logf("second resume: %v", out.Status)
			}
		})
	}
}
