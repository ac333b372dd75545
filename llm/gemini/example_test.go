package gemini_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

// A Gemini provider completing a conversation through llm.Complete. The
// in-process server stands in for generativelanguage.googleapis.com.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.Method, r.URL.Path, "key:", r.Header.Get(gemini.APIKeyHeader) != "")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"Sunny, 72F."}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"totalTokenCount":17}}`))
	}))
	defer srv.Close()

	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, APIKey: "AIza-example", Model: "gemini-2.5-flash"})
	if err != nil {
		panic(err)
	}
	resp, err := llm.Complete(context.Background(), p, &llm.Request{
		Messages: []llm.Message{llm.SystemText("You are a weather bot."), llm.UserText("Weather in SF?")},
		Config:   llm.Config{MaxTokens: new(256)},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Message.Text(), resp.FinishReason, *resp.Usage.TotalTokens)
	// Output:
	// POST /v1beta/models/gemini-2.5-flash:generateContent key: true
	// Sunny, 72F. stop 17
}
