package gemini_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

// sseServer answers every call with the SSE file, recording the paths.
func sseServer(t *testing.T, file string, paths *[]string) *gemini.Provider {
	t.Helper()
	sse, err := os.ReadFile(filepath.Join("testdata", "stream", file))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*paths = append(*paths, r.URL.RequestURI())
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(sse)
	}))
	t.Cleanup(srv.Close)
	p, err := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test", CallNonce: func() string { return "n" }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func geminiStreamRequest(onChunk func(*llm.Chunk)) *llm.Request {
	return &llm.Request{Messages: []llm.Message{llm.UserText("weather in Paris?")}, Stream: true, OnChunk: onChunk,
		Tools: []llm.Tool{{Name: "get_weather", Parameters: json.RawMessage(`{"type":"object"}`)},
			{Name: "get_time", Parameters: json.RawMessage(`{"type":"object"}`)}}}
}

// TestStreamAssemblesAsAtomic: thought and text parts stream live, the
// calls arrive with the ids the Response has, and the Response equals
// the atomic body's (parts joined, signatures kept).
func TestStreamAssemblesAsAtomic(t *testing.T) {
	var paths []string
	p := sseServer(t, "thought_text_calls.sse", &paths)
	var text, reasoning strings.Builder
	var ids []string
	resp, err := llm.Complete(t.Context(), p, geminiStreamRequest(func(c *llm.Chunk) {
		text.WriteString(c.Content)
		reasoning.WriteString(c.Reasoning)
		for _, d := range c.ToolCalls {
			ids = append(ids, d.ID)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 1 || paths[0] != "/v1beta/models/gemini-test:streamGenerateContent?alt=sse" {
		t.Fatalf("requests %v", paths)
	}
	if text.String() != "Checking Paris." || reasoning.String() != "Weighing the units. Celsius it is." {
		t.Fatalf("live text %q, reasoning %q", text.String(), reasoning.String())
	}
	var want *llm.Response
	{
		var paths2 []string
		atomic, err := os.ReadFile(filepath.Join("testdata", "stream", "thought_text_calls.json"))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			paths2 = append(paths2, r.URL.Path)
			w.Write(atomic)
		}))
		defer srv.Close()
		ap, _ := gemini.New(gemini.Config{BaseURL: srv.URL, Model: "gemini-test", CallNonce: func() string { return "n" }})
		req := geminiStreamRequest(nil)
		req.Stream = false
		if want, err = llm.Complete(t.Context(), ap, req); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := json.Marshal([]any{resp.Message, resp.FinishReason, resp.Usage})
	exp, _ := json.Marshal([]any{want.Message, want.FinishReason, want.Usage})
	if string(got) != string(exp) {
		t.Fatalf("streamed:\n%s\nwant the atomic:\n%s", got, exp)
	}
	if strings.Join(ids, ",") != resp.Message.ToolCalls[0].ID+","+resp.Message.ToolCalls[1].ID {
		t.Fatalf("live ids %v differ from the response's %v", ids, resp.Message.ToolCalls)
	}
}

func TestStreamFailures(t *testing.T) {
	for _, file := range []string{"error_midstream.sse", "truncated.sse"} {
		t.Run(file, func(t *testing.T) {
			var paths []string
			p := sseServer(t, file, &paths)
			var got strings.Builder
			_, err := llm.Complete(t.Context(), p, geminiStreamRequest(func(c *llm.Chunk) { got.WriteString(c.Content) }))
			var pe *llm.ProviderError
			if !errors.As(err, &pe) || pe.Cat != errcat.ProviderUnavailable || pe.Op != "stream" {
				t.Fatalf("err = %v, want a stream failure in provider_unavailable", err)
			}
			if got.Len() == 0 {
				t.Error("no delta reached the caller before the failure")
			}
		})
	}
}

// TestStreamBlockedPrompt: a blocked prompt streams as the atomic
// blocked response maps: an empty content_filter reply.
func TestStreamBlockedPrompt(t *testing.T) {
	var paths []string
	p := sseServer(t, "blocked.sse", &paths)
	resp, err := llm.Complete(t.Context(), p, geminiStreamRequest(nil))
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != llm.FinishContentFilter || resp.Message.Text() != "" {
		t.Fatalf("blocked prompt: %+v", resp)
	}
}
