package adk

import (
	"encoding/json"
	"testing"
	"unicode/utf8"

	"google.golang.org/genai"

	"github.com/armature-go/armature/llm"
)

// TestReasoningRoundTrip: an assistant message's content goes through
// ADK-Go's genai content and back unchanged: its text, its reasoning
// (thinking blocks with their signatures, redacted thinking), signed text
// and its calls' signatures, whatever the signatures' encoding.
func TestReasoningRoundTrip(t *testing.T) {
	call := llm.ToolCall{ID: "c1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`), Signature: "c2lnLWNhbGw="}
	signed := llm.TextBlock("Looking.")
	signed.Signature = "c2lnLXRleHQ="
	cases := []struct {
		name string
		msg  llm.Message
	}{
		{"text", llm.AssistantText("Order 7 ships Thursday.")},
		{"calls only", llm.AssistantToolCalls(call)},
		{"anthropic reasoning with a call", llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "lookup_order", Arguments: json.RawMessage(`{}`)}},
			Content: llm.Blocks(llm.ThinkingBlock("I should look it up.", "EqQBCkgIARABGAIiQL+/sig=="), llm.RedactedThinkingBlock("cmVkYWN0ZWQ="), llm.TextBlock("Let me check."))}},
		{"non-canonical signatures", llm.Message{Role: llm.RoleAssistant,
			Content: llm.Blocks(llm.ThinkingBlock("hmm", "sig_not-base64 at all"), llm.RedactedThinkingBlock("YQ"), llm.TextBlock("ok"))}},
		{"gemini thought and signed text", llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call},
			Content: llm.Blocks(llm.ThinkingBlock("a summary", ""), signed)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			msgs, stored := throughSession(t, c.msg)
			want := c.msg
			same := func(got llm.Message) bool {
				if richContentOf(want) {
					return got.Content.Equal(want.Content)
				}
				return got.Content.IsText() && got.Text() == want.Text() // plain text stays a string
			}
			if len(msgs) != 1 || !same(msgs[0]) || len(msgs[0].ToolCalls) != len(want.ToolCalls) {
				t.Fatalf("got %#v\nwant %#v", msgs, want)
			}
			for i, tc := range msgs[0].ToolCalls {
				if w := want.ToolCalls[i]; tc.ID != w.ID || tc.Signature != w.Signature {
					t.Fatalf("call %d: got %#v, want %#v", i, tc, w)
				}
			}
			if got := contentText(stored); got != c.msg.Text() {
				t.Fatalf("the content's text %q, want %q (reasoning is not the answer)", got, c.msg.Text())
			}
		})
	}
}

func richContentOf(m llm.Message) bool {
	for _, b := range m.Content.Blocks() {
		if b.Type != llm.BlockText || b.Signature != "" {
			return true
		}
	}
	return false
}

// FuzzSignatureRoundTrip: any signature comes back from a genai part
// exactly: canonical base64 as Gemini's bytes, anything else as it was.
func FuzzSignatureRoundTrip(f *testing.F) {
	for _, s := range []string{"c2ln", "c2lnLXJlZnVuZC01", "sig_thinking-1/not+canonical", "YQ", "YR==", "a\nb", "\x00armature-raw\x00x", "EqQBCkgIARAB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := signatureOf(&genai.Part{ThoughtSignature: signatureBytes(s)}); got != s {
			t.Fatalf("signature %q came back as %q", s, got)
		}
	})
}

// FuzzReasoningRoundTrip: an assistant message of any text, thinking
// and redacted-thinking blocks (any texts and signatures) comes back
// from a genai content, through its JSON, with the same content.
func FuzzReasoningRoundTrip(f *testing.F) {
	f.Add("I should look.", "sig_1", "cmVkYWN0ZWQ=", "Let me check.", uint8(7))
	f.Add("a", "", "x", "", uint8(1))
	f.Fuzz(func(t *testing.T, thought, sig, data, text string, shape uint8) {
		for _, s := range []string{thought, sig, data, text} {
			if !utf8.ValidString(s) {
				return // the runtime's messages are UTF-8 (JSON would replace the rest)
			}
		}
		var blocks []llm.Block
		if shape&1 != 0 && thought != "" {
			blocks = append(blocks, llm.ThinkingBlock(thought, sig))
		}
		if shape&2 != 0 && data != "" {
			blocks = append(blocks, llm.RedactedThinkingBlock(data))
		}
		if shape&4 != 0 && text != "" {
			b := llm.TextBlock(text)
			if shape&8 != 0 {
				b.Signature = sig
			}
			blocks = append(blocks, b)
		}
		if len(blocks) == 0 {
			return
		}
		m := llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(blocks...)}
		msgs, _ := throughSession(t, m)
		if !richContentOf(m) {
			if len(msgs) != 1 || msgs[0].Text() != m.Text() {
				t.Fatalf("got %#v, want the text of %#v", msgs, m)
			}
			return
		}
		if len(msgs) != 1 || !msgs[0].Content.Equal(m.Content) {
			t.Fatalf("got %#v\nwant %#v", msgs, m)
		}
	})
}

// throughSession is m as ADK-Go's session gives it back: as a genai
// content, through its JSON (as ADK-Go's database session keeps it), and
// read back as the runtime's messages.
func throughSession(t *testing.T, m llm.Message) ([]llm.Message, *genai.Content) {
	t.Helper()
	c, err := fromLLMMessage(m)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var stored genai.Content
	if err := json.Unmarshal(b, &stored); err != nil {
		t.Fatal(err)
	}
	msgs, err := toLLMMessages(&stored)
	if err != nil {
		t.Fatal(err)
	}
	return msgs, &stored
}
