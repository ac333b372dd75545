package server

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/sqlite"
)

// ohWantReused checks a refused reuse of a request_id: errored,
// message_id_reused, user-correctable, not retryable, naming the field.
func ohWantReused(t *testing.T, r ohResult) {
	t.Helper()
	ohWantTurnError(t, r, "message_id_reused", "user_correctable", false)
	var d map[string]string
	if err := json.Unmarshal(r.msg.Response.Error.Details, &d); err != nil || d["field"] != "request_id" {
		t.Errorf("details = %s, want field request_id", r.msg.Response.Error.Details)
	}
	if r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("a refused reuse is marked replayed")
	}
}

// TestOpenHarnessRequestIDReused: a request_id sent again with another
// request is refused (message_id_reused) and runs nothing, in the cache
// and after a restart; a retransmission, compared canonically (white
// space, key order, a new correlation_id or capabilities, a task_hint
// alias of the same agent), still replays the first answer. Before, any
// body under a seen request_id got the first request's answer.
func TestOpenHarnessRequestIDReused(t *testing.T) {
	e := newOHEnv(t, nil)
	const orig = `{"protocol_version": "1.0.0", "request_id": "rid-1", "request": {"context": {"session_id": "s-reuse", "user_intent": "where is order 5?", "attachments": [{"uri": "https://x.test/a.png"}]}}}`
	first := e.post(t, orig)
	if first.msg.Response.Status != "success" {
		t.Fatalf("got %s", first.raw)
	}
	for _, tc := range []struct {
		name   string
		body   string
		reused bool
	}{
		{"identical", orig, false},
		{"white space and key order", `{"request":{"context":{"attachments":[{"uri":"https://x.test/a.png"}],"user_intent":"where is order 5?","session_id":"s-reuse"}},"request_id":"rid-1","protocol_version":"1.0.0"}`, false},
		{"new trace, capabilities, shell and alias route", `{"protocol_version": "1.0.1", "request_id": "rid-1", "correlation_id": "retry-2",
			"capabilities": {"openharness.streaming": true}, "request": {"context": {"session_id": "s-reuse", "user_intent": "where is order 5?",
			"attachments": [{"uri": "https://x.test/a.png"}], "shell": {"shell_kind": "cli"}, "task_hint": {"dev.armature.agent": "refunds"}}}}`, false},
		{"another intent", strings.Replace(orig, "order 5", "order 6", 1), true},
		{"trailing space in the intent", strings.Replace(orig, "order 5?", "order 5? ", 1), true},
		{"another attachment", strings.Replace(orig, "a.png", "b.png", 1), true},
		{"no attachment", strings.Replace(orig, `, "attachments": [{"uri": "https://x.test/a.png"}]`, "", 1), true},
		{"a continuation", ohDecide("rid-1", "s-reuse", "run-x", "", "approve"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := e.turns(t)
			r := e.post(t, tc.body)
			if tc.reused {
				ohWantReused(t, r)
			} else {
				if r.header.Get("Idempotent-Replayed") != "true" {
					t.Errorf("not replayed: %s", r.raw)
				}
				if diff := cmp.Diff(first.msg.Response, r.msg.Response); diff != "" {
					t.Errorf("response (-first +retransmission):\n%s", diff)
				}
			}
			if got := e.turns(t); got != before {
				t.Errorf("a turn ran: %d → %d", before, got)
			}
		})
	}

	t.Run("a continuation's request_id", func(t *testing.T) {
		s := e.post(t, ohBody("rid-s", `{"session_id": "s-reuse-2", "user_intent": "refund order 7"}`))
		cont := s.ext(t).Continuation
		if cont == nil {
			t.Fatalf("got %s", s.raw)
		}
		approve := ohDecide("rid-c", "s-reuse-2", cont.RunID, cont.ContinuationToken, "approve")
		if r := e.post(t, approve); r.ext(t).Outcome != "completed" {
			t.Fatalf("got %s", r.raw)
		}
		ohWantReused(t, e.post(t, ohDecide("rid-c", "s-reuse-2", cont.RunID, cont.ContinuationToken, "deny")))
		if r := e.post(t, approve); r.header.Get("Idempotent-Replayed") != "true" || r.ext(t).Outcome != "completed" {
			t.Errorf("the retransmission: %s", r.raw)
		}
	})

	t.Run("racing", func(t *testing.T) {
		// Of two requests under one new id, one runs; the other is
		// either refused or, had it come first, the one that ran.
		a := ohBody("rid-race", `{"session_id": "s-race", "user_intent": "where is order 1?"}`)
		b := ohBody("rid-race", `{"session_id": "s-race", "user_intent": "where is order 2?"}`)
		before := e.turns(t)
		var wg sync.WaitGroup
		res := make([]ohResult, 2)
		for i, body := range []string{a, b} {
			wg.Go(func() { res[i] = e.post(t, body) })
		}
		wg.Wait()
		if got := e.turns(t); got != before+1 {
			t.Errorf("turns: %d → %d, want one", before, got)
		}
		codes := []string{res[0].errCode(), res[1].errCode()}
		if !(codes[0] == "" && codes[1] == "message_id_reused" || codes[0] == "message_id_reused" && codes[1] == "") {
			t.Errorf("codes %q, want one answer and one message_id_reused", codes)
		}
	})

	t.Run("after a restart", func(t *testing.T) {
		e := e.restart(t)
		before := e.turns(t)
		ohWantReused(t, e.post(t, strings.Replace(orig, "order 5", "order 6", 1)))
		if r := e.post(t, orig); r.header.Get("Idempotent-Replayed") != "true" || r.ext(t).Outcome != "completed" {
			t.Errorf("the retransmission after a restart: %s", r.raw)
		}
		if got := e.turns(t); got != before {
			t.Errorf("a turn ran: %d → %d", before, got)
		}
	})
}

