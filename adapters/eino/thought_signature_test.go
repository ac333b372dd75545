package eino_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/session"
)

// gemini3Upstream is a generateContent server that validates thought
// signatures as Gemini 3 models do: a functionCall part of the current
// turn sent back without the thoughtSignature the model gave it is
// refused with 400 INVALID_ARGUMENT. It calls lookup_order first (with
// a signature), then answers.
func gemini3Upstream(t *testing.T) (*httptest.Server, func() []string) {
	t.Helper()
	var (
		mu     sync.Mutex
		bodies []string
	)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		var req struct {
			Contents []struct {
				Role  string `json:"role"`
				Parts []struct {
					FunctionCall     json.RawMessage `json:"functionCall"`
					FunctionResponse json.RawMessage `json:"functionResponse"`
					ThoughtSignature string          `json:"thoughtSignature"`
				} `json:"parts"`
			} `json:"contents"`
		}
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		answered := false
		for _, c := range req.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil && p.ThoughtSignature == "" {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}`)
					return
				}
				answered = answered || p.FunctionResponse != nil
			}
		}
		resp := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"fc1","name":"lookup_order","args":{"order":"7"}},"thoughtSignature":"c2lnbmF0dXJlLTE="}]},"finishReason":"STOP"}]}`
		if answered {
			resp = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Order 7 has shipped."}]},"finishReason":"STOP"}]}`
		}
		if strings.Contains(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+resp+"\r\n\r\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, resp)
	}))
	t.Cleanup(ts.Close)
	return ts, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), bodies...) }
}

// TestThoughtSignatureSurvivesBridge: the model bridge carries a tool
// call's reasoning-continuity token (llm.ToolCall.Signature, Gemini's
// thoughtSignature) both ways between Armature and Eino, so the model
// call that follows a tool call sends the functionCall back with its
// thoughtSignature and the turn completes, as a native agent's does.
// Gemini 3 models refuse a functionCall sent back without it (400
// INVALID_ARGUMENT, "Function call is missing a thought_signature"), so
// without it every tool turn of an Eino agent on such a model would fail.
func TestThoughtSignatureSurvivesBridge(t *testing.T) {
	ctx := context.Background()
	for _, streaming := range []bool{false, true} {
		name := "blocking"
		if streaming {
			name = "streaming"
		}
		t.Run(name, func(t *testing.T) {
			ts, bodies := gemini3Upstream(t)
			p, err := gemini.New(gemini.Config{BaseURL: ts.URL, APIKey: "k", Model: "gemini-3-pro-preview"})
			if err != nil {
				t.Fatal(err)
			}
			// The upstream takes the call sent back with its signature,
			// as Armature's Gemini client sends it (a native agent's
			// history keeps it).
			call := llm.ToolCall{ID: "fc1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`), Signature: "c2lnbmF0dXJlLTE="}
			if _, err := p.Complete(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("where is order 7?"), llm.AssistantToolCalls(call),
				llm.ToolResult("fc1", "order 7: shipped")}}); err != nil {
				t.Fatalf("control: the call sent back with its signature is refused: %v", err)
			}
			tools := demo.Tools()
			e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Model: eino.NewProviderModel(p), Store: eino.NewMemoryStore(), Streaming: new(streaming)})
			if err != nil {
				t.Fatal(err)
			}
			h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
				session.NewMemoryStore(session.MemoryConfig{}))
			out, err := h.Send(ctx, "acme/s", llm.UserText("where is order 7?"))
			if c, ok := out.(*chat.Completed); !ok {
				if e, ok := out.(*chat.Errored); ok {
					t.Errorf("the tool turn failed (%s %v), want it completed", e.Category, e.Err)
				} else {
					t.Errorf("the tool turn: %#v %v, want it completed", out, err)
				}
			} else if got := c.Replies[len(c.Replies)-1].Text(); got != "Order 7 has shipped." {
				t.Errorf("answer %q, want %q", got, "Order 7 has shipped.")
			}
			// bodies[0] is the control, [1] the turn's first model call,
			// [2] the one after the tool ran.
			if b := bodies(); len(b) == 3 && !strings.Contains(b[2], "c2lnbmF0dXJlLTE=") {
				t.Errorf("the model call after the tool ran sends the call back without its thoughtSignature, want it kept: %s", b[2])
			}
		})
	}
}
