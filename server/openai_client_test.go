package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/armature-go/armature/server"
)

// TestOpenAIGoClient drives the endpoint with the official Go client:
// a non-streaming and a streaming completion through the agent's
// server-side tool loop, a continued session, the models list and an
// error.
func TestOpenAIGoClient(t *testing.T) {
	ts := newOpenAIServer(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(oaiToken),
		option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0))

	t.Run("completion", func(t *testing.T) {
		var hdr *http.Response
		resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "demo",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("where is order 4?")},
		}, option.WithResponseInto(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 {
			t.Fatalf("choices %+v", resp.Choices)
		}
		c := resp.Choices[0]
		if want := "Here is what I found: order 4: shipped, arriving Thursday"; c.Message.Content != want || c.FinishReason != "stop" {
			t.Errorf("choice %q %q, want %q stop", c.Message.Content, c.FinishReason, want)
		}
		if len(c.Message.ToolCalls) != 0 {
			t.Errorf("server-side tool calls surfaced as OpenAI tool_calls: %+v", c.Message.ToolCalls)
		}
		var x xArmature
		if err := json.Unmarshal([]byte(resp.JSON.ExtraFields["x_armature"].Raw()), &x); err != nil {
			t.Fatal(err)
		}
		sid := hdr.Header.Get(server.SessionHeader)
		if x.SessionID != sid || len(x.ToolCalls) != 1 || x.ToolCalls[0].Name != "lookup_order" {
			t.Errorf("x_armature %+v (session header %q)", x, sid)
		}

		// Continue the session with only the new message.
		resp, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "support",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("thanks")},
		}, option.WithHeader(server.SessionHeader, sid))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != 1 || !strings.HasPrefix(resp.Choices[0].Message.Content, `You said: "thanks".`) {
			t.Errorf("continued: %+v", resp.Choices)
		}
		if got := storedMessages(t, ts, sid); len(got) != 6 || got[4] != "user: thanks" {
			t.Errorf("continued history %q", got)
		}
	})

	t.Run("streaming", func(t *testing.T) {
		stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
			Model:         "demo",
			Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("where is order 11?")},
			StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
		})
		var acc openai.ChatCompletionAccumulator
		var deltas strings.Builder
		chunks := 0
		for stream.Next() {
			ch := stream.Current()
			chunks++
			if !acc.AddChunk(ch) {
				t.Fatalf("the accumulator refused chunk %d: %s", chunks, ch.RawJSON())
			}
			if len(ch.Choices) > 0 {
				deltas.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		want := "Here is what I found: order 11: shipped, arriving Thursday"
		if deltas.String() != want {
			t.Errorf("deltas %q, want %q", deltas.String(), want)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].FinishReason != "stop" {
			t.Errorf("accumulated %+v", acc.Choices)
		}
		if len(acc.Choices[0].Message.ToolCalls) != 0 {
			t.Errorf("accumulated tool calls %+v", acc.Choices[0].Message.ToolCalls)
		}
		if chunks < 5 {
			t.Errorf("only %d chunks: not streamed word by word", chunks)
		}
	})

	t.Run("models", func(t *testing.T) {
		page, err := client.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
		}
		if strings.Join(ids, ",") != "demo,support" {
			t.Errorf("models %q", ids)
		}
	})

	t.Run("unknown model", func(t *testing.T) {
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
		})
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != server.CodeModelNotFound ||
			apiErr.Type != "invalid_request_error" {
			t.Errorf("error %v", err)
		}
	})
}
