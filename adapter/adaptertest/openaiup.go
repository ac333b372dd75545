package adaptertest

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

// OpenAIUpstream is Armature's OpenAI client (model "m") of an
// OpenAI-compatible upstream served for t's duration: reply gives, for a
// request's body, the answer's message as JSON (its role, content and
// tool calls) and finish reason; usage, when not "", is the usage object
// of every answer (none otherwise, as many OpenAI-compatible servers
// send). A streamed request is answered with one chunk holding the
// message (its tool calls as deltas) and [DONE]. It is the upstream of a
// bridged model whose answers a test scripts to the byte: an empty tool
// call id, a finish reason, usage or none.
func OpenAIUpstream(t testing.TB, usage string, reply func(body string) (msg, finish string)) llm.Provider {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		body := string(b)
		msg, finish := reply(body)
		u := ""
		if usage != "" {
			u = `,"usage":` + usage
		}
		if strings.Contains(body, `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			delta := strings.ReplaceAll(msg, `"tool_calls":[{`, `"tool_calls":[{"index":0,`)
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%q}]%s}\n\n", delta, finish, u)
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":%s,"finish_reason":%q}]%s}`, msg, finish, u)
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// CutAnswer is an OpenAIUpstream reply: "where is order 7?" first calls
// the demo tool lookup_order (finish reason tool_calls), and every other
// request is answered "The answer is cut sh" with finish.
func CutAnswer(finish string) func(body string) (msg, finish string) {
	return func(body string) (string, string) {
		if strings.Contains(body, "where is order 7?") && !strings.Contains(body, `"role":"tool"`) {
			return `{"role":"assistant","content":null,"tool_calls":[{"id":"l1","type":"function","function":{"name":"lookup_order","arguments":"{\"order\":\"7\"}"}}]}`, "tool_calls"
		}
		return `{"role":"assistant","content":"The answer is cut sh"}`, finish
	}
}
