package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

// Resume semantics of the Langfuse trace input/output (observability
// §8.4.1, fixture 037's last case): a checkpointed first run fails, the
// resume mints a fresh invocation id and therefore a fresh Langfuse
// trace, on which the state hooks fire again; the first trace is not
// touched. The case's checkpointer (in_memory), first_run_expected_error,
// first_run_expected, resume and case-level invariants are run here.

// lfResume is a resume case's directives.
type lfResume struct {
	firstErr, firstTrace, resumedTrace, firstUnchanged *Value
	invariants                                         []*Field
}

// lfResumeInvariants are the invariants only a resume case has.
var lfResumeInvariants = map[string]func(le *lfExec, rs *lfResume) (bool, string){
	// hooks_refire_on_resumed_trace: both traces' input and output are
	// the hooks' (no stub), and the resumed trace's input is the restored
	// state's, not the first run's initial state.
	"hooks_refire_on_resumed_trace": func(le *lfExec, _ *lfResume) (bool, string) {
		if len(le.runs) != 2 || len(le.runs[0].traces) != 1 || len(le.runs[1].traces) != 1 {
			return false, "want one trace per run"
		}
		first, resumed := le.runs[0].traces[0], le.runs[1].traces[0]
		for _, t := range []*langfusetest.Trace{first, resumed} {
			for _, k := range []string{"input", "output"} {
				m, ok := t.Fields[k].(map[string]any)
				_, stubIn := m["entry_node"]
				_, stubOut := m["final_node"]
				if !ok || stubIn || stubOut {
					return false, fmt.Sprintf("trace %s %s %s is not a hook's", t.ID, k, formatValue(t.Fields[k]))
				}
			}
		}
		if deepEqual(first.Fields["input"], resumed.Fields["input"]) {
			return false, "the resumed trace's input is the first run's"
		}
		return true, ""
	},
}

// splitResume takes a resume case's directives out of body.
func (lf *obsLangfuse) splitResume(body *Value) (*Value, error) {
	if _, ok := body.Get("resume"); !ok {
		return body, nil
	}
	rs := &lfResume{}
	out := &Value{Kind: KindMap, Pos: body.Pos}
	for _, f := range body.Fields {
		v := f.Value
		switch f.Key {
		case "checkpointer":
			if v.Kind != KindString || v.Str != "in_memory" {
				return nil, notImplemented(capObs + " Langfuse resume with checkpointer " + fmt.Sprint(v.Native()))
			}
		case "first_run_expected_error":
			rs.firstErr = v
		case "first_run_expected":
			if err := hcStrictKeys(v, f.Key, "langfuse_trace"); err != nil {
				return nil, err
			}
			t, _ := v.Get("langfuse_trace")
			if err := checkLFTrace(t, f.Key+".langfuse_trace"); err != nil {
				return nil, err
			}
			rs.firstTrace = t
		case "resume":
			if err := hcStrictKeys(v, f.Key, "from_first_run", "expected"); err != nil {
				return nil, err
			}
			if ff, _ := v.Get("from_first_run"); ff == nil || ff.Kind != KindBool || !ff.Bool {
				return nil, schemaErrorf(v.Pos, "resume needs from_first_run: true")
			}
			e, ok := v.Get("expected")
			if ok {
				if err := hcStrictKeys(e, "resume.expected", "langfuse_trace", "first_trace_unchanged"); err != nil {
					return nil, err
				}
				if t, ok := e.Get("langfuse_trace"); ok {
					if err := checkLFTrace(t, "resume.expected.langfuse_trace"); err != nil {
						return nil, err
					}
					rs.resumedTrace = t
				}
				rs.firstUnchanged, _ = e.Get("first_trace_unchanged")
			}
		case "invariants":
			if v.Kind != KindMap {
				return nil, schemaErrorf(v.Pos, "invariants must be a mapping")
			}
			for _, inv := range v.Fields {
				_, lfInv := lfInvariants[inv.Key]
				_, resumeInv := lfResumeInvariants[inv.Key]
				if !lfInv && !resumeInv {
					return nil, notImplemented(fmt.Sprintf("%s invariant %s", capObs, inv.Key))
				}
				rs.invariants = append(rs.invariants, inv)
			}
		default:
			out.Fields = append(out.Fields, f)
			continue
		}
	}
	if rs.firstErr == nil || rs.firstTrace == nil {
		return nil, schemaErrorf(body.Pos, "a Langfuse resume case needs first_run_expected_error and first_run_expected")
	}
	lf.resume = rs
	// The suite requires an expected: block; the expectations are the
	// first run's and the resume's.
	out.Fields = append(out.Fields, &Field{Key: "expected", Pos: body.Pos, Value: &Value{Kind: KindMap, Pos: body.Pos}})
	return out, nil
}

