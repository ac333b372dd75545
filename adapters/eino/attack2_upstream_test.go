package eino_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/session"
)

// TestAttackUpstream: an OpenAI-compatible upstream misbehaving behind
// an Eino agent (a 429, garbage, an empty body, half an answer, an
// empty answer, calls without ids, a 1 MiB call of an undeclared tool
// with a repeated call id): each turn's failure keeps the category the
// model client gives it (an empty answer fails as a native agent's,
// provider_invalid_response), and a call of an undeclared tool is
// answered and the turn completes.
func TestAttackUpstream(t *testing.T) {
	ctx := context.Background()
	sse := func(w http.ResponseWriter, lines ...string) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, l := range lines {
			fmt.Fprintf(w, "data: %s\n\n", l)
		}
	}
	cases := map[string]http.HandlerFunc{
		"429": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			http.Error(w, `{"error":{"message":"slow down","type":"rate_limit"}}`, http.StatusTooManyRequests)
		},
		"garbage": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte("<html>not json"))
		},
		"nothing": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
		},
		"half stream": func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(readBody(r), `"stream":true`) {
				sse(w, `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]}`)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hel`))
		},
		"empty answer": func(w http.ResponseWriter, r *http.Request) {
			if strings.Contains(readBody(r), `"stream":true`) {
				sse(w, `{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":"stop"}]}`, "[DONE]")
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}`))
		},
		"empty call ids": func(w http.ResponseWriter, r *http.Request) {
			body := readBody(r)
			w.Header().Set("Content-Type", "application/json")
			if strings.Contains(body, `"role":"tool"`) {
				w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`))
				return
			}
			w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"7\"}"}},` +
				`{"id":"","type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"8\"}"}}]},"finish_reason":"tool_calls"}]}`))
		},
		"undeclared tool huge args": func(w http.ResponseWriter, r *http.Request) {
			body := readBody(r)
			if strings.Contains(body, `"role":"tool"`) {
				w.Header().Set("Content-Type", "application/json")
				w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}]}`))
				return
			}
			args := `{\"x\":\"` + strings.Repeat("a", 1<<20) + `\"}`
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
				`{"id":"call_0","type":"function","function":{"name":"nope","arguments":"` + args + `"}},` +
				`{"id":"call_0","type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"7\"}"}}]},"finish_reason":"tool_calls"}]}`))
		},
	}
	for name, h := range cases {
		for _, streaming := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/streaming=%v", name, streaming), func(t *testing.T) {
				srv := httptest.NewServer(h)
				defer srv.Close()
				p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
				if err != nil {
					t.Fatal(err)
				}
				// The client's own verdict on the answer, in the turn's mode.
				req := &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}
				var direct error
				if streaming {
					for _, err := range p.Stream(ctx, req) {
						if err != nil {
							direct = err
							break
						}
					}
				} else {
					_, direct = p.Complete(ctx, req)
				}
				e, err := eino.NewEngine(ctx, eino.Config{Tools: demo.Tools(), Model: eino.NewProviderModel(p), Streaming: new(streaming)})
				if err != nil {
					t.Fatal(err)
				}
				hs := adaptertest.Harness(t, &eino.Adapter{Engine: e}, &adapter.Agent{ID: "helper", Backend: eino.Name, Tools: demo.Tools()},
					session.NewMemoryStore(session.MemoryConfig{}))
				out, err := hs.Send(ctx, "acme/s", llm.UserText("hi"))
				switch o := out.(type) {
				case *chat.Errored:
					want := errcat.Of(direct)
					if direct == nil {
						want = errcat.ProviderInvalidResponse // an empty answer, as a native agent's
					}
					if o.Category != want {
						t.Errorf("the turn failed in %s, the client's failure is %s: %v", o.Category, want, o.Err)
					}
				case *chat.Completed:
					if direct != nil || o.Replies[len(o.Replies)-1].Text() != "done" {
						t.Errorf("completed with %q; the client's failure %v", o.Replies[len(o.Replies)-1].Text(), direct)
					}
				default:
					t.Errorf("%#v %v", out, err)
				}
			})
		}
	}
}

func readBody(r *http.Request) string {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