// TestOpenHarnessContinuationRecorded: a continuation of a suspension a
// turn already resumed answers that turn's recorded outcome (replayed,
// no turn), whichever way it names the suspension: by run_id after the
// token resumed it, by the token after run_id did, by run_id again after
// a restart, and by the fresh token of a replayed suspension. Before,
// all but the same token in the same process answered
// harness_signal_correlation_failed.
func TestOpenHarnessContinuationRecorded(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second string // "token", "run" or "replayed-token"
		restart       bool
	}{
		{"run_id after the token", "token", "run", false},
		{"run_id after the token, restarted", "token", "run", true},
		{"the token after run_id", "run", "token", false},
		{"run_id after run_id, restarted", "run", "run", true},
		{"a replayed suspension's token after the first token, restarted", "token", "replayed-token", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newOHEnv(t, nil)
			suspend := ohBody("cr-1", `{"session_id": "s-cr", "user_intent": "refund order 7"}`)
			x := e.post(t, suspend).ext(t)
			if x.Continuation == nil {
				t.Fatalf("not suspended: %+v", x)
			}
			body := func(e *ohEnv, how, rid string) string {
				switch how {
				case "run":
					return ohDecide(rid, "s-cr", x.RunID, "", "approve")
				case "replayed-token":
					// The suspension's retransmission, rebuilt from the
					// record, carries a token of its own.
					y := e.post(t, suspend).ext(t)
					if !y.Replayed || y.Continuation == nil || y.Continuation.ContinuationToken == x.Continuation.ContinuationToken {
						t.Fatalf("the replayed suspension: %+v", y)
					}
					return ohDecide(rid, "", "", y.Continuation.ContinuationToken, "approve")
				}
				return ohDecide(rid, "s-cr", "", x.Continuation.ContinuationToken, "approve")
			}
			first := e.post(t, body(e, tc.first, "cr-2"))
			fx := first.ext(t)
			if fx.Outcome != "completed" || fx.Replayed {
				t.Fatalf("the first continuation: %s", first.raw)
			}
			if tc.restart {
				e = e.restart(t)
			}
			b := body(e, tc.second, "cr-3")
			before := e.turns(t)
			r := e.post(t, b)
			rx := r.ext(t)
			if r.msg.Response.Status != "success" || rx.Outcome != "completed" || !rx.Replayed || rx.RunID != fx.RunID ||
				r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the second continuation: %s, want the first's outcome (run %s), replayed", r.raw, fx.RunID)
			}
			if diff := cmp.Diff(first.types(t), r.types(t)); diff != "" {
				t.Errorf("directives (-first +second):\n%s", diff)
			}
			if got := e.turns(t); got != before {
				t.Errorf("a turn ran: %d → %d", before, got)
			}
		})
	}

	t.Run("a superseded suspension resumes nothing", func(t *testing.T) {
		e := newOHEnv(t, nil)
		x := e.post(t, ohBody("", `{"session_id": "s-sup", "user_intent": "refund order 7"}`)).ext(t)
		if r := e.post(t, ohBody("", `{"session_id": "s-sup", "user_intent": "where is order 5?"}`)); r.ext(t).Outcome != "completed" {
			t.Fatalf("got %s", r.raw)
		}
		for _, body := range []string{
			ohDecide("", "s-sup", x.RunID, "", "approve"),
			ohDecide("", "s-sup", "", x.Continuation.ContinuationToken, "approve"),
		} {
			ohWantTurnError(t, e.post(t, body), "harness_signal_correlation_failed", "user_correctable", false)
		}
	})
	t.Run("a run that did not suspend", func(t *testing.T) {
		e := newOHEnv(t, nil)
		x := e.post(t, ohBody("", `{"session_id": "s-done", "user_intent": "where is order 5?"}`)).ext(t)
		r := e.post(t, ohDecide("", "s-done", x.RunID, "", "approve"))
		ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
		if msg := r.msg.Response.Error.Message; !strings.Contains(msg, "completed, not suspended") {
			t.Errorf("message %q does not say the run completed", msg)
		}
	})
}

