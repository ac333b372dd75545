package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

func Example() {
	tools := []llm.Tool{{
		Name:        "get_weather",
		Description: "Get current weather for a city.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}}
	msgs := []llm.Message{
		llm.SystemText("Answer briefly."),
		llm.UserText("Weather in Boston?"),
		llm.AssistantToolCalls(llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Boston"}`)}),
		llm.ToolResult("call_1", "68F, sunny"),
	}
	if err := llm.ValidateMessages(msgs, tools); err != nil {
		fmt.Println(err)
		return
	}
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		fmt.Println(string(b))
	}
	// Output:
	// {"role":"system","content":"Answer briefly."}
	// {"role":"user","content":"Weather in Boston?"}
	// {"role":"assistant","tool_calls":[{"id":"call_1","name":"get_weather","arguments":{"city":"Boston"}}]}
	// {"role":"tool","content":"68F, sunny","tool_call_id":"call_1"}
}

func ExampleValidateMessages() {
	msgs := []llm.Message{
		llm.UserText("What is in this picture?"),
		llm.AssistantText("A cat."),
		llm.UserBlocks(
			llm.TextBlock("And this one?"),
			llm.ImageInline("image/tiff", "SUkqAA=="),
		),
	}
	err := llm.ValidateMessages(msgs, nil)
	fmt.Println(err)

	var ve *llm.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Index, ve.Field)
	}
	fmt.Println(errors.Is(err, llm.ErrInvalidMessage), errors.Is(err, errcat.ProviderInvalidRequest))
	// Output:
	// llm: messages[2].content[1].media_type: unsupported image media type "image/tiff" (want image/png, image/jpeg, image/webp or image/gif)
	// 2 messages[2].content[1].media_type
	// true true
}

func ExampleMessage_Validate() {
	fmt.Println(llm.UserText("").Validate())
	fmt.Println(llm.Message{Role: llm.RoleAssistant}.Validate())
	fmt.Println(llm.Message{Role: llm.RoleSystem, Content: llm.Blocks(llm.TextBlock("hi"))}.Validate())
	fmt.Println(llm.ToolResult("call_1", "").Validate())
	// Output:
	// llm: content: user content must not be empty
	// llm: content: assistant message needs content or tool calls
	// llm: content: system content must be a string
	// <nil>
}

func ExampleMessage_UnmarshalJSON() {
	data := []byte(`{"role":"assistant","content":[
		{"type":"thinking","text":"The user wants a number.","signature":"sig-abc"},
		{"type":"text","text":"The answer is "},
		{"type":"text","text":"42."}]}`)
	var m llm.Message
	if err := json.Unmarshal(data, &m); err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range m.Content.Blocks() {
		fmt.Printf("%s %q\n", b.Type, b.Text)
	}
	fmt.Println(m.Text())

	err := json.Unmarshal([]byte(`{"role":"user","content":[{"type":"video","url":"x"}]}`), &m)
	fmt.Println(err)
	// Output:
	// thinking "The user wants a number."
	// text "The answer is "
	// text "42."
	// The answer is 42.
	// llm: content[0].type: unknown block type "video"
}

func ExampleToolCall_DecodeArguments() {
	call := llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Boston","days":3}`)}
	var args struct {
		City string `json:"city"`
		Days int    `json:"days"`
	}
	if err := call.DecodeArguments(&args); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(args.City, args.Days)
	// Output:
	// Boston 3
}

func ExampleContent() {
	for _, c := range []llm.Content{
		{},
		llm.Text("hi"),
		llm.Blocks(llm.ImageURL("https://example.com/cat.png").WithDetail(llm.DetailLow), llm.TextBlock("caption?")),
	} {
		b, _ := json.Marshal(c)
		fmt.Printf("zero=%t text=%t blocks=%t %s\n", c.IsZero(), c.IsText(), c.IsBlocks(), b)
	}
	// Output:
	// zero=true text=false blocks=false null
	// zero=false text=true blocks=false "hi"
	// zero=false text=false blocks=true [{"type":"image","source":{"type":"url","url":"https://example.com/cat.png"},"detail":"low"},{"type":"text","text":"caption?"}]
}

func ExampleComplete() {
	p := llmtest.New(
		llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderUnavailable, Message: "503"}),
		llmtest.Reply(`{"answer":42}`),
	)
	resp, err := llm.Complete(context.Background(), p, &llm.Request{
		Messages:       []llm.Message{llm.UserText("The answer?")},
		ResponseSchema: json.RawMessage(`{"type":"object","properties":{"answer":{"type":"integer"}},"required":["answer"]}`),
		Retry:          &llm.RetryPolicy{MaxAttempts: 2, Backoff: func(int) time.Duration { return 0 }},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.FinishReason, string(resp.Parsed), p.Calls())
	// Output: stop {"answer":42} 2
}