// prepare gives a resume case's graph its checkpointer (before the build).
func (lf *obsLangfuse) prepare(x *geExec) {
	if lf != nil && lf.resume != nil {
		x.ckptStore = checkpoint.NewMemoryStore(nil)
	}
}

// resumes reports a resume case.
func (lf *obsLangfuse) resumes() bool { return lf != nil && lf.resume != nil }

// runResume runs the first run, the resume, and checks both traces.
func (le *lfExec) runResume(ctx context.Context, x *geExec, initial map[string]any, corrID string) error {
	rs := le.lf.resume
	m := newMatcher()
	first, err := x.obsInvoke(ctx, "first run", initial, corrID)
	if err != nil {
		return err
	}
	if first.Err == nil {
		return fmt.Errorf("first_run_expected_error: the first run completed")
	}
	if err := checkCkptError(rs.firstErr, first.Err); err != nil {
		return fmt.Errorf("first_run_expected_error: %w", err)
	}
	r1, err := le.collect(first)
	if err != nil {
		return err
	}
	var errs []error
	if len(r1.traces) != 1 {
		return fmt.Errorf("first_run_expected.langfuse_trace: want one trace, got %d", len(r1.traces))
	}
	errs = append(errs, matchLFTrace(m, "first_run_expected.langfuse_trace", rs.firstTrace, r1.traces[0]))

	runIdx := x.sus.nextRun()
	from := x.otel.mark()
	res, rerr := x.outer.ResumeCheckpoint(withRunIndex(ctx, runIdx), first.InvocationID)
	if res == nil {
		return fmt.Errorf("resume returned no result: %w", rerr)
	}
	if _, err := x.outer.Drain(ctx); err != nil {
		return fmt.Errorf("draining the resume: %w", err)
	}
	if rerr != nil {
		return fmt.Errorf("resume: ended %s: %v", res.Status, rerr)
	}
	inv := &invocationRun{Name: "resume", InvocationID: res.InvocationID, Status: res.Status.String(),
		FinalState: normalize(res.State), Run: runIdx}
	inv.otel = x.otel.since(from)
	r2, err := le.collect(&obsRun{invocationRun: inv, roots: inv.otel.forest(implicitOTel)})
	if err != nil {
		return err
	}
	if rs.resumedTrace != nil {
		if len(r2.traces) != 1 {
			errs = append(errs, fmt.Errorf("resume.expected.langfuse_trace: want one trace, got %d", len(r2.traces)))
		} else {
			errs = append(errs, matchLFTrace(m, "resume.expected.langfuse_trace", rs.resumedTrace, r2.traces[0]))
		}
	}
	if rs.firstUnchanged != nil {
		firstID := r1.traces[0].ID
		touched := 0
		for _, ev := range r2.events {
			if id, _ := ev.Body["id"].(string); (ev.Type == string(langfuse.TraceCreate) && id == firstID) || ev.Body["traceId"] == firstID {
				touched++
			}
		}
		errs = append(errs, compareBool(rs.firstUnchanged, touched == 0, fmt.Sprintf("the resume sent %d events to the first trace", touched)))
	}
	for _, f := range rs.invariants {
		var err error
		if inv, ok := lfResumeInvariants[f.Key]; ok {
			got, why := inv(le, rs)
			if got {
				why = ""
			}
			err = compareBool(f.Value, got, why)
		} else {
			err = lfInvariants[f.Key](m, le, f.Value)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("invariant %s: %w", f.Key, err))
		}
	}
	return errors.Join(errs...)
}
