package eino

import (
	"bytes"
	"context"
	"encoding/gob"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/schema"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
)

// TestParamsCache: a tool's parameters are encoded once and the encoding
// reused by every call, through models WithTools derives; the cache stays
// bounded.
func TestParamsCache(t *testing.T) {
	params := schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"order": {Type: schema.String, Required: true}})
	tools := []*schema.ToolInfo{{Name: "lookup", Desc: "d", ParamsOneOf: params}, {Name: "none"}}
	m, err := NewProviderModel(demo.Model{}).WithTools(tools)
	if err != nil {
		t.Fatal(err)
	}
	pm := m.(*providerModel)
	in := []*schema.Message{schema.UserMessage("hi")}
	a, err := pm.request(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := pm.request(context.Background(), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Tools[0].Parameters) != string(b.Tools[0].Parameters) || &a.Tools[0].Parameters[0] != &b.Tools[0].Parameters[0] {
		t.Errorf("the same parameters were encoded twice: %s, %s", a.Tools[0].Parameters, b.Tools[0].Parameters)
	}
	if string(a.Tools[1].Parameters) != `{"type":"object"}` {
		t.Errorf("a tool without parameters: %s", a.Tools[1].Parameters)
	}
	for i := range 3 * paramsCacheMax {
		if _, err := pm.params.encode(fmt.Sprint("tool", i), schema.NewParamsOneOfByParams(nil)); err != nil {
			t.Fatal(err)
		}
	}
	if len(pm.params.m) > paramsCacheMax {
		t.Errorf("the cache holds %d encodings, over its bound %d", len(pm.params.m), paramsCacheMax)
	}
}

// TestParamsCacheDecodedCopies: a run resumed from a checkpoint hands
// the model the tools Eino decoded from it (gob), new values on every
// resume. A copy equal to the cached parameters reuses their encoding
// and leaves the entry as it was, so the cache keeps one schema a tool
// however many runs resume; parameters that changed are encoded again.
func TestParamsCacheDecodedCopies(t *testing.T) {
	params := schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"order": {Type: schema.String, Required: true}})
	declared := &schema.ToolInfo{Name: "lookup", Desc: "d", ParamsOneOf: params}
	var c paramsCache
	first, err := c.encode(declared.Name, declared.ParamsOneOf)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		var buf bytes.Buffer
		if err := gob.NewEncoder(&buf).Encode(declared); err != nil {
			t.Fatal(err)
		}
		var decoded schema.ToolInfo
		if err := gob.NewDecoder(&buf).Decode(&decoded); err != nil {
			t.Fatal(err)
		}
		if decoded.ParamsOneOf == params {
			t.Fatal("the decoded tool shares the declared parameters")
		}
		got, err := c.encode(decoded.Name, decoded.ParamsOneOf)
		if err != nil {
			t.Fatal(err)
		}
		if &got[0] != &first[0] {
			t.Errorf("a decoded copy was encoded again: %s", got)
		}
	}
	if len(c.m) != 1 || c.m["lookup"].p != params {
		t.Errorf("the cache holds %d entries, lookup's of the declared parameters: %v", len(c.m), c.m["lookup"].p == params)
	}
	changed := schema.NewParamsOneOfByParams(map[string]*schema.ParameterInfo{"order": {Type: schema.Integer, Required: true}})
	got, err := c.encode("lookup", changed)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) == string(first) || !bytes.Contains(got, []byte(`"integer"`)) {
		t.Errorf("changed parameters kept the old encoding: %s", got)
	}
}

// TestReasoningRoundTrip: an assistant message's reasoning (thinking
// blocks with their signatures, redacted thinking) and signed text go
// through an Eino message, and its JSON (a checkpoint), unchanged; plain
// text stays a string; an Eino message whose text was rewritten since
// (ContentExtra stale) is read by its text.
func TestReasoningRoundTrip(t *testing.T) {
	signed := llm.TextBlock("Looking.")
	signed.Signature = "c2lnLXRleHQ="
	call := llm.ToolCall{ID: "toolu_1", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}
	cases := []llm.Message{
		llm.AssistantText("Order 7 ships Thursday."),
		{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call},
			Content: llm.Blocks(llm.ThinkingBlock("I should look it up.", "sig_not-base64"), llm.RedactedThinkingBlock("cmVkYWN0ZWQ="), llm.TextBlock("Let me check."))},
		{Role: llm.RoleAssistant, Content: llm.Blocks(llm.ThinkingBlock("a summary", ""), signed)},
	}
	for i, m := range cases {
		b, err := json.Marshal(fromLLM(m))
		if err != nil {
			t.Fatal(err)
		}
		var em schema.Message
		if err := json.Unmarshal(b, &em); err != nil {
			t.Fatal(err)
		}
		got, err := toLLM(&em)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Content.Equal(m.Content) || len(got.ToolCalls) != len(m.ToolCalls) {
			t.Fatalf("case %d: got %#v, want %#v", i, got, m)
		}
		if em.Content != m.Text() {
			t.Fatalf("case %d: Eino's text %q, want %q", i, em.Content, m.Text())
		}
		if i == 1 && em.ReasoningContent != "I should look it up." {
			t.Fatalf("ReasoningContent %q", em.ReasoningContent)
		}
		em.Content = "rewritten"
		if got, _ := toLLM(&em); !got.Content.Equal(llm.Text("rewritten")) {
			t.Fatalf("case %d: a rewritten message reads %#v", i, got.Content)
		}
	}
}

// FuzzAssistantContent: whatever an Eino message's ContentExtra holds (a
// checkpoint written by another build, a callback's edit), the message
// reads as content whose text is the message's.
func FuzzAssistantContent(f *testing.F) {
	f.Add(`[{"type":"thinking","text":"hmm","signature":"s"},{"type":"text","text":"hi"}]`, "hi")
	f.Add(`"hi"`, "hi")
	f.Add(`{`, "")
	f.Fuzz(func(t *testing.T, extra, text string) {
		m := &schema.Message{Role: schema.Assistant, Content: text, Extra: map[string]any{ContentExtra: extra}}
		if got := assistantContent(m); got.Text() != text {
			t.Fatalf("content %#v, want text %q", got, text)
		}
	})
}
