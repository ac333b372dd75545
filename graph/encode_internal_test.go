package graph

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
)

// randomConversation builds n messages of every shape a conversation
// holds, with text that needs escaping (quotes, control and HTML
// characters, U+2028, invalid UTF-8).
func randomConversation(r *rand.Rand, n int) []llm.Message {
	texts := []string{"", "plain", `quote " and \ back`, "<b>&amp;</b>", "line\nbreak\ttab\x01", "sep\u2028\u2029", "bad \xff utf8", strings.Repeat("long ", 50)}
	text := func() string { return texts[r.IntN(len(texts))] + texts[r.IntN(len(texts))] }
	ms := make([]llm.Message, n)
	for i := range ms {
		switch r.IntN(5) {
		case 0:
			ms[i] = llm.SystemText(text())
		case 1:
			ms[i] = llm.UserText(text())
		case 2:
			ms[i] = llm.AssistantText(text())
		case 3:
			ms[i] = llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{
				{ID: "call-" + text(), Name: "lookup", Arguments: json.RawMessage(`{"q":"<x>","n":[1,2]}`)},
				{ID: "c2", Name: "none"},
			}}
		default:
			ms[i] = llm.ToolResult("call-"+text(), text())
		}
	}
	return ms
}

// TestEncodeMessages checks the conversation fast paths against
// encoding/json, byte for byte: encodeValue (a whole-record save) and
// newMessages (a delta append), on random conversations.
func TestEncodeMessages(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 1))
	for _, v := range []any{[]llm.Message(nil), []llm.Message{}} {
		got, err := encodeValue(v)
		want, werr := json.Marshal(v)
		if err != nil || werr != nil || string(got) != string(want) {
			t.Errorf("encodeValue(%#v) = %s, %v; json.Marshal = %s, %v", v, got, err, want, werr)
		}
	}
	for range 200 {
		ms := randomConversation(r, r.IntN(12))
		got, err := encodeValue(ms)
		want, werr := json.Marshal(ms)
		if err != nil || werr != nil || string(got) != string(want) {
			t.Fatalf("encodeValue = %s, %v; json.Marshal = %s, %v", got, err, want, werr)
		}
		from := r.IntN(len(ms) + 1)
		items, ok := newItems(ms, from)
		if !ok || len(items) != len(ms)-from {
			t.Fatalf("newItems(%d messages, %d) = %d items, %v", len(ms), from, len(items), ok)
		}
		for j, it := range items {
			want, _ := json.Marshal(ms[from+j])
			if string(it) != string(want) || cap(it) != len(it) {
				t.Fatalf("item %d = %s (cap %d), want %s", from+j, it, cap(it), want)
			}
		}
	}
	bad := []llm.Message{llm.UserText("ok"), {Role: "robot"}}
	if _, err := encodeValue(bad); err == nil {
		t.Error("encodeValue of a message with an unknown role: no error")
	} else if _, werr := json.Marshal(bad); werr == nil || err.Error() != werr.Error() {
		t.Errorf("encodeValue error %q, json.Marshal's %v", err, werr)
	}
	if _, ok := newItems(bad, 0); ok {
		t.Error("newItems of a message with an unknown role: ok")
	}
	if _, ok := newItems(bad, 3); ok {
		t.Error("newItems past the end: ok")
	}
}

// FuzzEncodeMessages decodes arbitrary bytes as a conversation and checks
// that what decodes encodes as json.Marshal encodes it.
func FuzzEncodeMessages(f *testing.F) {
	for _, s := range []string{`[]`, `null`, `[{"role":"user","content":"hi <b>"}]`,
		`[{"role":"assistant","tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\": 1}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var ms []llm.Message
		if json.Unmarshal(data, &ms) != nil {
			return
		}
		got, err := encodeValue(ms)
		want, werr := json.Marshal(ms)
		if (err == nil) != (werr == nil) || string(got) != string(want) {
			t.Fatalf("encodeValue = %s, %v; json.Marshal = %s, %v", got, err, want, werr)
		}
		items, ok := newItems(ms, 0)
		if ok != (werr == nil) {
			t.Fatalf("newItems ok = %v, json.Marshal error %v", ok, werr)
		}
		for i, it := range items {
			if w, _ := json.Marshal(ms[i]); string(it) != string(w) {
				t.Fatalf("item %d = %s, want %s", i, it, w)
			}
		}
	})
}
