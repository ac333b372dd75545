package conformance

import (
	"fmt"
	"log/slog"

	"github.com/armature-go/armature/observe/otelobserver"
)

// Log correlation (observability §7) in the observability suite: nodes'
// emits_log records go through the implicit OTel observer's
// Observer.LogHandler, so they carry the active span's trace_id and
// span_id besides the correlation fields; log_records and the log
// invariants read them.

// obsOTel configures the implicit OTel capture for the case (detached
// sets) and routes the nodes' logs through its observer.
func (x *geExec) obsOTel(om *obsMeta) error {
	c := x.otel.captures[implicitOTel]
	if err := c.configure(om.otelConfig); err != nil {
		return err
	}
	x.otel.logger = slog.New(c.obs.LogHandler(x.otel.logs))
	om.exec = x
	return nil
}

// logExpectKey parses log_records (as the graph-engine parser does).
func (om *obsMeta) logExpectKey(p *geParser, f *Field) error {
	var exp geExpect
	if err := p.parseOTelExpect(f, &exp, &geCase{}); err != nil {
		return err
	}
	om.logRecords = exp.logRecords
	return nil
}

// obsLogInvariant checks a log invariant on one invocation.
type obsLogInvariant func(run *obsRun, want *Value) error

var obsLogInvariants = map[string]obsLogInvariant{
	"all_logs_same_trace_id": func(run *obsRun, want *Value) error {
		ids := map[any]bool{}
		for _, r := range run.otel.logs {
			ids[r.Attrs[otelobserver.LogTraceID]] = true
		}
		return compareBool(want, len(ids) == 1 && !ids[nil], fmt.Sprintf("trace ids %v", ids))
	},
	"log_trace_ids_differ_when_detached": func(run *obsRun, want *Value) error {
		ids := map[any]bool{}
		for _, r := range run.otel.logs {
			ids[r.Attrs[otelobserver.LogTraceID]] = true
		}
		return compareBool(want, len(ids) == len(run.otel.logs) && len(ids) > 1 && !ids[nil], fmt.Sprintf("trace ids %v", ids))
	},
	// log_span_ids_match_active_span_at_emission: each record names a
	// node span of the run, in the record's trace.
	"log_span_ids_match_active_span_at_emission": func(run *obsRun, want *Value) error {
		spans := map[string]string{} // node span id -> trace id
		for _, s := range run.otel.allSpans() {
			if _, node := spanAttrs(s)[otelobserver.AttrNodeName]; node {
				spans[s.SpanContext.SpanID().String()] = s.SpanContext.TraceID().String()
			}
		}
		for _, r := range run.otel.logs {
			sid, _ := r.Attrs[otelobserver.LogSpanID].(string)
			tid, ok := spans[sid]
			if !ok || tid != r.Attrs[otelobserver.LogTraceID] {
				return compareBool(want, false, fmt.Sprintf("log %q: span %q is not a span of its trace", r.Message, sid))
			}
		}
		return compareBool(want, len(run.otel.logs) > 0, "no log records")
	},
	"all_logs_carry_correlation_id": func(run *obsRun, want *Value) error {
		if want.Kind != KindString {
			return schemaErrorf(want.Pos, "all_logs_carry_correlation_id wants the id")
		}
		for _, r := range run.otel.logs {
			if got := r.Attrs[otelobserver.AttrCorrelationID]; got != want.Str {
				return fmt.Errorf("log %q: correlation id %v, want %q", r.Message, got, want.Str)
			}
		}
		if len(run.otel.logs) == 0 {
			return fmt.Errorf("no log records")
		}
		return nil
	},
}

// checkLogInvariant runs a log invariant over every run.
func checkLogInvariant(name string, want *Value, runs []*obsRun) (bool, error) {
	inv, ok := obsLogInvariants[name]
	if !ok {
		return false, nil
	}
	for _, r := range runs {
		if err := inv(r, want); err != nil {
			return true, err
		}
	}
	return true, nil
}

// mwEmitsLog is the middleware type of an emits_log on a composite node
// (obsMeta.extract): it logs in the node's context before the dispatch.
const mwEmitsLog = "<emits_log>"

// compositeLog extracts emits_log from a composite (subgraph, fan-out,
// parallel-branches) node d: it becomes the node's outermost middleware.
func (om *obsMeta) compositeLog(graphKey, node string, d *Field) error {
	st, err := (&geParser{}).parseEmitsLog(d)
	if err != nil {
		return err
	}
	if om.logMws[graphKey] == nil {
		om.logMws[graphKey] = map[string]*mwSpec{}
	}
	om.logMws[graphKey][node] = &mwSpec{typ: mwEmitsLog, pos: d.Pos, logStep: st}
	return nil
}
