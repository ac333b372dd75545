package anthropic

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/spectest"
)

// FuzzStreamEvents feeds arbitrary event data to the stream assembler:
// it never panics, and whatever it assembles at message_stop is a
// Response ParseResponse accepted.
func FuzzStreamEvents(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "stream", "*.sse"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":99}\n\n"))
	f.Fuzz(func(t *testing.T, sse []byte) {
		var st streamState
		for _, line := range bytes.Split(sse, []byte("\n")) {
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			_, end, err := st.event(data)
			if err != nil {
				return
			}
			if end {
				if resp, err := st.response(false); err == nil && resp == nil {
					t.Fatal("no response and no error")
				}
				return
			}
		}
	})
}

// The system prompt in Request.System and the asides of a stored history
// encode as the transcript does.
func TestSeparateSystemAndAsides(t *testing.T) {
	p, err := New(Config{Model: "claude-sonnet-4-5", APIKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	spectest.CheckSeparateSystem(t, llm.Config{MaxTokens: new(256)}, p.RequestBody)
}
