package openai

import (
	"bytes"
	"os"
	"testing"
)

func FuzzParseResponse(f *testing.F) {
	for _, name := range []string{"text.json", "tool_call.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"choices":[{"message":{"content":[{"type":"text","text":"a"}],"reasoning":"r"},"finish_reason":"x"}],"usage":{"prompt_tokens":"1"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := ParseResponse(data)
		if err == nil && (resp == nil || !bytes.Equal(resp.Raw, data)) {
			t.Fatal("success without the raw body")
		}
	})
}

func FuzzParseChunk(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"x","tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}`))
	f.Add([]byte(`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":-1,"total_tokens":true}}`))
	f.Add([]byte(`{"error":{"message":"boom"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseChunk(data)
		if err == nil && c == nil {
			t.Fatal("nil chunk without error")
		}
	})
}
