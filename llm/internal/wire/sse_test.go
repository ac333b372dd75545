package wire

import (
	"bytes"
	"os"
	"testing"
)

func FuzzReadSSE(f *testing.F) {
	b, err := os.ReadFile("../../openai/testdata/stream.sse")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("data: a\ndata: b\n\nevent: x\n:c\ndata:[DONE]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		n := 0
		_ = ReadSSE(bytes.NewReader(data), 64, func(d []byte) (bool, error) {
			n++
			if n > len(data)+1 {
				t.Fatal("more events than bytes")
			}
			return true, nil
		})
	})
}
