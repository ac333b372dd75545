package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
)

const testKey = "sk-test-secret-key"

// replay serves a recorded exchange: status, content type and body file.
type replay struct {
	status      int
	contentType string
	file        string
	body        string
	header      map[string]string
}

type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	auth   []string
}

func serve(t testing.TB, r replay) (*openai.Provider, *recorder) {
	t.Helper()
	rec := &recorder{}
	body := []byte(r.body)
	if r.file != "" {
		b, err := os.ReadFile("testdata/" + r.file)
		if err != nil {
			t.Fatal(err)
		}
		body = b
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rec.mu.Lock()
		rec.bodies = append(rec.bodies, b)
		rec.auth = append(rec.auth, req.Header.Get("Authorization"))
		rec.mu.Unlock()
		for k, v := range r.header {
			w.Header().Set(k, v)
		}
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(r.status)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	p, err := openai.New(openai.Config{BaseURL: srv.URL + "/v1", APIKey: testKey, Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	return p, rec
}

func TestComplete(t *testing.T) {
	tools := []llm.Tool{{Name: "get_weather", Description: "Weather.", Parameters: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}}
	tests := []struct {
		name    string
		replay  replay
		req     llm.Request
		want    llm.Message
		finish  llm.FinishReason
		wantErr errcat.Category
		wire    string
	}{
		{
			name:   "text",
			replay: replay{status: 200, file: "text.json"},
			req:    llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Config: llm.Config{Temperature: new(0.5), Extras: map[string]any{"z": 1, "a": "x"}}},
			want:   llm.AssistantText("Hello!"), finish: llm.FinishStop,
			wire: `{"model":"gpt-test","messages":[{"role":"user","content":"Hi"}],"temperature":0.5,"a":"x","z":1}`,
		},
		{
			name:   "tool call",
			replay: replay{status: 200, file: "tool_call.json"},
			req:    llm.Request{Messages: []llm.Message{llm.UserText("Weather?")}, Tools: tools, ToolChoice: llm.ForceTool("get_weather")},
			want:   llm.AssistantToolCalls(llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"SF"}`)}), finish: llm.FinishToolCalls,
			wire: `{"model":"gpt-test","messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather.","parameters":{"properties":{"city":{"type":"string"}},"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}}}`,
		},
		{name: "401", replay: replay{status: 401, body: `{"error":{"message":"Incorrect API key provided: sk-test-secret-key","code":"invalid_api_key"}}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderAuthentication},
		{name: "404 model", replay: replay{status: 404, body: `{"error":{"message":"The model does not exist","code":"model_not_found"}}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderInvalidModel},
		{name: "503 loading", replay: replay{status: 503, body: `{"error":{"message":"model is loading"}}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderModelNotLoaded},
		{name: "500", replay: replay{status: 500, body: `oops`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderUnavailable},
		{name: "400 image", replay: replay{status: 400, body: `{"error":{"message":"This model does not support image inputs."}}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderUnsupportedContentBlock},
		{name: "400", replay: replay{status: 400, body: `{"error":{"message":"bad field"}}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderInvalidRequest},
		{name: "no choices", replay: replay{status: 200, body: `{"id":"x"}`},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}}, wantErr: errcat.ProviderInvalidResponse},
		{name: "managed conflict", replay: replay{status: 200, file: "text.json"},
			req: llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Config: llm.Config{Extras: map[string]any{"model": "other"}}}, wantErr: errcat.ProviderInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, rec := serve(t, tt.replay)
			resp, err := p.Complete(context.Background(), &tt.req)
			if tt.wantErr != "" {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %s", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testKey) {
					t.Fatalf("error leaks the key: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, resp.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if resp.FinishReason != tt.finish || len(resp.Raw) == 0 {
				t.Errorf("finish %q raw %s", resp.FinishReason, resp.Raw)
			}
			if got := string(rec.bodies[0]); got != tt.wire {
				t.Errorf("wire:\n got %s\nwant %s", got, tt.wire)
			}
			if rec.auth[0] != "Bearer "+testKey {
				t.Errorf("auth header %q", rec.auth[0])
			}
		})
	}
}

func TestStream(t *testing.T) {
	p, rec := serve(t, replay{status: 200, file: "stream.sse", contentType: "text/event-stream"})
	var deltas []string
	resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: true,
		OnChunk: func(c *llm.Chunk) { deltas = append(deltas, c.Content) }})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Message.Text() != "Hello" || resp.FinishReason != llm.FinishStop || *resp.Usage.TotalTokens != 5 {
		t.Fatalf("resp %+v", resp)
	}
	if diff := cmp.Diff([]string{"Hel", "lo", ""}, deltas); diff != "" {
		t.Errorf("deltas (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(rec.bodies[0]), `"stream":true,"stream_options":{"include_usage":true}`) {
		t.Errorf("wire %s", rec.bodies[0])
	}
}

// TestStreamAnsweredWhole: a server that ignores stream:true and answers
// with a whole chat completion (application/json) is read as a one-chunk
// stream, not failed as a truncated stream.
func TestStreamAnsweredWhole(t *testing.T) {
	tests := []struct {
		name, file, body, ct string
		check                func(*llm.Response) bool
		want                 errcat.Category
	}{
		{name: "text", file: "text.json", ct: "application/json; charset=utf-8",
			check: func(r *llm.Response) bool { return r.Message.Text() != "" && r.FinishReason == llm.FinishStop }},
		{name: "tool call", file: "tool_call.json", ct: "application/json",
			check: func(r *llm.Response) bool {
				return len(r.Message.ToolCalls) == 1 && r.Message.ToolCalls[0].ID == "call_1" && *r.Usage.TotalTokens == 13
			}},
		{name: "content filter", ct: "application/json",
			body:  `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"content_filter"}]}`,
			check: func(r *llm.Response) bool { return r.Message.Text() == "" && r.FinishReason == llm.FinishContentFilter }},
		{name: "garbage", ct: "application/json", body: `{"choices":`, want: errcat.ProviderInvalidResponse},
		{name: "no choices", ct: "application/json", body: `{}`, want: errcat.ProviderInvalidResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := serve(t, replay{status: 200, file: tt.file, body: tt.body, contentType: tt.ct})
			chunks := 0
			resp, err := llm.Complete(context.Background(), p, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}, Stream: true,
				OnChunk: func(*llm.Chunk) { chunks++ }})
			if tt.want != "" {
				if !errors.Is(err, tt.want) {
					t.Fatalf("err = %v, want %s", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if chunks != 1 || !tt.check(resp) {
				t.Fatalf("chunks %d, resp %+v", chunks, resp)
			}
		})
	}
}

func TestReady(t *testing.T) {
	tests := []struct {
		body string
		want errcat.Category
	}{
		{`{"data":[{"id":"gpt-test"}]}`, ""},
		{`{"data":[{"id":"gpt-test","status":"not_loaded"}]}`, errcat.ProviderModelNotLoaded},
		{`{"data":[{"id":"other"}]}`, errcat.ProviderInvalidModel},
	}
	for _, tt := range tests {
		p, _ := serve(t, replay{status: 200, body: tt.body})
		err := p.Ready(context.Background())
		if tt.want == "" && err != nil || tt.want != "" && !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %q", tt.body, err, tt.want)
		}
	}
}

func TestCancel(t *testing.T) {
	p, _ := serve(t, replay{status: 200, file: "text.json"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Complete(ctx, &llm.Request{Messages: []llm.Message{llm.UserText("Hi")}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	if _, err := openai.New(openai.Config{}); !errors.Is(err, openai.ErrInvalidConfig) {
		t.Fatalf("err = %v", err)
	}
}

func BenchmarkComplete(b *testing.B) {
	p, _ := serve(b, replay{status: 200, file: "text.json"})
	req := &llm.Request{Messages: []llm.Message{llm.SystemText("Be brief."), llm.UserText("Hi")}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Complete(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}
