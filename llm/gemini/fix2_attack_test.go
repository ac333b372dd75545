package gemini_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/gemini"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// geminiAttacks is the Gemini wire for the spectest attacks.
func geminiAttacks(t *testing.T) spectest.WireAttacks {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream", "thought_text_calls.sse"))
	if err != nil {
		t.Fatal(err)
	}
	return spectest.WireAttacks{
		New: func(url string, timeout time.Duration) (llm.Provider, error) {
			return gemini.New(gemini.Config{BaseURL: url, Model: "gemini-test", CallNonce: func() string { return "n" }, Timeout: timeout})
		},
		Request: func(stream bool) *llm.Request {
			r := geminiStreamRequest(nil)
			r.Stream = stream
			return r
		},
		Stream:     string(raw),
		Complete:   `{"candidates":[{"content":{"role":"model","parts":[{"text":"Hello there"}]},"finishReason":"STOP"}]}`,
		FirstEvent: `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"Hel"}]}}]}` + "\n\n",
	}
}

// TestStreamAttacks: see spectest.CheckStreamAttacks.
func TestStreamAttacks(t *testing.T) { spectest.CheckStreamAttacks(t, geminiAttacks(t)) }

// TestCompleteAttacks: see spectest.CheckCompleteAttacks.
func TestCompleteAttacks(t *testing.T) { spectest.CheckCompleteAttacks(t, geminiAttacks(t)) }