// TestOpenHarnessTokenWording: a continuation_token that does not decode
// is refused as malformed, never as "not one this engine issued" (tokens
// are not signed: the endpoint cannot tell who built one, and need not).
func TestOpenHarnessTokenWording(t *testing.T) {
	e := newOHEnv(t, nil)
	for _, tok := range []string{"ctok_aq9", "oh1.!!!", "oh1.e30"} {
		r := e.post(t, ohDecide("", "", "", tok, "approve"))
		ohWantTurnError(t, r, "harness_signal_correlation_failed", "user_correctable", false)
		msg := r.msg.Response.Error.Message
		if strings.Contains(msg, "issued") || !strings.Contains(msg, "malformed") {
			t.Errorf("token %q: message %q", tok, msg)
		}
	}
}

// TestOpenHarnessDeepNesting: a body nested past encoding/json's limit
// is refused as too deeply nested, naming the limit, not as "not valid
// JSON"; one within the limit is not refused for its depth.
func TestOpenHarnessDeepNesting(t *testing.T) {
	e := newOHEnv(t, nil)
	nest := func(n int) string {
		return ohBody("", `{"session_id": "s-deep", "user_intent": "hi", "extensions": {"x": `+
			strings.Repeat("[", n)+strings.Repeat("]", n)+`}}`)
	}
	for _, tc := range []struct {
		name   string
		body   string
		status int
		want   string
	}{
		{"10000 deep", nest(10000), http.StatusBadRequest, "10000 levels"},
		{"within the limit", nest(200), http.StatusOK, ""},
		{"deep inside a string", ohBody("", `{"session_id": "s-deep", "user_intent": "`+strings.Repeat("[", 20000)+`"}`), http.StatusOK, ""},
		{"not JSON", `{"protocol_version": `, http.StatusBadRequest, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, tc.status, r.raw)
			}
			if tc.want == "" {
				if r.msg.Response.Status != "success" {
					t.Errorf("got %.300s", r.raw)
				}
				return
			}
			if r.errCode() != "invalid_request" || !strings.Contains(r.msg.Response.Error.Message, tc.want) {
				t.Errorf("got %s, want invalid_request saying %q", r.raw, tc.want)
			}
		})
	}
}

