package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestOpenHarnessIdempotencyAcrossRestart retransmits, after a restart,
// a request_id (with and without a session_id) and a spent continuation
// token: each answers the recorded response, marked replayed, and runs
// no turn; the session's history is unchanged.
func TestOpenHarnessIdempotencyAcrossRestart(t *testing.T) {
	e := newOHEnv(t, nil)
	named := ohBody("req-named", `{"session_id": "s-dur", "user_intent": "where is order 3?"}`)
	minted := ohBody("req-minted", `{"user_intent": "where is order 4?"}`)
	first := e.post(t, named).ext(t)
	second := e.post(t, minted).ext(t)
	susp := e.post(t, ohBody("req-refund", `{"session_id": "s-dur", "user_intent": "refund order 7"}`)).ext(t)
	if first.Outcome != "completed" || second.Outcome != "completed" || susp.Outcome != "suspended" || second.SessionID == "" {
		t.Fatalf("setup: %+v / %+v / %+v", first, second, susp)
	}
	approve := ohDecide("req-approve", "s-dur", susp.Continuation.RunID, susp.Continuation.ContinuationToken, "approve")
	resumed := e.post(t, approve).ext(t)
	if resumed.Outcome != "completed" || !resumed.Resumed || resumed.Replayed {
		t.Fatalf("resume: %+v", resumed)
	}
	history := func(e *ohEnv, session string) int {
		var s struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(e.get(t, "/v1/sessions/"+session), &s); err != nil {
			t.Fatal(err)
		}
		return len(s.Messages)
	}
	before, beforeMinted := history(e, "s-dur"), history(e, second.SessionID)

	e = e.restart(t)
	turns := e.turns(t)
	for _, tc := range []struct {
		name, body string
		want       ohExtension
	}{
		{"request_id in a named session", named, first},
		{"request_id in a minted session", minted, second},
		{"spent continuation token", ohDecide("req-approve-2", "s-dur", susp.Continuation.RunID, susp.Continuation.ContinuationToken, "approve"), resumed},
	} {
		got := e.post(t, tc.body).ext(t)
		if !got.Replayed || got.Outcome != tc.want.Outcome || got.SessionID != tc.want.SessionID || got.RunID != tc.want.RunID {
			t.Errorf("%s after a restart: %+v, want the recorded %+v, replayed", tc.name, got, tc.want)
		}
	}
	if n := e.turns(t); n != turns {
		t.Errorf("retransmissions ran %d turns", n-turns)
	}
	if a, b := history(e, "s-dur"), history(e, second.SessionID); a != before || b != beforeMinted {
		t.Errorf("histories went from %d, %d to %d, %d messages", before, beforeMinted, a, b)
	}
}

