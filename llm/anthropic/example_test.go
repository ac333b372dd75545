package anthropic_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

// A provider bound to one model, called through llm.Complete. The server
// here stands in for https://api.anthropic.com.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"type":"message","id":"msg_1","model":"claude-test","role":"assistant",`+
			`"content":[{"type":"text","text":"Hello back."}],"stop_reason":"end_turn",`+
			`"usage":{"input_tokens":12,"output_tokens":3}}`)
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-example", Model: "claude-test"})
	if err != nil {
		panic(err)
	}
	resp, err := llm.Complete(context.Background(), p, &llm.Request{
		Messages: []llm.Message{llm.SystemText("You are helpful."), llm.UserText("Hello.")},
		Config:   llm.Config{MaxTokens: new(256)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Text(), resp.FinishReason, *resp.Usage.TotalTokens)
	// Output: Hello back. stop 15
}

// The body a request maps to: system extracted, keys sorted.
func ExampleProvider_RequestBody() {
	p, _ := anthropic.New(anthropic.Config{Model: "claude-test"})
	body, err := p.RequestBody(&llm.Request{
		Messages: []llm.Message{llm.SystemText("Be terse."), llm.UserText("Hi")},
		Config:   llm.Config{MaxTokens: new(64), StopSequences: []string{"END"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(body))
	// Output: {"max_tokens":64,"messages":[{"content":"Hi","role":"user"}],"model":"claude-test","stop_sequences":["END"],"system":"Be terse."}
}