// TestOpenHarnessCapabilityDeclined: a capability the Shell declares
// false (or null) is not asked for, so it is never denied; one it asks
// for still is. A Shell that declares openharness.ui.approval false gets,
// for a turn that suspends on an approval, status error
// capability_required naming it (a request_approval it cannot show would
// be a silent half-feature), with the turn left suspended and its
// continuation reported, which another client may use.
func TestOpenHarnessCapabilityDeclined(t *testing.T) {
	e := newOHEnv(t, nil)
	withCaps := func(rid, caps, ctx string) string {
		return fmt.Sprintf(`{"protocol_version": "1.0.0", "request_id": %q, "capabilities": %s, "request": {"context": %s}}`, rid, caps, ctx)
	}
	for _, tc := range []struct {
		name, caps string
		denied     []string
	}{
		{"declined", `{"openharness.streaming": false, "openharness.ui.rich_cards": false, "openharness.actions.parallel": null}`, nil},
		{"asked", `{"openharness.streaming": true, "openharness.ui.rich_cards": {"v": 1}}`, []string{"openharness.streaming", "openharness.ui.rich_cards"}},
		{"mixed", `{"openharness.streaming": false, "openharness.attachments.upload": true}`, []string{"openharness.attachments.upload"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post(t, withCaps("", tc.caps, `{"session_id": "s-caps", "user_intent": "hi"}`))
			var denied []string
			for _, d := range r.msg.CapabilityDenials {
				denied = append(denied, d.Capability)
			}
			if diff := cmp.Diff(tc.denied, denied); diff != "" {
				t.Errorf("denials (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("approval declined", func(t *testing.T) {
		body := withCaps("cap-1", `{"openharness.ui.approval": false}`, `{"session_id": "s-noapp", "user_intent": "refund order 7"}`)
		r := e.post(t, body)
		if r.msg.Response.Status != "error" || r.errCode() != "capability_required" || *r.msg.Response.Error.Retryable {
			t.Fatalf("got %s", r.raw)
		}
		var d map[string]string
		if err := json.Unmarshal(r.msg.Response.Error.Details, &d); err != nil || d["capability"] != "openharness.ui.approval" {
			t.Errorf("details = %s", r.msg.Response.Error.Details)
		}
		for _, typ := range r.types(t) {
			if typ == ohRequestApproval {
				t.Errorf("a request_approval the Shell cannot show: %s", r.raw)
			}
		}
		x := r.ext(t)
		if x.Outcome != "suspended" || x.Continuation == nil {
			t.Fatalf("extension %+v, want the suspension and its continuation", x)
		}
		if again := e.post(t, body); !bytes.Equal(again.msg.Response.Error.Details, r.msg.Response.Error.Details) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("the retransmission: %s", again.raw)
		}
		// Another client (approvals supported) continues it.
		c := e.post(t, ohDecide("cap-2", "s-noapp", "", x.Continuation.ContinuationToken, "approve"))
		if c.ext(t).Outcome != "completed" {
			t.Errorf("the continuation: %s", c.raw)
		}
	})
	t.Run("approval declined, no suspension", func(t *testing.T) {
		r := e.post(t, withCaps("", `{"openharness.ui.approval": false}`, `{"session_id": "s-noapp-2", "user_intent": "where is order 5?"}`))
		if r.msg.Response.Status != "success" {
			t.Errorf("got %s", r.raw)
		}
	})
}

// TestOpenHarnessIDsRefuseControls: correlation_id, conversation_id and
// request_id refuse C1 control characters (U+0080-U+009F) and format
// characters as they refuse C0 ones, and run nothing. Before, C1 passed.
func TestOpenHarnessIDsRefuseControls(t *testing.T) {
	e := newOHEnv(t, nil)
	for _, v := range []string{`a\u0085b`, `\u009b31m`, `x\u0080`, `rtl\u202e`, `zw\u200b`, `tab\t`} {
		for _, tc := range []struct{ field, body string }{
			{"correlation_id", `{"protocol_version": "1.0.0", "correlation_id": "` + v + `", "request": {"context": {"session_id": "s-c1", "user_intent": "hi"}}}`},
			{"request_id", `{"protocol_version": "1.0.0", "request_id": "` + v + `", "request": {"context": {"session_id": "s-c1", "user_intent": "hi"}}}`},
			{"request.context.conversation_id", `{"protocol_version": "1.0.0", "request": {"context": {"session_id": "s-c1", "conversation_id": "` + v + `", "user_intent": "hi"}}}`},
		} {
			t.Run(tc.field+" "+v, func(t *testing.T) {
				before := e.turns(t)
				ohWantProtocolError(t, e.post(t, tc.body), "invalid_request", tc.field)
				if got := e.turns(t); got != before {
					t.Errorf("a turn ran")
				}
			})
		}
	}
	// Printable non-ASCII text is fine.
	r := e.post(t, `{"protocol_version": "1.0.0", "correlation_id": "trace-é-✓", "request": {"context": {"session_id": "s-c1", "conversation_id": "onglet-2 é", "user_intent": "hi"}}}`)
	if r.msg.Response.Status != "success" {
		t.Errorf("got %s", r.raw)
	}
}

// TestOpenHarnessRacingContinuations: continuations of one suspension
// sent at once, by its token and by its run_id under distinct
// request_ids, resume it once; every one answers that resume's outcome
// (the losers replayed), none harness_signal_correlation_failed.
func TestOpenHarnessRacingContinuations(t *testing.T) {
	e := newOHEnv(t, nil)
	x := e.post(t, ohBody("", `{"session_id": "s-racec", "user_intent": "refund order 7"}`)).ext(t)
	if x.Continuation == nil {
		t.Fatalf("not suspended: %+v", x)
	}
	before := e.completedTurns(t)
	res := make([]ohResult, 6)
	var wg sync.WaitGroup
	for i := range res {
		body := ohDecide(fmt.Sprint("rc-", i), "s-racec", x.RunID, "", "approve")
		if i%2 == 0 {
			body = ohDecide(fmt.Sprint("rc-", i), "s-racec", "", x.Continuation.ContinuationToken, "approve")
		}
		wg.Go(func() { res[i] = e.post(t, body) })
	}
	wg.Wait()
	if got := e.completedTurns(t); got != before+1 {
		t.Errorf("completed turns: %d → %d, want one", before, got)
	}
	run, fresh := "", 0
	for i, r := range res {
		rx := r.ext(t)
		if rx.Outcome != "completed" {
			t.Fatalf("continuation %d: %s", i, r.raw)
		}
		if r.header.Get("Idempotent-Replayed") != "true" {
			fresh++
		}
		if run == "" {
			run = rx.RunID
		}
		if rx.RunID != run {
			t.Errorf("continuation %d answers run %s, another %s", i, rx.RunID, run)
		}
	}
	if fresh != 1 {
		t.Errorf("%d answers not replayed, want 1", fresh)
	}
}

// completedTurns is the number of completed chat turns the server ran
// (its /metrics): a continuation that lost a race for its suspension is
// counted as an errored turn of its own.
func (e *ohEnv) completedTurns(t *testing.T) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^armature_turns_total\{outcome="completed"\} (\d+)$`).FindStringSubmatch(string(e.get(t, "/metrics")))
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestOpenHarnessWaiterOutlivesOriginal: a retransmission waiting for
// its original, whose client leaves before the original has an answer
// (it was itself waiting for a continuation under way), answers itself
// once that continuation is settled. Before, it got an empty body: the
// original's missing answer was taken for the retransmission's own
// client having left.
func TestOpenHarnessWaiterOutlivesOriginal(t *testing.T) {
	env := newOHEnv(t, nil)
	x := env.post(t, ohBody("", `{"session_id": "s-wait", "user_intent": "refund order 7"}`)).ext(t)
	if x.Continuation == nil {
		t.Fatalf("not suspended: %+v", x)
	}
	ep := &ohEndpoint{s: env.srv, requests: newOHMemo(ohMemoCapacity, ohMemoBytes), tokens: newOHMemo(ohMemoCapacity, ohMemoBytes)}
	// A continuation with this token is under way.
	tokKey := ohKey(DefaultTenant, "token", x.Continuation.ContinuationToken)
	held, owner := ep.tokens.claim(tokKey)
	if !owner {
		t.Fatal("the token's entry is taken")
	}
	body := ohDecide("w-1", "s-wait", "", x.Continuation.ContinuationToken, "approve")
	serve := func(ctx context.Context, into chan<- *httptest.ResponseRecorder) {
		r := httptest.NewRequest(http.MethodPost, "http://localhost/v1/openharness", strings.NewReader(body))
		r = r.WithContext(context.WithValue(ctx, tenantKey{}, DefaultTenant))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		_ = ep.serve(rec, r)
		into <- rec
	}
	origCtx, leave := context.WithCancel(context.Background())
	orig, retrans := make(chan *httptest.ResponseRecorder, 1), make(chan *httptest.ResponseRecorder, 1)
	go serve(origCtx, orig)
	time.Sleep(100 * time.Millisecond) // the original waits for the continuation under way
	go serve(context.Background(), retrans)
	time.Sleep(100 * time.Millisecond) // the retransmission waits for the original
	leave()
	<-orig
	ep.tokens.settle(tokKey, held, nil, false) // the continuation under way is given up too
	select {
	case rec := <-retrans:
		if rec.Body.Len() == 0 {
			t.Fatalf("the retransmission got an empty answer (status %d)", rec.Code)
		}
		var msg ohResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Response.Status != "success" {
			t.Fatalf("the retransmission: %s", rec.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the retransmission did not answer")
	}
}

// TestOpenHarnessDecisionWithoutContinuation: a decision
// (context.extensions["dev.armature"].signal_payload or option) without
// a continuation is an invalid request and runs nothing. Before, it ran
// as a new message, which superseded the very suspension it meant to
// decide. An invalid auth.session_id is reported under its own field,
// and one that differs from context.session_id is refused (the turn
// would run in one of two conversations; before, context's silently won).
func TestOpenHarnessDecisionWithoutContinuation(t *testing.T) {
	e := newOHEnv(t, nil)
	x := e.post(t, ohBody("", `{"session_id": "s-nocont", "user_intent": "refund order 7"}`)).ext(t)
	if x.Continuation == nil {
		t.Fatalf("not suspended: %+v", x)
	}
	for _, ext := range []string{`{"option": "approve"}`, `{"signal_payload": {"approval": {"approved": true}}}`} {
		before := e.turns(t)
		r := e.post(t, ohBody("", `{"session_id": "s-nocont", "user_intent": "Approve", "extensions": {"dev.armature": `+ext+`}}`))
		ohWantProtocolError(t, r, "invalid_request", "request.context.continuation")
		if got := e.turns(t); got != before {
			t.Errorf("%s: a turn ran", ext)
		}
	}
	if r := e.post(t, ohDecide("", "s-nocont", "", x.Continuation.ContinuationToken, "approve")); r.ext(t).Outcome != "completed" {
		t.Errorf("the suspension did not stay pending: %s", r.raw)
	}
	r := e.post(t, `{"protocol_version": "1.0.0", "request": {"auth": {"session_id": "bad id!"}, "context": {"user_intent": "hi"}}}`)
	ohWantProtocolError(t, r, "invalid_request", "request.auth.session_id")
	// Two different sessions named: which one is a guess.
	before := e.turns(t)
	r = e.post(t, `{"protocol_version": "1.0.0", "request": {"auth": {"session_id": "s-one"}, "context": {"session_id": "s-two", "user_intent": "hi"}}}`)
	ohWantProtocolError(t, r, "invalid_request", "request.auth.session_id")
	if got := e.turns(t); got != before {
		t.Errorf("a turn ran")
	}
	r = e.post(t, `{"protocol_version": "1.0.0", "request": {"auth": {"session_id": "s-one"}, "context": {"session_id": "s-one", "user_intent": "hi"}}}`)
	if r.msg.Response.Status != "success" || r.ext(t).SessionID != "s-one" {
		t.Errorf("the same session named twice: %s", r.raw)
	}
}

// TestOpenHarnessRecordedResumeIsolated: another tenant's continuation
// of a suspension a turn resumed (by its token, or its run_id, with or
// without the session id) gets harness_signal_correlation_failed, never
// the recorded outcome.
func TestOpenHarnessRecordedResumeIsolated(t *testing.T) {
	e := newOHEnv(t, func(c *Config) {
		c.Tokens = []Token{{Secret: ohSecretA, Tenant: "tenant-a"}, {Secret: ohSecretB, Tenant: "tenant-b"}}
	})
	e.token = ohSecretA
	x := e.post(t, ohBody("", `{"session_id": "s-iso2", "user_intent": "refund order 7"}`)).ext(t)
	if x.Continuation == nil {
		t.Fatalf("not suspended: %+v", x)
	}
	if r := e.post(t, ohDecide("", "s-iso2", "", x.Continuation.ContinuationToken, "approve")); r.ext(t).Outcome != "completed" {
		t.Fatalf("got %s", r.raw)
	}
	e.token = ohSecretB
	for _, body := range []string{
		ohDecide("", "", "", x.Continuation.ContinuationToken, "approve"),
		ohDecide("", "s-iso2", "", x.Continuation.ContinuationToken, "approve"),
		ohDecide("", "", x.RunID, "", "approve"),
		ohDecide("", "s-iso2", x.RunID, "", "approve"),
	} {
		ohWantTurnError(t, e.post(t, body), "harness_signal_correlation_failed", "user_correctable", false)
	}
}

// TestOpenHarnessRequestIDReusedAgent: a request_id sent again routed to
// another agent is refused, in the cache and, from the first run's
// record, after a restart; routed to the same agent it replays.
func TestOpenHarnessRequestIDReusedAgent(t *testing.T) {
	twoAgents := func(c *Config) {
		c.Agents = append(c.Agents, &Agent{ID: "other", Chat: c.Agents[0].Chat, Model: c.Agents[0].Model})
	}
	e := newOHEnv(t, twoAgents)
	body := func(agent string) string {
		return ohBody("ra-1", `{"session_id": "s-ra", "user_intent": "hi", "task_hint": {"dev.armature.agent": "`+agent+`"}}`)
	}
	if r := e.post(t, body("demo")); r.ext(t).Agent != "demo" {
		t.Fatalf("got %s", r.raw)
	}
	ohWantReused(t, e.post(t, body("other")))
	e = e.restart(t)
	ohWantReused(t, e.post(t, body("other")))
	if r := e.post(t, body("demo")); r.header.Get("Idempotent-Replayed") != "true" || r.ext(t).Agent != "demo" {
		t.Errorf("the retransmission after a restart: %s", r.raw)
	}
}

// twoRefunds is the demo model, except that once a refund of order 7
// ran it asks for a refund of order 8 too: a turn that suspends again,
// in the same invocation, on another approval.
type twoRefunds struct{ demo.Model }

func (m twoRefunds) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if n := len(req.Messages); n > 0 {
		if last := req.Messages[n-1]; last.Role == llm.RoleTool && strings.Contains(last.Text(), "for order 7") {
			msg := llm.AssistantToolCalls(llm.ToolCall{ID: fmt.Sprint("call_8_", n), Name: "issue_refund",
				Arguments: json.RawMessage(`{"order":"8","amount":30}`)})
			return &llm.Response{Message: msg, FinishReason: llm.FinishToolCalls, Raw: json.RawMessage(`{}`)}, nil
		}
	}
	return m.Model.Complete(ctx, req)
}

// newOHEnvAgent is newOHEnv over an agent of the demo's tools with the
// given model.
func newOHEnvAgent(t *testing.T, model llm.Provider) *ohEnv {
	t.Helper()
	return newOHEnvAgentAt(t, filepath.Join(t.TempDir(), "armature.db"), model, 0)
}

// newOHEnvAgentAt is newOHEnvAgent on the SQLite file at path, its
// session leases lasting lease (0: the default).
func newOHEnvAgentAt(t *testing.T, path string, model llm.Provider, lease time.Duration) *ohEnv {
	t.Helper()
	ohRefDir(t)
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	a, err := agent.New(agent.Config{Provider: model, Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		t.Fatal(err)
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints()),
		Locker: store.SessionLocker(sqlite.LockerConfig{TTL: lease})})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runs.Close(context.Background()) })
	srv, err := New(Config{Agents: []*Agent{{ID: "demo", Chat: h}}, Sessions: store, Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	return &ohEnv{srv: srv, h: srv.Handler(), store: store, path: path}
}

// TestOpenHarnessStaleContinuation: once a continuation resumed a
// suspension and the turn suspended again in the same invocation (a
// second approval), a repeat of the first continuation in another form
// (its run_id after its token, or under another request_id) answers the
// first resume's recorded outcome; it never applies its decision to the
// second approval, which stays pending. Before, the run_id resolved to
// whatever the invocation awaited now, and approved the second refund
// unseen.
func TestOpenHarnessStaleContinuation(t *testing.T) {
	for _, second := range []string{"run", "token"} {
		t.Run("first by token, then by "+second, func(t *testing.T) {
			e := newOHEnvAgent(t, twoRefunds{})
			x := e.post(t, ohBody("", `{"session_id": "s-stale", "user_intent": "refund order 7"}`)).ext(t)
			if x.Outcome != "suspended" {
				t.Fatalf("not suspended: %+v", x)
			}
			r1 := e.post(t, ohDecide("st-1", "s-stale", "", x.Continuation.ContinuationToken, "approve"))
			y := r1.ext(t)
			if y.Outcome != "suspended" || y.Continuation == nil || y.Continuation.RunID == x.RunID {
				t.Fatalf("the first approval did not lead to a second one: %s", r1.raw)
			}
			body := ohDecide("st-2", "s-stale", x.RunID, "", "approve")
			if second == "token" {
				body = ohDecide("st-2", "s-stale", "", x.Continuation.ContinuationToken, "approve")
			}
			r := e.post(t, body)
			rx := r.ext(t)
			if rx.Outcome != "suspended" || rx.RunID != y.RunID || r.header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("the repeat: %s, want the first resume's outcome (run %s), replayed", r.raw, y.RunID)
			}
			// The second approval is still pending: its own continuation
			// decides it.
			d := e.post(t, ohDecide("st-3", "s-stale", "", y.Continuation.ContinuationToken, "deny"))
			if dx := d.ext(t); dx.Outcome != "completed" || dx.Replayed {
				t.Fatalf("the second approval's decision: %s", d.raw)
			}
			if !strings.Contains(string(d.raw), "The user denied this call.") {
				t.Errorf("the second refund was not denied: %s", d.raw)
			}
		})
	}
}

// TestOpenHarnessContinuationWaiterOwnPayload: a continuation that waits
// for another continuation of the same token under way, which resumes
// nothing (its payload refused), resumes with its own payload. Before,
// it got the other's refusal, and its valid decision was lost.
func TestOpenHarnessContinuationWaiterOwnPayload(t *testing.T) {
	env := newOHEnv(t, nil)
	x := env.post(t, ohBody("", `{"session_id": "s-own", "user_intent": "refund order 7"}`)).ext(t)
	if x.Continuation == nil {
		t.Fatalf("not suspended: %+v", x)
	}
	ep := &ohEndpoint{s: env.srv, requests: newOHMemo(ohMemoCapacity, ohMemoBytes), tokens: newOHMemo(ohMemoCapacity, ohMemoBytes)}
	tokKey := ohKey(DefaultTenant, "token", x.Continuation.ContinuationToken)
	held, owner := ep.tokens.claim(tokKey) // a continuation ("maybe later") under way
	if !owner {
		t.Fatal("the token's entry is taken")
	}
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		r := httptest.NewRequest(http.MethodPost, "http://localhost/v1/openharness",
			strings.NewReader(ohDecide("own-1", "s-own", "", x.Continuation.ContinuationToken, "approve")))
		r = r.WithContext(context.WithValue(context.Background(), tenantKey{}, DefaultTenant))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		_ = ep.serve(rec, r)
		done <- rec
	}()
	time.Sleep(100 * time.Millisecond) // the approval waits for the one under way
	refused := ep.base(nil, nil)
	refused.Response = ohResponsePayload{Status: "error", Error: &ohError{Code: "suspension_resume_payload_invalid"}}
	ep.tokens.settle(tokKey, held, refused, false)
	select {
	case rec := <-done:
		var msg ohResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &msg); err != nil || msg.Response.Status != "success" {
			t.Fatalf("the approval: %s", rec.Body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the approval did not answer")
	}
}

// TestOpenHarnessContinuationRequestIDDurable: a continuation's
// request_id names its request durably, as a message's does: after a
// restart (or once the response cache forgot it) a message sent with it
// is refused, and a continuation sent with a message's request_id is
// refused, running nothing (the refund does not run). Before, a
// continuation's request_id was compared in the cache only: after a
// restart both ran.
func TestOpenHarnessContinuationRequestIDDurable(t *testing.T) {
	e := newOHEnv(t, nil)
	// A continuation's id, reused by a message.
	s := e.post(t, ohBody("rid-s", `{"session_id": "s-durable", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	approve := ohDecide("rid-c", "s-durable", cont.RunID, cont.ContinuationToken, "approve")
	if r := e.post(t, approve); r.ext(t).Outcome != "completed" {
		t.Fatalf("got %s", r.raw)
	}
	// A message's id, reused by a continuation.
	s2 := e.post(t, ohBody("rid-m", `{"session_id": "s-durable-2", "user_intent": "refund order 7"}`))
	cont2 := s2.ext(t).Continuation
	if cont2 == nil {
		t.Fatalf("got %s", s2.raw)
	}
	// Another suspension of the first session, to be decided with the
	// first continuation's request_id.
	s3 := e.post(t, ohBody("rid-s3", `{"session_id": "s-durable", "user_intent": "refund order 7"}`))
	cont3 := s3.ext(t).Continuation
	if cont3 == nil {
		t.Fatalf("got %s", s3.raw)
	}
	e = e.restart(t)
	before := e.turns(t)
	ohWantReused(t, e.post(t, ohBody("rid-c", `{"session_id": "s-durable", "user_intent": "where is order 5?"}`)))
	ohWantReused(t, e.post(t, ohDecide("rid-m", "s-durable-2", cont2.RunID, cont2.ContinuationToken, "approve")))
	ohWantReused(t, e.post(t, ohDecide("rid-c", "s-durable", cont3.RunID, cont3.ContinuationToken, "approve")))
	if got := e.turns(t); got != before {
		t.Errorf("a turn ran: %d → %d", before, got)
	}
	// The refused continuation does not stand for the message whose
	// request_id it reused: that message's retransmission replays.
	if r := e.post(t, ohBody("rid-m", `{"session_id": "s-durable-2", "user_intent": "refund order 7"}`)); r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the message's retransmission after a refused continuation under its id: %s", r.raw)
	}
	// The retransmission of the continuation still answers its outcome,
	// and the suspension still takes a decision under a new id.
	if r := e.post(t, approve); r.header.Get("Idempotent-Replayed") != "true" || r.ext(t).Outcome != "completed" {
		t.Errorf("the retransmission after a restart: %s", r.raw)
	}
	if r := e.post(t, ohDecide("rid-d", "s-durable-2", cont2.RunID, cont2.ContinuationToken, "approve")); r.ext(t).Outcome != "completed" {
		t.Errorf("the decision under a new id: %s", r.raw)
	}
}

// TestOpenHarnessFieldNamesExact: a key that names a field only up to
// case is an unknown field, ignored (PROTOCOLS.md §1), not a second
// value of the field: encoding/json took the last of "session_id" and
// "Session_ID", so a gateway checking the exact names saw another
// session, request_id and intent than the turn used.
func TestOpenHarnessFieldNamesExact(t *testing.T) {
	e := newOHEnv(t, nil)
	r := e.post(t, `{"protocol_version": "1.0.0", "request_id": "rid-case", "REQUEST_ID": "other",
		"request": {"context": {"session_id": "s-case-mine", "Session_ID": "s-case-other", "user_intent": "hello", "User_Intent": "please refund order 7"}}}`)
	x := r.ext(t)
	if r.msg.RequestID != "rid-case" || x.SessionID != "s-case-mine" || x.Outcome != "completed" {
		t.Fatalf("request_id %q, session %q, outcome %q: %s", r.msg.RequestID, x.SessionID, x.Outcome, r.raw)
	}
}

// stallAfterRefund is the demo model, whose call after a tool's result
// signals entered and blocks until release is closed: a resume whose
// approved call ran, caught before its turn ends (a process killed
// there).
type stallAfterRefund struct {
	demo.Model
	entered, release chan struct{}
}

func (m *stallAfterRefund) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if msgs := req.Transcript(); len(msgs) > 0 && msgs[len(msgs)-1].Role == llm.RoleTool {
		close(m.entered)
		<-m.release
	}
	return m.Model.Complete(ctx, req)
}

