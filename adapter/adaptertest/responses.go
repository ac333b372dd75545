package adaptertest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// respObject is a Responses API response as a client decodes it.
type respObject struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
	Output    []respItem `json:"output"`
	XArmature struct {
		SessionID string `json:"session_id"`
		RunID     string `json:"run_id"`
		Outcome   string `json:"outcome"`
	} `json:"x_armature"`
}

// respItem is one output item of a response.
type respItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Content []struct {
		Text string `json:"text"`
	} `json:"content"`
	Name   string  `json:"name"`
	Output *string `json:"output"`
	Error  *string `json:"error"`
}

// kinds lists the output's item types, with the tool name of a call or
// an approval request ("mcp_call:lookup_order").
func (r respObject) kinds() string {
	var k []string
	for _, it := range r.Output {
		if it.Name != "" {
			k = append(k, it.Type+":"+it.Name)
		} else {
			k = append(k, it.Type)
		}
	}
	return strings.Join(k, " ")
}

// text is everything the output says: its messages' text, its calls'
// outputs and errors.
func (r respObject) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
		for _, s := range []*string{it.Output, it.Error} {
			if s != nil {
				b.WriteString(" " + *s)
			}
		}
	}
	return b.String()
}

// approval returns the id of the output's approval request ("" if none).
func (r respObject) approval() string {
	for _, it := range r.Output {
		if it.Type == "mcp_approval_request" {
			return it.ID
		}
	}
	return ""
}

// respError is an OpenAI error body.
type respError struct {
	Error struct {
		Type string `json:"type"`
		Code string `json:"code"`
	} `json:"error"`
}

// respond posts a Responses request (model: the script's agent) on the
// session named, when not "", by X-Armature-Session-Id; it decodes the
// response, or the error when the status is not 200.
func (in *instance) respond(t *testing.T, session string, body map[string]any) (respObject, int, respError) {
	t.Helper()
	body["model"] = AgentID
	code, raw, err := in.send("POST", "/v1/responses", body, sessionHeader(session))
	if err != nil || code >= 500 && code != http.StatusBadGateway && code != http.StatusServiceUnavailable {
		t.Fatalf("POST /v1/responses: %d %v\n%s", code, err, raw)
	}
	var r respObject
	var e respError
	into := any(&r)
	if code != http.StatusOK {
		into = &e
	}
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatalf("POST /v1/responses: %d %v\n%s", code, err, raw)
	}
	return r, code, e
}

// respEvent is one event of a streamed response.
type respEvent struct {
	name string
	data map[string]any
}

// sessionHeader names session in X-Armature-Session-Id (none for "").
func sessionHeader(session string) map[string]string {
	if session == "" {
		return nil
	}
	return map[string]string{"X-Armature-Session-Id": session}
}

// respondStream posts a streamed Responses request and reads its events
// to the end (without t: it may run on another goroutine). A request
// answered with another status than 200 (a turn that failed before it
// streamed anything) returns that status and the error.
func (in *instance) respondStream(session string, body map[string]any) ([]respEvent, int, respError, error) {
	body["model"], body["stream"] = AgentID, true
	code, raw, err := in.send("POST", "/v1/responses", body, sessionHeader(session))
	if err != nil || code != http.StatusOK {
		var e respError
		if err == nil {
			err = json.Unmarshal(raw, &e)
		}
		return nil, code, e, err
	}
	var out []respEvent
	var name string
	for line := range strings.Lines(string(raw)) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var d map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d); err != nil {
				return out, code, respError{}, err
			}
			out = append(out, respEvent{name, d})
		}
	}
	return out, code, respError{}, nil
}

// stream is respondStream for the test's goroutine: it fails t unless
// the stream opened.
func (in *instance) stream(t *testing.T, session string, body map[string]any) []respEvent {
	t.Helper()
	evs, code, e, err := in.respondStream(session, body)
	if err != nil || code != http.StatusOK {
		t.Fatalf("POST /v1/responses (streamed): %d %+v %v", code, e, err)
	}
	return evs
}

