package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/server"
)

// namedModel answers "Answer from <name>.", counting its calls.
type namedModel struct {
	name  string
	calls atomic.Int32
}

func (m *namedModel) Ready(context.Context) error { return nil }

func (m *namedModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	return &llm.Response{Message: llm.AssistantText("Answer from " + m.name + "."), FinishReason: llm.FinishStop}, nil
}

// TestOpenAIIdempotencyKeyOtherModel: an Idempotency-Key names one
// request, its model (the agent) included. The same key and message sent
// to another model is refused as the same key with another message is
// (400 message_id_reused), on /v1/chat/completions and /v1/responses,
// streamed or not: never answered with the other agent's turn labelled
// as this model, and nothing runs.
func TestOpenAIIdempotencyKeyOtherModel(t *testing.T) {
	store := servertest.SQLite(t)
	fake, other := &namedModel{name: "fake"}, &namedModel{name: "demo"}
	agents := namedAgents(t, store, fake, other)
	ts := servertest.Serve(t, server.Config{Agents: agents, Sessions: store,
		Tokens: []server.Token{{Secret: oaiToken, Tenant: "acme"}}})

	post := func(path, key, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+oaiToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, raw
	}
	code := func(raw []byte) string {
		var e struct {
			Error struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &e)
		return e.Error.Code
	}
	bodies := map[string]func(model, msg string, stream bool) string{
		"/v1/chat/completions": func(model, msg string, stream bool) string {
			return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, model, stream, msg)
		},
		"/v1/responses": func(model, msg string, stream bool) string {
			return fmt.Sprintf(`{"model":%q,"stream":%t,"input":%q}`, model, stream, msg)
		},
	}
	for path, body := range bodies {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%t", path, stream), func(t *testing.T) {
				key := fmt.Sprintf("key-%s-%t", path, stream)
				if status, raw := post(path, key, body("fake", "hello", stream)); status != http.StatusOK || !strings.Contains(string(raw), "Answer from fake.") {
					t.Fatalf("first request: %d %s", status, raw)
				}
				calls := fake.calls.Load() + other.calls.Load()
				status, reused := post(path, key, body("fake", "something else", stream))
				if status != http.StatusBadRequest || code(reused) != "message_id_reused" {
					t.Fatalf("the key with another message: %d %s", status, reused)
				}
				status, raw := post(path, key, body("demo", "hello", stream))
				if status != http.StatusBadRequest || code(raw) != "message_id_reused" {
					t.Errorf("the key with another model: %d %s, want 400 message_id_reused", status, raw)
				}
				if strings.Contains(string(raw), "Answer from") {
					t.Errorf("the key with another model was answered with a turn's text: %s", raw)
				}
				if n := fake.calls.Load() + other.calls.Load(); n != calls {
					t.Errorf("model calls for the refused requests: %d", n-calls)
				}
				// The key's own retransmission is still answered.
				if status, raw := post(path, key, body("fake", "hello", stream)); status != http.StatusOK || !strings.Contains(string(raw), "Answer from fake.") {
					t.Errorf("the retransmission: %d %s", status, raw)
				}
			})
		}
	}
}