// TestRetransmitsAcrossRestart retransmits a REST message_id and an
// OpenAI Idempotency-Key (named and derived sessions) before and after a
// restart: the recorded outcome answers, marked replayed, with no second
// turn and no second run record.
func TestRetransmitsAcrossRestart(t *testing.T) {
	e := newOHEnv(t, nil)
	do := func(e *ohEnv, path, body string, header ...string) (http.Header, map[string]any) {
		t.Helper()
		rec := e.postJSON(path, body, header...)
		if rec.Code != http.StatusOK {
			t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return rec.Header(), out
	}
	rest := func(e *ohEnv) map[string]any {
		_, out := do(e, "/v1/sessions/rt/messages", `{"content":"where is order 5?","message_id":"msg-1"}`)
		return out
	}
	openai := func(e *ohEnv, key string, header ...string) (string, map[string]any) {
		h, out := do(e, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"where is order 6?"}]}`,
			append([]string{"Idempotency-Key", key}, header...)...)
		return h.Get(SessionHeader), out
	}
	runs := func(e *ohEnv, session string) int {
		var r struct {
			Runs []json.RawMessage `json:"runs"`
		}
		if err := json.Unmarshal(e.get(t, "/v1/sessions/"+session+"/runs"), &r); err != nil {
			t.Fatal(err)
		}
		return len(r.Runs)
	}
	first := rest(e)
	derived, oa := openai(e, "key-derived")
	named, ob := openai(e, "key-named", SessionHeader, "conv-9")
	if first["replayed"] == true || oa["x_armature"].(map[string]any)["replayed"] == true || derived == "" || named != "conv-9" {
		t.Fatalf("first tries: %v / %v / %q %q", first, oa, derived, named)
	}
	check := func(when string, e *ohEnv) {
		t.Helper()
		turns := e.turns(t)
		if got := rest(e); got["replayed"] != true || got["invocation_id"] != first["invocation_id"] {
			t.Errorf("%s: REST retransmission %v, want the recorded %v, replayed", when, got, first)
		}
		if sid, got := openai(e, "key-derived"); sid != derived || got["x_armature"].(map[string]any)["replayed"] != true ||
			got["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] !=
				oa["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"] {
			t.Errorf("%s: OpenAI retransmission (derived session) %s %v, want %s %v replayed", when, sid, got, derived, oa)
		} else if got["id"] != oa["id"] || got["created"] != oa["created"] {
			// A client deduplicating completions by id sees one.
			t.Errorf("%s: OpenAI retransmission is completion %v created %v, want the first try's %v %v", when, got["id"], got["created"], oa["id"], oa["created"])
		}
		if sid, got := openai(e, "key-named", SessionHeader, "conv-9"); sid != "conv-9" || got["x_armature"].(map[string]any)["replayed"] != true ||
			got["x_armature"].(map[string]any)["invocation_id"] != ob["x_armature"].(map[string]any)["invocation_id"] {
			t.Errorf("%s: OpenAI retransmission (named session) %v, want %v replayed", when, got, ob)
		}
		if n := e.turns(t); n != turns {
			t.Errorf("%s: retransmissions ran %d turns", when, n-turns)
		}
		for _, s := range []string{"rt", derived, "conv-9"} {
			if n := runs(e, s); n != 1 {
				t.Errorf("%s: session %s has %d runs, want 1", when, s, n)
			}
		}
	}
	time.Sleep(1100 * time.Millisecond) // a retransmission's second is not its first try's
	check("before a restart", e)
	check("after a restart", e.restart(t))
}

// TestMessageIDReused: a REST message_id or an OpenAI Idempotency-Key
// given again with another message is refused (message_id_reused: REST
// answers the errored outcome, the OpenAI endpoint 400) and runs
// nothing; the first message still replays. Before, the other message
// got the first one's answer.
func TestMessageIDReused(t *testing.T) {
	e := newOHEnv(t, nil)
	do := func(path, body string, header ...string) (int, map[string]any) {
		t.Helper()
		rec := e.postJSON(path, body, header...)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Code, out
	}
	rest := func(content string) map[string]any {
		_, out := do("/v1/sessions/ru/messages", `{"content":"`+content+`","message_id":"msg-1"}`)
		return out
	}
	openai := func(content string) (int, map[string]any) {
		return do("/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"`+content+`"}]}`,
			"Idempotency-Key", "key-1", SessionHeader, "ru-oai")
	}
	if out := rest("where is order 5?"); out["outcome"] != "completed" {
		t.Fatalf("REST: %v", out)
	}
	if code, out := openai("where is order 6?"); code != http.StatusOK {
		t.Fatalf("OpenAI: %d %v", code, out)
	}
	turns := e.turns(t)
	if out := rest("where is order 7?"); out["outcome"] != "errored" || out["error"].(map[string]any)["category"] != "message_id_reused" {
		t.Errorf("REST, another message under the same message_id: %v", out)
	}
	if code, out := openai("where is order 8?"); code != http.StatusBadRequest || out["error"].(map[string]any)["code"] != "message_id_reused" {
		t.Errorf("OpenAI, another message under the same Idempotency-Key: %d %v", code, out)
	}
	if out := rest("where is order 5?"); out["replayed"] != true {
		t.Errorf("REST, the first message again: %v", out)
	}
	if code, out := openai("where is order 6?"); code != http.StatusOK || out["x_armature"].(map[string]any)["replayed"] != true {
		t.Errorf("OpenAI, the first message again: %d %v", code, out)
	}
	if n := e.turns(t); n != turns {
		t.Errorf("%d turns ran", n-turns)
	}
}

// postJSON serves a JSON POST of body to path with the header pairs given.
func (e *ohEnv) postJSON(path, body string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "http://localhost"+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	return rec
}