// streamed checks a stream's framing (each event's type is its name,
// sequence numbers count from 0), and returns its event names (runs of
// text deltas as one), its text deltas joined, and the response its
// last event carries.
func streamed(t *testing.T, evs []respEvent) (names []string, text string, final respObject) {
	t.Helper()
	var b strings.Builder
	for i, ev := range evs {
		if ev.name != "response.output_text.delta" || len(names) == 0 || names[len(names)-1] != ev.name {
			names = append(names, ev.name)
		}
		if ev.data["type"] != ev.name || ev.data["sequence_number"] != float64(i) {
			t.Errorf("event %d of the stream: %v", i, ev.data)
		}
		if d, ok := ev.data["delta"].(string); ok && ev.name == "response.output_text.delta" {
			b.WriteString(d)
		}
	}
	for i := len(evs) - 1; i >= 0; i-- {
		if r, ok := evs[i].data["response"]; ok {
			raw, _ := json.Marshal(r)
			if err := json.Unmarshal(raw, &final); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	return names, b.String(), final
}

// responses is the script's part on the Responses API, before the last
// restart: a turn continued by previous_response_id (the upstream keeps
// the conversation), a streamed tool turn, an approval started on REST
// and denied over Responses (then decided again: 409). It returns the
// id of a response awaiting approval, started on a stream, that
// responsesAfterRestart approves.
func responses(t *testing.T, s *instance) (pending respObject) {
	t.Run("a turn continued by previous_response_id over Responses", func(t *testing.T) {
		first, code, e := s.respond(t, "", map[string]any{"input": "hello Responses"})
		if code != http.StatusOK || first.Status != "completed" || !strings.Contains(first.text(), "hello Responses") {
			t.Fatalf("Responses plain turn: %d %+v %+v", code, first, e)
		}
		next, code, e := s.respond(t, "", map[string]any{"previous_response_id": first.ID, "input": "where is order 4?"})
		if code != http.StatusOK || next.kinds() != "mcp_call:lookup_order message" || !strings.Contains(next.text(), "order 4: shipped") ||
			next.XArmature.SessionID != first.XArmature.SessionID || next.ID != next.XArmature.RunID {
			t.Fatalf("Responses continuation: %d %+v %+v", code, next, e)
		}
		var users []string
		for _, m := range s.model.LastTranscript() {
			if m.Role == llm.RoleUser {
				users = append(users, m.Text())
			}
		}
		if want := []string{"hello Responses", "where is order 4?"}; !slices.Equal(users, want) {
			t.Fatalf("the continuation's model call had the user messages %q, want %q", users, want)
		}
		s.checkAdapterEvents(t, next.ID, runtime.PhaseToolResult)
		var got respObject
		if code := s.do(t, "GET", "/v1/responses/"+next.ID, nil, nil, &got); code != http.StatusOK ||
			got.kinds() != next.kinds() || got.text() != next.text() {
			t.Fatalf("GET of the continuation: %d %+v, answered %+v", code, got, next)
		}
	})
	t.Run("tool turn over Responses, streamed", func(t *testing.T) {
		evs := s.stream(t, "resp-tools", map[string]any{"input": "where is order 11?"})
		names, text, final := streamed(t, evs)
		joined := strings.Join(names, " ")
		for _, want := range []string{"response.created response.in_progress", "response.mcp_call.completed",
			"response.output_text.delta", "response.output_text.done"} {
			if !strings.Contains(joined, want) {
				t.Fatalf("the stream lacks %s:\n%s", want, joined)
			}
		}
		if names[len(names)-1] != "response.completed" || final.Status != "completed" ||
			final.kinds() != "mcp_call:lookup_order message" || !strings.Contains(final.text(), "order 11: shipped") ||
			!strings.Contains(final.text(), text) || text == "" {
			t.Fatalf("streamed tool turn: %s\n%+v (text %q)", joined, final, text)
		}
		var got respObject
		if s.do(t, "GET", "/v1/responses/"+final.ID, nil, nil, &got); got.kinds() != final.kinds() || got.text() != final.text() {
			t.Fatalf("GET %+v, streamed %+v", got, final)
		}
		s.checkAdapterEvents(t, final.ID, runtime.PhaseToolResult)
	})
	t.Run("approval started on REST, denied over Responses", func(t *testing.T) {
		var out restOutcome
		s.do(t, "POST", "/v1/sessions/resp-deny/messages", map[string]any{"content": "refund order 2"}, nil, &out)
		if out.Outcome != "suspended" || out.Signal.SignalID == "" {
			t.Fatalf("refund: %+v", out)
		}
		decision := func() map[string]any {
			return map[string]any{"previous_response_id": out.RunID, "input": []any{map[string]any{"type": "mcp_approval_response",
				"approval_request_id": out.Signal.SignalID, "approve": false, "reason": "not this one"}}}
		}
		done, code, e := s.respond(t, "", decision())
		if code != http.StatusOK || done.Status != "completed" || done.XArmature.Outcome != "completed" ||
			done.XArmature.SessionID != "resp-deny" || strings.Contains(done.text(), "refunded") {
			t.Fatalf("the denial: %d %+v %+v", code, done, e)
		}
		if run := s.run(t, done.ID); run.ParentID != out.RunID {
			t.Fatalf("the denial's run has parent %q, want the suspended run %q", run.ParentID, out.RunID)
		}
		if _, code, e := s.respond(t, "", decision()); code != http.StatusConflict || e.Error.Code != "harness_signal_correlation_failed" {
			t.Fatalf("a second decision: %d %+v", code, e)
		}
		// The session goes on over REST.
		s.lookup(t, "resp-deny", "2")
	})
	t.Run("approval started over Responses, streamed", func(t *testing.T) {
		evs := s.stream(t, "resp-refund", map[string]any{"input": "refund order 6"})
		names, _, final := streamed(t, evs)
		if names[len(names)-1] != "response.completed" || final.XArmature.Outcome != "suspended" || final.approval() == "" {
			t.Fatalf("streamed refund: %s\n%+v", strings.Join(names, " "), final)
		}
		pending = final
	})
	return pending
}

// responsesAfterRestart is the script's part on the Responses API after
// the last restart: the approval responses left pending is approved over
// Responses, and a streamed response is cancelled while its model call
// runs.
func responsesAfterRestart(t *testing.T, s *instance, pending respObject) {
	t.Run("approved over Responses after a restart", func(t *testing.T) {
		if pending.ID == "" {
			t.Skip("no approval to give")
		}
		done, code, e := s.respond(t, "", map[string]any{"previous_response_id": pending.ID, "input": []any{map[string]any{
			"type": "mcp_approval_response", "approval_request_id": pending.approval(), "approve": true}}})
		if code != http.StatusOK || done.XArmature.Outcome != "completed" || done.XArmature.SessionID != "resp-refund" ||
			!strings.HasPrefix(done.kinds(), "mcp_call:issue_refund") || !strings.Contains(done.text(), "refunded $30.00 for order 6") {
			t.Fatalf("the approval: %d %+v %+v", code, done, e)
		}
		s.checkAdapterEvents(t, done.ID, runtime.PhaseToolResult)
	})
	t.Run("cancel a streamed response", func(t *testing.T) {
		// The model blocks before the turn has any output, so the stream
		// has not opened: the request is answered with the error, as a
		// chat completion is, and the response reads cancelled.
		type result struct {
			code int
			e    respError
			err  error
		}
		done := make(chan result, 1)
		go func() {
			_, code, e, err := s.respondStream("resp-slow", map[string]any{"input": "answer " + SlowWord})
			done <- result{code, e, err}
		}()
		select {
		case <-s.model.Blocked():
		case r := <-done:
			t.Fatalf("the slow response ended before its model call blocked: %+v", r)
		}
		id := s.startedRun(t, "resp-slow")
		if code := s.do(t, "POST", "/v1/runs/"+id+"/cancel", nil, nil, nil); code != http.StatusAccepted {
			t.Fatalf("cancel: %d", code)
		}
		if r := <-done; r.err != nil || r.code == http.StatusOK || r.e.Error.Code != "invocation_cancelled" {
			t.Fatalf("the cancelled streamed request: %+v", r)
		}
		var got respObject
		if code := s.do(t, "GET", "/v1/responses/"+id, nil, nil, &got); code != http.StatusOK || got.Status != "cancelled" ||
			got.Error == nil || got.Error.Code != "invocation_cancelled" {
			t.Fatalf("GET of the cancelled response: %d %+v", code, got)
		}
		if run := s.run(t, id); run.Status != runtime.StatusCancelled {
			t.Fatalf("the cancelled response's run: %+v", run)
		}
	})
}
