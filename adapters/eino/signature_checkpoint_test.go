package eino_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/session"
)

// TestSignatureSurvivesApproval: as TestThoughtSignatureSurvivesBridge,
// with a tool that needs approval: the call's thoughtSignature
// (SignatureExtra in the Eino call's Extra) survives Eino's checkpoint of
// the interrupted run, so that the model call after the approval sends
// the functionCall back with it.
func TestSignatureSurvivesApproval(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "blocking", true: "streaming"}[streaming], func(t *testing.T) { signatureSurvivesApproval(t, streaming) })
	}
}

func signatureSurvivesApproval(t *testing.T, streaming bool) {
	ctx := context.Background()
	ts, bodies := adaptertest.RecordingServer(t, func(w http.ResponseWriter, r *http.Request, b []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(b), `"functionCall"`) && !strings.Contains(string(b), "thoughtSignature") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":{"code":400,"message":"Function call is missing a thought_signature in functionCall parts.","status":"INVALID_ARGUMENT"}}`)
			return
		}
		resp := `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"id":"fc1","name":"issue_refund","args":{"order":"7","amount":10}},"thoughtSignature":"c2lnbmF0dXJlLTE="}]},"finishReason":"STOP"}]}`
		if strings.Contains(string(b), `"functionResponse"`) {
			resp = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Refunded."}]},"finishReason":"STOP"}]}`
		}
		if strings.Contains(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: "+resp+"\r\n\r\n")
			return
		}
		_, _ = io.WriteString(w, resp)
	})
	p, err := gemini.New(gemini.Config{BaseURL: ts.URL, APIKey: "k", Model: "gemini-3-pro-preview"})
	if err != nil {
		t.Fatal(err)
	}
	tools := demo.Tools()
	e, err := eino.NewEngine(ctx, eino.Config{Tools: tools, Model: eino.NewProviderModel(p), Store: eino.NewMemoryStore(), Streaming: new(streaming)})
	if err != nil {
		t.Fatal(err)
	}
	h := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: tools},
		session.NewMemoryStore(session.MemoryConfig{}))
	out, err := h.Send(ctx, "acme/s", llm.UserText("refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("want a suspension, got %#v %v", out, err)
	}
	out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	if _, ok := out.(*chat.Completed); !ok {
		sent := bodies()
		last := sent[len(sent)-1]
		if e, ok := out.(*chat.Errored); ok {
			t.Fatalf("the approved turn failed (%s %v); last request %s", e.Category, e.Err, last)
		}
		t.Fatalf("approval: %#v %v", out, err)
	}
	_ = json.Valid
}
