package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
)

// gatedUsageModel answers "hi"; its first call waits for gate. Call n
// reports 7n prompt and 5n completion tokens: a turn run again would
// report other counts than the first.
type gatedUsageModel struct {
	calls   atomic.Int32
	started chan struct{}
	gate    chan struct{}
}

func (*gatedUsageModel) Ready(context.Context) error { return nil }

func (m *gatedUsageModel) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	n := int(m.calls.Add(1))
	if n == 1 {
		close(m.started)
		select {
		case <-m.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	p, c, tot := 7*n, 5*n, 12*n
	return &llm.Response{Message: llm.AssistantText("hi"), FinishReason: llm.FinishStop,
		Usage: llm.Usage{PromptTokens: &p, CompletionTokens: &c, TotalTokens: &tot}}, nil
}

// TestReplayKeepsUsage: a request retried with the same Idempotency-Key
// (chat completions, Responses) or message_id (REST) answers the first
// try's turn with the first try's usage, whether the retry joined the
// turn while it ran or came after it finished. Before, the replayed
// answer said usage 0/0/0 (OpenAI, Responses) or had no usage (REST),
// though the run record kept the real counts: a client counting tokens
// from the retried answer undercounted to zero.
func TestReplayKeepsUsage(t *testing.T) {
	for _, c := range []struct{ name, path, body, key string }{
		{"chat completions", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`, "k-oai"},
		{"responses", "/v1/responses", `{"model":"demo","input":"hello"}`, "k-resp"},
		{"rest", "/v1/sessions/s-rest/messages", `{"content":"hello","message_id":"k-rest"}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &gatedUsageModel{started: make(chan struct{}), gate: make(chan struct{})}
			a, err := agent.New(agent.Config{Provider: m})
			if err != nil {
				t.Fatal(err)
			}
			ts := servertest.New(t, a)
			post := func() (string, error) {
				req, _ := http.NewRequest(http.MethodPost, ts.URL+c.path, strings.NewReader(c.body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Armature-Session-Id", "s-rest")
				if c.key != "" {
					req.Header.Set("Idempotency-Key", c.key)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return "", err
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var out map[string]any
				if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != http.StatusOK {
					return "", &httpError{resp.StatusCode, string(b)}
				}
				u, _ := json.Marshal(out["usage"])
				return string(u), nil
			}
			var wg sync.WaitGroup
			var first, joined string
			var err1, err2 error
			wg.Add(1)
			go func() { defer wg.Done(); first, err1 = post() }()
			<-m.started
			wg.Add(1)
			go func() { defer wg.Done(); joined, err2 = post() }()
			time.Sleep(200 * time.Millisecond) // the retry waits for the running turn
			close(m.gate)
			wg.Wait()
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			after, err := post()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(first, "12") {
				t.Fatalf("the first answer's usage %s does not hold the turn's 12 tokens", first)
			}
			if joined != first || after != first {
				t.Errorf("usage: first %s, a retry joining the running turn %s, a retry after it finished %s", first, joined, after)
			}
			if n := m.calls.Load(); n != 1 {
				t.Errorf("the model was called %d times: a retry ran the turn again", n)
			}
		})
	}
}

type httpError struct {
	status int
	body   string
}

func (e *httpError) Error() string { return http.StatusText(e.status) + ": " + e.body }
