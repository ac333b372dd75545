package server_test

import (
	"bufio"
	"context"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// gateModel answers "done thinking" to a message containing "think"
// only once release is closed, or once it has thought for after when
// that is set (it fails when its call's context ends first), signalling
// waiting when such a call starts: a model that thinks for as long as a
// test wants. Anything else is answered "ok" at once.
type gateModel struct {
	waiting  chan struct{} // gets a value when a gated call starts, if there is room
	release  chan struct{}
	after    time.Duration
	answered atomic.Bool // a gated call answered
}

func newGateModel() *gateModel {
	return &gateModel{waiting: make(chan struct{}, 16), release: make(chan struct{})}
}

// thinkingModel is a gateModel that thinks for d.
func thinkingModel(d time.Duration) *gateModel {
	m := newGateModel()
	m.after = d
	return m
}

func (*gateModel) Ready(context.Context) error { return nil }

func (m *gateModel) answer(ctx context.Context, req *llm.Request) (string, error) {
	if !strings.Contains(req.Messages[len(req.Messages)-1].Text(), "think") {
		return "ok", nil
	}
	select {
	case m.waiting <- struct{}{}:
	default:
	}
	var thought <-chan time.Time
	if m.after > 0 {
		thought = time.After(m.after)
	}
	select {
	case <-thought:
	case <-m.release:
	case <-ctx.Done():
		return "", context.Cause(ctx)
	}
	m.answered.Store(true)
	return "done thinking", nil
}

func (m *gateModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	text, err := m.answer(ctx, req)
	if err != nil {
		return nil, err
	}
	return &llm.Response{Message: llm.AssistantText(text), FinishReason: llm.FinishStop}, nil
}

func (m *gateModel) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		text, err := m.answer(ctx, req)
		if err != nil {
			yield(nil, err)
			return
		}
		if yield(&llm.Chunk{Content: text}, nil) {
			yield(&llm.Chunk{FinishReason: llm.FinishStop}, nil)
		}
	}
}

// keepAliveServer serves an agent on m with the given keep-alive.
func keepAliveServer(t *testing.T, m *gateModel, keepAlive time.Duration) *httptest.Server {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	return servertest.New(t, a, func(c *server.Config) {
		c.Tokens = []server.Token{{Secret: oaiToken, Tenant: "acme"}}
		c.StreamKeepAlive = keepAlive
	})
}

// sseLines reads a stream line by line, keeping what it read.
type sseLines struct {
	sc   *bufio.Scanner
	seen []string
}

// until reads lines until one satisfies f, and returns it; it fails t
// when the stream ends first.
func (s *sseLines) until(t *testing.T, f func(string) bool) string {
	t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		s.seen = append(s.seen, line)
		if f(line) {
			return line
		}
	}
	t.Fatalf("the stream ended (%v) without the line looked for; it read:\n%s", s.sc.Err(), strings.Join(s.seen, "\n"))
	return ""
}

// rest reads the stream to its end.
func (s *sseLines) rest() string {
	for s.sc.Scan() {
		s.seen = append(s.seen, s.sc.Text())
	}
	return strings.Join(s.seen, "\n")
}

