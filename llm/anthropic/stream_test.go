package anthropic_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
)

// streamServer answers every Messages call with the SSE file and records
// the request bodies.
func streamServer(t *testing.T, file string, bodies *[]map[string]any) *anthropic.Provider {
	t.Helper()
	sse, err := os.ReadFile(filepath.Join("testdata", "stream", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var b map[string]any
		json.Unmarshal(raw, &b)
		*bodies = append(*bodies, b)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	t.Cleanup(srv.Close)
	p, err := anthropic.New(anthropic.Config{BaseURL: srv.URL, APIKey: "sk-ant-test-0123456789", Model: "claude-test"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func streamRequest(onChunk func(*llm.Chunk)) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserText("weather in SF?")}, Stream: true, OnChunk: onChunk,
		Config: llm.Config{MaxTokens: new(256)},
		Tools: []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{"type":"object"}`)}}}
}

// TestStreamAssemblesAsAtomic: a streamed call (thinking with its
// signature, text, two tool_use blocks, one with input deltas) yields the
// deltas live and returns the Response the equivalent atomic body maps to.
func TestStreamAssemblesAsAtomic(t *testing.T) {
	var bodies []map[string]any
	p := streamServer(t, "thinking_text_tool.sse", &bodies)
	var text, reasoning, args strings.Builder
	var ids []string
	resp, err := llm.Complete(t.Context(), p, streamRequest(func(c *llm.Chunk) {
		text.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
		for _, d := range c.ToolCalls {
			if d.ID != "" {
				ids = append(ids, d.ID)
			}
			args.WriteString(d.Arguments)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if bodies[0]["stream"] != true {
		t.Fatalf("request body stream = %v, want true", bodies[0]["stream"])
	}
	if text.String() != "Let me check the weather." || reasoning.String() != "The user wants the weather. I will call the tool." ||
		args.String() != `{"location": "San Francisco, CA"}` || strings.Join(ids, ",") != "toolu_01T1x1fJ34qAmk2tNTrN7Up6,toolu_02" {
		t.Fatalf("live deltas: text %q, reasoning %q, args %q, ids %v", text.String(), reasoning.String(), args.String(), ids)
	}
	atomic, err := os.ReadFile(filepath.Join("testdata", "stream", "thinking_text_tool.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := anthropic.ParseResponse(atomic)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(struct {
		M llm.Message
		F llm.FinishReason
		U llm.Usage
	}{resp.Message, resp.FinishReason, resp.Usage})
	exp, _ := json.Marshal(struct {
		M llm.Message
		F llm.FinishReason
		U llm.Usage
	}{want.Message, want.FinishReason, want.Usage})
	if string(got) != string(exp) {
		t.Fatalf("streamed response:\n%s\nwant the atomic one:\n%s", got, exp)
	}
	if b := resp.Message.Content.Blocks(); len(b) == 0 || b[0].Signature == "" {
		t.Fatalf("the thinking block lost its signature: %+v", b)
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		file string
		cat  errcat.Category
	}{
		{"error_midstream.sse", errcat.ProviderUnavailable},
		{"truncated.sse", errcat.ProviderUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var bodies []map[string]any
			p := streamServer(t, tc.file, &bodies)
			var got strings.Builder
			_, err := llm.Complete(t.Context(), p, streamRequest(func(c *llm.Chunk) { got.WriteString(c.Content) }))
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Cat != tc.cat || pe.Op != "stream" {
				t.Fatalf("err = %v, want a stream failure in %s", err, tc.cat)
			}
			if got.Len() == 0 {
				t.Error("no delta reached the caller before the failure")
			}
		})
	}
}

// TestStreamEmptyReply: a stream with no content block assembles like
// content: [] does atomically.
func TestStreamEmptyReply(t *testing.T) {
	var bodies []map[string]any
	p := streamServer(t, "empty.sse", &bodies)
	resp, err := llm.Complete(t.Context(), p, streamRequest(nil))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := anthropic.ParseResponse([]byte(`{"type":"message","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":0}}`))
	if resp.FinishReason != want.FinishReason || !resp.Message.Content.IsZero() != !want.Message.Content.IsZero() {
		t.Fatalf("empty stream: %+v, want %+v", resp, want)
	}
}

// TestStreamManagedField: an extras stream that contradicts the call is
// refused before anything is sent, in both modes.
func TestStreamManagedField(t *testing.T) {
	var bodies []map[string]any
	p := streamServer(t, "empty.sse", &bodies)
	req := streamRequest(nil)
	req.Config.Extras = map[string]any{"stream": false}
	if _, err := llm.Complete(t.Context(), p, req); !errors.Is(err, errcat.ProviderInvalidRequest) {
		t.Fatalf("stream call with extras stream:false: %v, want provider_invalid_request", err)
	}
	req.Stream, req.Config.Extras = false, map[string]any{"stream": true}
	if _, err := llm.Complete(t.Context(), p, req); !errors.Is(err, errcat.ProviderInvalidRequest) {
		t.Fatalf("atomic call with extras stream:true: %v, want provider_invalid_request", err)
	}
	if len(bodies) != 0 {
		t.Fatalf("%d requests were sent", len(bodies))
	}
}

// TestStreamChunkRawIsItsOwn: each chunk's Raw is its own event, still
// whole after the stream read on (an OnChunk that keeps them). Before,
// Raw pointed into the stream reader's reused buffer, and a kept chunk's
// Raw was overwritten by the events after it.
func TestStreamChunkRawIsItsOwn(t *testing.T) {
	var bodies []map[string]any
	p := streamServer(t, "thinking_text_tool.sse", &bodies)
	var kept, copies []json.RawMessage
	if _, err := llm.Complete(t.Context(), p, streamRequest(func(c *llm.Chunk) {
		kept = append(kept, c.Raw)
		copies = append(copies, append(json.RawMessage(nil), c.Raw...))
	})); err != nil {
		t.Fatal(err)
	}
	if len(kept) < 3 {
		t.Fatalf("%d chunks", len(kept))
	}
	for i := range kept {
		if string(kept[i]) != string(copies[i]) {
			t.Fatalf("chunk %d's Raw changed after it was yielded:\n%s\nwas\n%s", i, kept[i], copies[i])
		}
	}
}
