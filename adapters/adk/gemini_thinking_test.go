package adk_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestGeminiThinking: model.thinking reaches ADK-Go's Gemini client's
// requests (generationConfig.thinkingConfig), and the thought summaries
// it asks for are kept in the runtime's history as thinking blocks, with
// their signatures, never as the answer; after a restart that lost
// ADK-Go's in-memory session, the request answering an approved call
// carries the call's thought part back, signature and all.
func TestGeminiThinking(t *testing.T) {
	srv, bodies := adaptertest.RecordingServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		var req struct {
			GenerationConfig struct {
				ThinkingConfig json.RawMessage `json:"thinkingConfig"`
			} `json:"generationConfig"`
		}
		_ = json.Unmarshal(b, &req)
		if string(req.GenerationConfig.ThinkingConfig) != `{"includeThoughts":true,"thinkingLevel":"HIGH"}` {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"code":400,"message":"unexpected thinkingConfig","status":"INVALID_ARGUMENT"}}`)
			return
		}
		parts := `[{"text":"The user wants a refund.","thought":true,"thoughtSignature":"dGhvdWdodC0x"},` +
			`{"functionCall":{"name":"issue_refund","args":{"order":"5","amount":30}},"thoughtSignature":"Y2FsbC0x"}]`
		if strings.Contains(string(b), `"functionResponse"`) {
			if !strings.Contains(string(b), `{"text":"The user wants a refund.","thought":true,"thoughtSignature":"dGhvdWdodC0x"}`) {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":{"code":400,"message":"the call's thought part is missing","status":"INVALID_ARGUMENT"}}`)
				return
			}
			parts = `[{"text":"The refund went through.","thought":true},{"text":"The refund is done.","thoughtSignature":"YW5zd2VyLTE="}]`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"candidates":[{"finishReason":"STOP","content":{"role":"model","parts":`+parts+`}}]}`)
	})
	t.Setenv("TEST_GEMINI_KEY", "test-key")
	section := `{"streaming":false,"model":{"provider":"gemini","name":"gemini-3-test","base_url":` + quote(srv.URL) +
		`,"api_key_env":"TEST_GEMINI_KEY","thinking":{"level":"high","include_thoughts":true}}}`
	st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
	ctx := context.Background()
	out, err := newHarness(t, st, section).Send(ctx, "s", llm.UserText("refund order 5"))
	s, ok := out.(*chat.Suspended)
	if err != nil || !ok {
		t.Fatalf("refund turn: %v %#v\nrequests:\n%s", err, out, strings.Join(bodies(), "\n"))
	}
	out, err = newHarness(t, st, section).Signal(ctx, chat.Signal{SessionID: "s", SignalID: s.Descriptor.SignalID, Payload: agent.Approve("")})
	c, ok := out.(*chat.Completed)
	if err != nil || !ok {
		t.Fatalf("approval after the restart: %v %#v\nrequests:\n%s", err, out, strings.Join(bodies(), "\n"))
	}
	answer := c.Replies[len(c.Replies)-1]
	if answer.Text() != "The refund is done." {
		t.Fatalf("answer %q: a thought is not the answer", answer.Text())
	}
	signed := llm.TextBlock("The refund is done.")
	signed.Signature = "YW5zd2VyLTE="
	if !answer.Content.Equal(llm.Blocks(llm.ThinkingBlock("The refund went through.", ""), signed)) {
		t.Fatalf("the answer's content %#v", answer.Content)
	}
}