// TestStreamKeepAlive: a streamed turn whose model thinks longer than
// the keep-alive gets its headers (200) and ": keep-alive" comment
// lines while the model has said nothing, then its events as usual (a
// response's still opening with response.created, numbered 0); one that
// fails after its stream opened so tells it in the stream.
func TestStreamKeepAlive(t *testing.T) {
	surfaces := []struct {
		name, path, body string
		// first is the first event's line, last the completed stream's
		// last data line, failed the lines a failure ends the stream
		// with (in order).
		first, last string
		failed      []string
	}{
		{name: "chat completions", path: "/v1/chat/completions",
			body:  `{"model":"demo","stream":true,"messages":[{"role":"user","content":"think hard"}]}`,
			first: `"role":"assistant"`, last: "data: [DONE]",
			failed: []string{"event: error", `"code":"invocation_cancelled"`}},
		{name: "responses", path: "/v1/responses", body: `{"model":"demo","stream":true,"input":"think hard"}`,
			first: `"type":"response.created","sequence_number":0`, last: `"type":"response.completed"`,
			failed: []string{"event: response.created", "event: response.in_progress", "event: response.failed", `"status":"cancelled"`,
				"event: error", `"code":"invocation_cancelled"`}},
	}
	for _, sf := range surfaces {
		for _, cancel := range []bool{false, true} {
			name := sf.name + "/completed"
			if cancel {
				name = sf.name + "/cancelled"
			}
			t.Run(name, func(t *testing.T) {
				m := newGateModel()
				ts := keepAliveServer(t, m, 20*time.Millisecond)
				sid := strings.ReplaceAll(name, " ", "-")
				sid = strings.ReplaceAll(sid, "/", "-")
				req := authedPost(ts.URL, sf.path, sf.body, map[string]string{server.SessionHeader: sid})
				type answer struct {
					resp *http.Response
					err  error
				}
				got := make(chan answer, 1)
				go func() {
					resp, err := ts.Client().Do(req)
					got <- answer{resp, err}
				}()
				select {
				case <-m.waiting:
				case a := <-got:
					if a.err == nil {
						raw, _ := io.ReadAll(a.resp.Body)
						t.Fatalf("answered before the model was called: %d %s", a.resp.StatusCode, raw)
					}
					t.Fatal(a.err)
				}
				// The model has said nothing and will not until released:
				// the headers and keep-alive lines come anyway.
				var a answer
				select {
				case a = <-got:
				case <-time.After(30 * time.Second):
					close(m.release)
					t.Fatal("no response headers while the model thinks")
				}
				if a.err != nil || a.resp.StatusCode != http.StatusOK || a.resp.Header.Get("Content-Type") != "text/event-stream" {
					close(m.release)
					t.Fatalf("%v %+v", a.err, a.resp)
				}
				defer a.resp.Body.Close()
				lines := &sseLines{sc: bufio.NewScanner(a.resp.Body)}
				lines.until(t, func(l string) bool { return l == ": keep-alive" })
				lines.until(t, func(l string) bool { return l == ": keep-alive" })
				for _, l := range lines.seen {
					if l != "" && l != ": keep-alive" {
						t.Fatalf("the stream sent %q before the model said anything", l)
					}
				}
				if cancel {
					if code := cancelRun(t, ts, sid); code != http.StatusAccepted {
						t.Fatalf("cancel: %d", code)
					}
					lines.until(t, func(l string) bool { return strings.Contains(l, sf.failed[0]) })
					all := lines.rest()
					at := 0
					for _, want := range sf.failed {
						i := strings.Index(all[at:], want)
						if i < 0 {
							t.Fatalf("the cancelled stream lacks %q (in order):\n%s", want, all)
						}
						at += i
					}
					return
				}
				close(m.release)
				first := lines.until(t, func(l string) bool { return strings.HasPrefix(l, "data: ") })
				if !strings.Contains(first, sf.first) {
					t.Fatalf("the first event after the keep-alive lines is %s, want %s", first, sf.first)
				}
				all := lines.rest()
				if !strings.Contains(all, "done thinking") || !strings.Contains(all, sf.last) {
					t.Fatalf("the stream after the keep-alive lines:\n%s", all)
				}
			})
		}
	}
}

