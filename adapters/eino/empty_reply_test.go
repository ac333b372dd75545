package eino_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/session"
)

// TestEmptyReply: a model that answers with no text and no calls (a
// content filter's withheld answer) fails an Eino turn as it fails a
// native or an ADK-Go turn: agent.ErrEmptyReply, "the model returned an
// empty reply", provider_invalid_response, rather than in the history
// validator's words, which the OpenHarness endpoint would show the user
// as error.message and in its render_message.
func TestEmptyReply(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"content_filter"}]}`))
	}))
	defer srv.Close()
	p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Model: eino.NewProviderModel(p)})
	if err != nil {
		t.Fatal(err)
	}
	hs := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
		session.NewMemoryStore(session.MemoryConfig{}))
	out, _ := hs.Send(ctx, "acme/s", llm.UserText("hi"))
	o, ok := out.(*chat.Errored)
	if !ok {
		t.Fatalf("outcome %#v, want errored", out)
	}
	if !errors.Is(o.Err, agent.ErrEmptyReply) || strings.Contains(o.Err.Error(), "conversation invalid") {
		t.Errorf("an empty reply failed with %q, want agent.ErrEmptyReply (\"the model returned an empty reply\") as on the native and ADK-Go backends", o.Err)
	}
}
