package anthropic_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/anthropic"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// anthropicAttacks is the Anthropic Messages wire for the spectest
// attacks.
func anthropicAttacks(t *testing.T) spectest.WireAttacks {
	raw, err := os.ReadFile(filepath.Join("testdata", "stream", "thinking_text_tool.sse"))
	if err != nil {
		t.Fatal(err)
	}
	return spectest.WireAttacks{
		New: func(url string, timeout time.Duration) (llm.Provider, error) {
			return anthropic.New(anthropic.Config{BaseURL: url, APIKey: "sk-ant-test-0123456789", Model: "claude-test", Timeout: timeout})
		},
		Request: func(stream bool) *llm.Request {
			r := streamRequest(nil)
			r.Stream = stream
			return r
		},
		Stream: string(raw),
		Complete: `{"id":"msg_1","type":"message","role":"assistant","model":"claude-test","content":[{"type":"text","text":"Hello there"}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`,
		FirstEvent: "event: message_start\n" + `data: {"type":"message_start","message":{"id":"msg_03","type":"message","role":"assistant",` +
			`"model":"claude-test","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n",
	}
}

// TestStreamAttacks: see spectest.CheckStreamAttacks.
func TestStreamAttacks(t *testing.T) { spectest.CheckStreamAttacks(t, anthropicAttacks(t)) }

// TestCompleteAttacks: see spectest.CheckCompleteAttacks.
func TestCompleteAttacks(t *testing.T) { spectest.CheckCompleteAttacks(t, anthropicAttacks(t)) }