// cancelRun cancels the session's running run (POST /v1/runs/{id}/cancel).
func cancelRun(t *testing.T, ts *httptest.Server, sid string) int {
	t.Helper()
	var runs struct {
		Runs []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"runs"`
	}
	call(t, ts, "GET", "/v1/sessions/"+sid+"/runs", "", nil, &runs)
	for _, r := range runs.Runs {
		if r.Status == "started" {
			return call(t, ts, "POST", "/v1/runs/"+r.ID+"/cancel", "", nil, nil).StatusCode
		}
	}
	t.Fatalf("session %s has no running run: %+v", sid, runs.Runs)
	return 0
}

// TestStreamKeepAliveClients: the official Go client reads a stream that
// opened with keep-alive lines (comments, which SSE skips) as any other:
// a chat completion's chunks and a response's events.
func TestStreamKeepAliveClients(t *testing.T) {
	ts := keepAliveServer(t, thinkingModel(50*time.Millisecond), 10*time.Millisecond)
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(oaiToken),
		option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0))
	ctx := context.Background()

	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "demo",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("think it over")}})
	var text strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.String() != "done thinking" {
		t.Fatalf("chat completion stream: %q, %v", text.String(), err)
	}

	rs := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("think again")}})
	var types []string
	var final string
	for rs.Next() {
		ev := rs.Current()
		types = append(types, ev.Type)
		if ev.Type == "response.completed" {
			final = ev.Response.OutputText()
		}
	}
	if err := rs.Err(); err != nil || len(types) == 0 || types[0] != "response.created" || final != "done thinking" {
		t.Fatalf("response stream: %v %q, %v", types, final, err)
	}
}

// keepAliveNodeScript reads a chat completion stream and a response
// stream, each opened by keep-alive lines, with the openai npm client.
const keepAliveNodeScript = `
import OpenAI from "openai";
const out = (o) => console.log(JSON.stringify(o));
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: process.env.API_KEY, maxRetries: 0 });
const chat = await client.chat.completions.create({ model: "demo", stream: true, messages: [{ role: "user", content: "think it over" }] });
let text = "";
for await (const c of chat) text += c.choices?.[0]?.delta?.content ?? "";
out({ case: "chat", content: text });
const types = [];
let final = "";
const rs = await client.responses.create({ model: "demo", stream: true, input: "think again" });
for await (const ev of rs) {
  types.push(ev.type);
  if (ev.type === "response.completed") final = ev.response.output.filter((o) => o.type === "message").flatMap((o) => o.content).map((c) => c.text).join("");
}
out({ case: "responses", first: types[0], last: types[types.length - 1], content: final });
`

// TestStreamKeepAliveNodeClient: the openai npm client, under Node,
// reads streams that opened with keep-alive lines as any other.
func TestStreamKeepAliveNodeClient(t *testing.T) {
	dir := npmtest.Install(t, "openai", openaiNodeVersion)
	ts := keepAliveServer(t, thinkingModel(100*time.Millisecond), 10*time.Millisecond)
	got := runNode(t, dir, "keepalive.mjs", keepAliveNodeScript, "BASE_URL="+ts.URL+"/v1", "API_KEY="+oaiToken)
	if c := got["chat"]; c["content"] != "done thinking" {
		t.Errorf("chat completion stream: %v", c)
	}
	if c := got["responses"]; c["content"] != "done thinking" || c["first"] != "response.created" || c["last"] != "response.completed" {
		t.Errorf("response stream: %v", c)
	}
}

// TestStreamKeepAliveOff: with the keep-alive off (negative), a stream
// carries no comment lines, however long its model thinks.
func TestStreamKeepAliveOff(t *testing.T) {
	ts := keepAliveServer(t, thinkingModel(100*time.Millisecond), -1)
	resp, err := ts.Client().Do(authedPost(ts.URL, "/v1/chat/completions",
		`{"model":"demo","stream":true,"messages":[{"role":"user","content":"think"}]}`, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	all := (&sseLines{sc: bufio.NewScanner(resp.Body)}).rest()
	if resp.StatusCode != http.StatusOK || strings.Contains(all, "keep-alive") || !strings.Contains(all, "done thinking") {
		t.Fatalf("%d\n%s", resp.StatusCode, all)
	}
}

// authedPost is a JSON POST of body to path on the server at base, with
// the test token and header.
func authedPost(base, path, body string, header map[string]string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+oaiToken)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return req
}
