package gemini_test

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
)

func seedTestdata(f *testing.F, prefix string) {
	files, _ := filepath.Glob(filepath.Join("testdata", prefix+"*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseResponse: any body either maps to a response that keeps the
// body as Raw, has an assistant message and a known finish reason and
// whose tool calls carry an ID and object (or, under error, null)
// arguments; or fails with provider_invalid_response. It never panics.
func FuzzParseResponse(f *testing.F) {
	seedTestdata(f, "resp_")
	f.Add([]byte(okBody))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"t","args":[1]}}]},"finishReason":"OTHER"}]}`))
	f.Add([]byte(`{"candidates":[{"content":{"parts":[{"text":"a"},{"text":"b","thought":true}]}}],"usageMetadata":{"promptTokenCount":-1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := gemini.ParseResponse(body)
		if err != nil {
			if !errcatIs(err, errcat.ProviderInvalidResponse) {
				t.Fatalf("error %v is not provider_invalid_response", err)
			}
			return
		}
		if string(resp.Raw) != string(body) || resp.Message.Role != llm.RoleAssistant {
			t.Fatalf("raw or role wrong: %+v", resp)
		}
		switch resp.FinishReason {
		case llm.FinishStop, llm.FinishLength, llm.FinishToolCalls, llm.FinishContentFilter, llm.FinishError:
		default:
			t.Fatalf("finish reason %q", resp.FinishReason)
		}
		for _, tc := range resp.Message.ToolCalls {
			if tc.ID == "" {
				t.Fatal("tool call without an ID")
			}
			if tc.Arguments == nil {
				if resp.FinishReason != llm.FinishError {
					t.Fatal("null arguments under a non-error finish")
				}
				continue
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(tc.Arguments, &obj) != nil || obj == nil {
				t.Fatalf("arguments %s are not an object", tc.Arguments)
			}
		}
		for _, c := range []*int{resp.Usage.PromptTokens, resp.Usage.CompletionTokens, resp.Usage.TotalTokens, resp.Usage.CachedTokens} {
			if c != nil && *c < 0 {
				t.Fatal("negative counter")
			}
		}
	})
}

// FuzzParseError: any status and body map to a category of §7 that
// agrees with the status class; it never panics.
func FuzzParseError(f *testing.F) {
	seedTestdata(f, "err_")
	f.Add([]byte(`{"error":{"code":404,"message":"m","status":"NOT_FOUND"}}`))
	f.Add([]byte(`[{"error":null}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, status := range []int{400, 401, 403, 404, 408, 429, 500, 503, 504} {
			pe := gemini.ParseError(status, http.Header{"Retry-After": {"2"}}, body)
			if pe.Cat == "" || pe.StatusCode != status || pe.Message == "" || pe.RetryAfter < 0 {
				t.Fatalf("status %d: %+v", status, pe)
			}
			if status >= 500 && pe.Cat != errcat.ProviderUnavailable {
				t.Fatalf("status %d mapped to %s", status, pe.Cat)
			}
			if status == 429 && pe.Cat != errcat.ProviderRateLimit {
				t.Fatalf("429 mapped to %s", pe.Cat)
			}
			if !strings.HasPrefix(pe.Error(), "llm: gemini") {
				t.Fatalf("error text %q", pe.Error())
			}
		}
	})
}

func errcatIs(err error, c errcat.Category) bool { return errcat.Of(err) == c }
