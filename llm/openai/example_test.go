package openai_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

func Example() {
	// A stand-in for an OpenAI-compatible server (vLLM, Ollama, ...).
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`))
	}))
	defer srv.Close()

	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", Model: "m"})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hello")}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Message.Text(), resp.FinishReason, *resp.Usage.TotalTokens)
	// Output: Hi! stop 4
}
