package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/session"
)

// The vendors' real answers when a safety filter withholds the reply,
// and a normal answer of each.
const (
	openaiEmpty  = `{"id":"x","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":null}}],"usage":{"prompt_tokens":9,"completion_tokens":0,"total_tokens":9}}`
	openaiEmpty2 = `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"content_filter","message":{"role":"assistant","content":""}}]}`
	openaiHello  = `{"id":"y","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"Hello!"}}]}`

	geminiEmpty = `{"candidates":[{"finishReason":"SAFETY","index":0,"safetyRatings":[` +
		`{"category":"HARM_CATEGORY_SEXUALLY_EXPLICIT","probability":"NEGLIGIBLE"},` +
		`{"category":"HARM_CATEGORY_HATE_SPEECH","probability":"NEGLIGIBLE"},` +
		`{"category":"HARM_CATEGORY_HARASSMENT","probability":"HIGH","blocked":true},` +
		`{"category":"HARM_CATEGORY_DANGEROUS_CONTENT","probability":"NEGLIGIBLE"}]}],` +
		`"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8},"modelVersion":"gemini-2.5-flash"}`
	geminiEmptyContent = `{"candidates":[{"content":{"role":"model"},"finishReason":"SAFETY","index":0}]}`
	geminiHello        = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello!"}]},"finishReason":"STOP","index":0}],` +
		`"usageMetadata":{"promptTokenCount":8,"candidatesTokenCount":2,"totalTokenCount":10},"modelVersion":"gemini-2.5-flash"}`

	anthropicEmpty = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}`
	anthropicHello = `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Hello!"}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":3}}`
)

// scriptedServer answers POSTs to path with the next body of script,
// repeating the last one; it counts the calls.
func scriptedServer(t *testing.T, path, contentType string, script ...string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != path {
			t.Errorf("%s %s, want POST %s", r.Method, r.URL.Path, path)
			http.Error(w, `{"error":{"message":"not found"}}`, http.StatusNotFound)
			return
		}
		n := int(calls.Add(1))
		w.Header().Set("Content-Type", contentType)
		fmt.Fprint(w, script[min(n, len(script))-1])
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// storedChat builds a chat harness over a tool-less agent on p, and
// returns the store that holds its sessions.
func storedChat(t *testing.T, p llm.Provider) (*chat.Harness, *session.MemoryStore) {
	t.Helper()
	store := session.NewMemoryStore(session.MemoryConfig{})
	return agentChat(t, agent.Config{Provider: p, System: "Be brief.", Model: llm.Config{MaxTokens: new(256)}}, store), store
}

// storedHistory returns the session's stored messages, checking that they
// form a valid history.
func storedHistory(t *testing.T, store *session.MemoryStore, id string) []llm.Message {
	t.Helper()
	rec, err := store.Load(context.Background(), session.LoadRequest{SessionID: id})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []llm.Message
	if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
		t.Fatal(err)
	}
	if err := llm.CheckHistory(nil, msgs); err != nil {
		t.Fatalf("stored history is invalid: %v", err)
	}
	return msgs
}

// checkEmptyReply asserts the outcome of a turn whose model answered
// with nothing: user-correctable provider_invalid_response, naming the
// finish reason.
func checkEmptyReply(t *testing.T, out chat.Outcome, err error, finish llm.FinishReason) {
	t.Helper()
	e, ok := out.(*chat.Errored)
	if !ok {
		t.Fatalf("outcome %#v, want *chat.Errored", out)
	}
	if e.Category != errcat.ProviderInvalidResponse || e.Bucket != harness.UserCorrectable {
		t.Errorf("category %q, bucket %q; want provider_invalid_response, user_correctable", e.Category, e.Bucket)
	}
	if !errors.Is(err, agent.ErrEmptyReply) || !errors.Is(err, errcat.ProviderInvalidResponse) || !errors.Is(e.Err, agent.ErrEmptyReply) {
		t.Errorf("error %v: want agent.ErrEmptyReply and provider_invalid_response", err)
	}
	want := "the model returned an empty reply (finish reason: " + string(finish) + ")"
	if got := e.Reply.Text(); e.Reply.Role != llm.RoleSystem || !strings.Contains(got, ": "+want+". ") {
		t.Errorf("reply %q (%s), want it to quote %q", got, e.Reply.Role, want)
	}
	if d := harness.Diagnostic(err); d != want {
		t.Errorf("diagnostic %q, want %q", d, want)
	}
}

// TestEmptyReplyIsAnError: each mapping decodes its vendor's real
// filtered (empty) answer, the agent fails the turn in
// provider_invalid_response instead of storing an empty assistant
// message, the session is untouched, and the next turn completes.
func TestEmptyReplyIsAnError(t *testing.T) {
	for _, tc := range []struct {
		name     string
		empty    string
		hello    string
		finish   llm.FinishReason
		path     string
		provider func(t *testing.T, url string) llm.Provider
	}{
		{"openai null content", openaiEmpty, openaiHello, llm.FinishContentFilter, "/v1/chat/completions", newOpenAI},
		{"openai empty content", openaiEmpty2, openaiHello, llm.FinishContentFilter, "/v1/chat/completions", newOpenAI},
		{"gemini safety without content", geminiEmpty, geminiHello, llm.FinishContentFilter, "/v1beta/models/gemini-2.5-flash:generateContent", newGemini},
		{"gemini safety without parts", geminiEmptyContent, geminiHello, llm.FinishContentFilter, "/v1beta/models/gemini-2.5-flash:generateContent", newGemini},
		{"anthropic empty content", anthropicEmpty, anthropicHello, llm.FinishStop, "/v1/messages", newAnthropic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			srv, calls := scriptedServer(t, tc.path, "application/json", tc.hello, tc.empty, tc.hello)
			h, store := storedChat(t, tc.provider(t, srv.URL))

			if out, err := h.Send(ctx, "s1", llm.UserText("Hi")); err != nil {
				t.Fatalf("first turn: %#v, %v", out, err)
			}
			before := storedHistory(t, store, "s1")
			if roles(before) != "user,assistant" {
				t.Fatalf("history after the first turn: %s", roles(before))
			}

			out, err := h.Send(ctx, "s1", llm.UserText("Say something filtered"))
			checkEmptyReply(t, out, err, tc.finish)
			if calls.Load() != 2 {
				t.Errorf("%d model calls after the errored turn, want 2", calls.Load())
			}
			if diff := cmp.Diff(before, storedHistory(t, store, "s1")); diff != "" {
				t.Fatalf("the errored turn changed the stored history (-before +after):\n%s", diff)
			}

			out, err = h.Send(ctx, "s1", llm.UserText("Hi again"))
			c, ok := out.(*chat.Completed)
			if err != nil || !ok || len(c.Replies) != 1 || c.Replies[0].Text() != "Hello!" {
				t.Fatalf("turn after the empty reply: %#v, %v", out, err)
			}
			after := storedHistory(t, store, "s1")
			want := append(before, llm.UserText("Hi again"), llm.AssistantText("Hello!"))
			if diff := cmp.Diff(want, after); diff != "" {
				t.Fatalf("history after the next turn (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmptyReplyStreamingOpenAI: the same over a streamed OpenAI call
// whose only chunk carries finish_reason content_filter and no content.
func TestEmptyReplyStreamingOpenAI(t *testing.T) {
	ctx := context.Background()
	const emptyStream = `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	const helloStream = `data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo!"},"finish_reason":null}]}` + "\n\n" +
		`data: {"id":"y","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		"data: [DONE]\n\n"
	srv, calls := scriptedServer(t, "/v1/chat/completions", "text/event-stream", helloStream, emptyStream, helloStream)
	h, store := storedChat(t, newOpenAI(t, srv.URL))

	stream := func(text string) (string, chat.Outcome, error) {
		var b strings.Builder
		for ch, err := range h.SendStreaming(ctx, "s1", llm.UserText(text)) {
			switch ch.Kind {
			case chat.ChunkText:
				b.WriteString(ch.Text)
			case chat.ChunkOutcome:
				return b.String(), ch.Outcome, err
			}
		}
		t.Fatal("no outcome chunk")
		return "", nil, nil
	}

	if text, out, err := stream("Hi"); err != nil || text != "Hello!" {
		t.Fatalf("first turn: %q, %#v, %v", text, out, err)
	}
	before := storedHistory(t, store, "s1")

	text, out, err := stream("Say something filtered")
	checkEmptyReply(t, out, err, llm.FinishContentFilter)
	if text != "" || calls.Load() != 2 {
		t.Errorf("streamed %q in %d calls, want nothing in 2", text, calls.Load())
	}
	if diff := cmp.Diff(before, storedHistory(t, store, "s1")); diff != "" {
		t.Fatalf("the errored turn changed the stored history (-before +after):\n%s", diff)
	}

	if text, out, err := stream("Hi again"); err != nil || text != "Hello!" {
		t.Fatalf("turn after the empty reply: %q, %#v, %v", text, out, err)
	}
	if got := storedHistory(t, store, "s1"); roles(got) != "user,assistant,user,assistant" || got[3].Text() != "Hello!" {
		t.Fatalf("history after the next turn: %+v", got)
	}
}

// TestEmptyReplyOnlyReasoning: a reply with reasoning but no text and no
// tool calls is empty too (the user would see nothing).
func TestEmptyReplyOnlyReasoning(t *testing.T) {
	const reasoningOnly = `{"id":"x","object":"chat.completion","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":null,"reasoning_content":"Let me think"}}]}`
	srv, _ := scriptedServer(t, "/v1/chat/completions", "application/json", reasoningOnly)
	h, _ := storedChat(t, newOpenAI(t, srv.URL))
	out, err := h.Send(context.Background(), "s1", llm.UserText("Hi"))
	checkEmptyReply(t, out, err, llm.FinishLength)
}

func newOpenAI(t *testing.T, url string) llm.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{BaseURL: url + "/v1", APIKey: "sk-test", Model: "gpt-4o"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newGemini(t *testing.T, url string) llm.Provider {
	t.Helper()
	p, err := gemini.New(gemini.Config{BaseURL: url, APIKey: "test-key", Model: "gemini-2.5-flash"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func newAnthropic(t *testing.T, url string) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{BaseURL: url, APIKey: "test-key", Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}
