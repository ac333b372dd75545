package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
)

// stallModel streams some text, then waits for its context.
type stallModel struct{}

func (stallModel) Ready(context.Context) error { return nil }
func (stallModel) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}
func (stallModel) Stream(ctx context.Context, _ *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		if !yield(&llm.Chunk{Content: "Working on it"}, nil) {
			return
		}
		<-ctx.Done()
		yield(nil, ctx.Err())
	}
}

// endedResponse is what the tests compare of a response object.
type endedResponse struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Error  json.RawMessage   `json:"error"`
	Output []json.RawMessage `json:"output"`
}

// streamEnded posts a streamed response; onDelta (nil: none) is called
// with the response id at the first text delta. It returns the final
// response event's type and response.
func streamEnded(t *testing.T, ts *httptest.Server, onDelta func(id string)) (string, endedResponse) {
	t.Helper()
	req, err := http.NewRequest("POST", ts.URL+"/v1/responses", strings.NewReader(`{"model":"demo","stream":true,"input":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var (
		id, typ string
		last    endedResponse
		once    bool
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type     string        `json:"type"`
			Response endedResponse `json:"response"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "response.created":
			id = ev.Response.ID
		case "response.output_text.delta":
			if onDelta != nil && !once {
				once = true
				onDelta(id)
			}
		case "response.completed", "response.failed", "response.incomplete":
			typ, last = ev.Type, ev.Response
		}
	}
	return typ, last
}

// sameResponse fails unless GET /v1/responses/{id} answers the stream's
// final response: status, error and output items, byte for byte.
func sameResponse(t *testing.T, ts *httptest.Server, streamed endedResponse) endedResponse {
	t.Helper()
	var got endedResponse
	call(t, ts, "GET", "/v1/responses/"+streamed.ID, "", nil, &got)
	out := func(r endedResponse) string { b, _ := json.Marshal(r.Output); return string(b) }
	if streamed.Status != got.Status || string(streamed.Error) != string(got.Error) || out(streamed) != out(got) {
		t.Errorf("the stream ended with status %q, error %s, output %s;\nGET answers status %q, error %s, output %s",
			streamed.Status, streamed.Error, out(streamed), got.Status, got.Error, out(got))
	}
	return got
}

// TestResponsesCancelledStreamMatchesGet: a streamed response whose run
// is cancelled (POST /v1/runs/{id}/cancel) mid-stream ends with the
// response GET /v1/responses/{id} answers later: status cancelled,
// error invocation_cancelled saying it was cancelled (not "try again"),
// and the message streamed so far, incomplete.
func TestResponsesCancelledStreamMatchesGet(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: stallModel{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	typ, last := streamEnded(t, ts, func(id string) {
		go func() {
			time.Sleep(50 * time.Millisecond)
			call(t, ts, "POST", "/v1/runs/"+id+"/cancel", `{}`, nil, nil)
		}()
	})
	got := sameResponse(t, ts, last)
	var e struct{ Code, Message string }
	_ = json.Unmarshal(got.Error, &e)
	if typ != "response.failed" || got.Status != "cancelled" || e.Code != "invocation_cancelled" || strings.Contains(e.Message, "trouble") {
		t.Errorf("final event %s, status %q, error %s", typ, got.Status, got.Error)
	}
	var item struct {
		Type, Status string
		Content      []struct{ Text string }
	}
	if len(got.Output) != 1 || json.Unmarshal(got.Output[0], &item) != nil || item.Type != "message" || item.Status != "incomplete" ||
		len(item.Content) != 1 || item.Content[0].Text != "Working on it" {
		t.Errorf("output %s", got.Output)
	}
}

// TestResponsesFailedStreamMatchesGet: a streamed response whose
// upstream broke mid-stream ends with response.failed; GET answers the
// same response, the partial message (incomplete) included.
func TestResponsesFailedStreamMatchesGet(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: failingModel{partial: "Partial answer"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	typ, last := streamEnded(t, ts, nil)
	got := sameResponse(t, ts, last)
	if typ != "response.failed" || got.Status != "failed" || len(got.Output) != 1 || !strings.Contains(string(got.Output[0]), "Partial answer") {
		t.Errorf("final event %s, status %q, error %s, output %s", typ, got.Status, got.Error, got.Output)
	}
}

// TestCancelledTurnWording: a non-streamed request whose run is
// cancelled is answered invocation_cancelled saying it was cancelled,
// on /v1/chat/completions and /v1/responses, not the transient
// failure's "try again in a moment".
func TestCancelledTurnWording(t *testing.T) {
	a, err := agent.New(agent.Config{Provider: stallModel{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOpenAIServerWith(t, a)
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`,
		"/v1/responses":        `{"model":"demo","input":"hello"}`,
	} {
		session := "cancel-wording-" + strings.ReplaceAll(strings.Trim(path, "/"), "/", "-")
		answered := make(chan []byte, 1)
		go func() {
			var raw json.RawMessage
			call(t, ts, "POST", path, body, map[string]string{"X-Armature-Session-Id": session}, &raw)
			answered <- raw
		}()
		var runs struct {
			Runs []struct{ ID string } `json:"runs"`
		}
		for deadline := time.Now().Add(5 * time.Second); len(runs.Runs) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no run", path)
			}
			call(t, ts, "GET", "/v1/sessions/"+session+"/runs", "", nil, &runs)
		}
		call(t, ts, "POST", "/v1/runs/"+runs.Runs[0].ID+"/cancel", `{}`, nil, nil)
		raw := <-answered
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		if e.Error.Code != "invocation_cancelled" || strings.Contains(e.Error.Message, "trouble") || !strings.Contains(e.Error.Message, "cancelled") {
			t.Errorf("%s: %s", path, raw)
		}
	}
}