// TestOpenHarnessContinuationAfterCrashTookEffect: a process killed
// after an approved refund ran, before its turn ended, leaves the
// resume's run failed run_interrupted (retryable) once the next process
// reconciles it. The continuation sent again, with its request_id or a
// new one, is told the decision took effect (not retryable); before,
// it replayed the interrupted run's "retryable" error forever, so a
// client retried, or told its user the refund failed.
func TestOpenHarnessContinuationAfterCrashTookEffect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := &stallAfterRefund{entered: make(chan struct{}), release: make(chan struct{})}
	first := newOHEnvAgentAt(t, filepath.Join(dir, "first.db"), m, 500*time.Millisecond)
	s := first.post(t, ohBody("rid-s", `{"session_id": "s-crash", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	approve := ohDecide("rid-c", "s-crash", cont.RunID, cont.ContinuationToken, "approve")
	done := make(chan struct{})
	go func() {
		defer close(done)
		first.post(t, approve)
	}()
	t.Cleanup(func() { close(m.release); <-done })
	<-m.entered // the refund ran; the process dies now

	// What it leaves on disk (a consistent copy of the file, taken
	// while the resume waits), served by the next process once the
	// dead one's session lease lapsed.
	if err := first.srv.runs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "next.db")
	db, err := sql.Open("sqlite", filepath.Join(dir, "first.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	time.Sleep(time.Second)
	next := newOHEnvAgentAt(t, path, demo.Model{}, 0)
	if _, err := next.srv.RecoverRuns(ctx); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{approve, ohDecide("rid-c2", "s-crash", cont.RunID, cont.ContinuationToken, "approve")} {
		r := next.post(t, body)
		ohWantTurnError(t, r, string(errcat.HarnessSignalCorrelationFailed), "user_correctable", false)
		if !strings.Contains(r.msg.Response.Error.Message, "took effect") {
			t.Errorf("the continuation after the crash: %s, want that the decision took effect", r.raw)
		}
	}
}
