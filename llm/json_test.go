package llm_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// roundTripCases are wire documents with their decoded value and their
// canonical encoding ("" when the input is already canonical).
var roundTripCases = []struct {
	name      string
	in        string
	want      llm.Message
	canonical string
}{
	{
		name: "user text",
		in:   `{"role":"user","content":"hello"}`,
		want: llm.UserText("hello"),
	},
	{
		name: "system text",
		in:   `{"role":"system","content":"be terse"}`,
		want: llm.SystemText("be terse"),
	},
	{
		name: "empty string content kept",
		in:   `{"role":"user","content":""}`,
		want: llm.UserText(""),
	},
	{
		name:      "null content omitted",
		in:        `{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123_with_underscores","name":"get_weather","arguments":{"city": "Boston"}}]}`,
		want:      llm.AssistantToolCalls(llm.ToolCall{ID: "call_abc123_with_underscores", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Boston"}`)}),
		canonical: `{"role":"assistant","tool_calls":[{"id":"call_abc123_with_underscores","name":"get_weather","arguments":{"city":"Boston"}}]}`,
	},
	{
		name: "null arguments under finish_reason error",
		in:   `{"role":"assistant","tool_calls":[{"id":"call_truncated_003","name":"get_weather","arguments":null}]}`,
		want: llm.AssistantToolCalls(llm.ToolCall{ID: "call_truncated_003", Name: "get_weather"}),
	},
	{
		name:      "missing arguments become null",
		in:        `{"role":"assistant","tool_calls":[{"id":"c","name":"n"}]}`,
		want:      llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n"}),
		canonical: `{"role":"assistant","tool_calls":[{"id":"c","name":"n","arguments":null}]}`,
	},
	{
		name: "tool result",
		in:   `{"role":"tool","content":"72F sunny","tool_call_id":"call_1"}`,
		want: llm.ToolResult("call_1", "72F sunny"),
	},
	{
		name: "empty tool result",
		in:   `{"role":"tool","content":"","tool_call_id":"call_1"}`,
		want: llm.ToolResult("call_1", ""),
	},
	{
		name:      "empty tool_calls and tool_call_id omitted",
		in:        `{"role":"user","content":"hi","tool_calls":[],"tool_call_id":""}`,
		want:      llm.UserText("hi"),
		canonical: `{"role":"user","content":"hi"}`,
	},
	{
		name: "single text block stays a block",
		in:   `{"role":"user","content":[{"type":"text","text":"hello"}]}`,
		want: llm.UserBlocks(llm.TextBlock("hello")),
	},
	{
		name: "empty block sequence kept",
		in:   `{"role":"user","content":[]}`,
		want: llm.Message{Role: llm.RoleUser, Content: llm.Blocks()},
	},
	{
		name: "mixed order preserved with url, inline and detail",
		in: `{"role":"user","content":[` +
			`{"type":"image","source":{"type":"url","url":"https://example.com/1.png"},"detail":"high"},` +
			`{"type":"text","text":"first"},` +
			`{"type":"image","source":{"type":"inline","base64_data":"ABC123=="},"media_type":"image/jpeg"},` +
			`{"type":"text","text":"second"}]}`,
		want: llm.UserBlocks(
			llm.ImageURL("https://example.com/1.png").WithDetail(llm.DetailHigh),
			llm.TextBlock("first"),
			llm.ImageInline("image/jpeg", "ABC123=="),
			llm.TextBlock("second"),
		),
	},
	{
		name:      "image key order and unknown keys",
		in:        `{"content":[{"detail":"low","media_type":"image/png","source":{"base64_data":"QQ==","type":"inline","extra":1},"type":"image","alt":"x"}],"role":"user","name":"bob"}`,
		want:      llm.UserBlocks(llm.ImageInline("image/png", "QQ==").WithDetail(llm.DetailLow)),
		canonical: `{"role":"user","content":[{"type":"image","source":{"type":"inline","base64_data":"QQ=="},"media_type":"image/png","detail":"low"}]}`,
	},
	{
		name: "image without source kept for validation",
		in:   `{"role":"user","content":[{"type":"image"},{"type":"text","text":"describe"}]}`,
		want: llm.UserBlocks(llm.Block{Type: llm.BlockImage}, llm.TextBlock("describe")),
	},
	{
		name: "image source with both url and data kept for validation",
		in:   `{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u","base64_data":"d"}}]}`,
		want: llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: llm.SourceURL, URL: "u", Base64Data: "d"}}),
	},
	{
		name:      "url source without url gains the key",
		in:        `{"role":"user","content":[{"type":"image","source":{"type":"url"}}]}`,
		want:      llm.UserBlocks(llm.ImageURL("")),
		canonical: `{"role":"user","content":[{"type":"image","source":{"type":"url","url":""}}]}`,
	},
	{
		name: "thinking, redacted thinking and signatures",
		in: `{"role":"assistant","content":[` +
			`{"type":"thinking","text":"Let me reason about this.","signature":"sig-abc"},` +
			`{"type":"redacted_thinking","data":"opaque=="},` +
			`{"type":"text","text":"The answer is 42.","signature":"sig-t"}]}`,
		want: llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(
			llm.ThinkingBlock("Let me reason about this.", "sig-abc"),
			llm.RedactedThinkingBlock("opaque=="),
			llm.Block{Type: llm.BlockText, Text: "The answer is 42.", Signature: "sig-t"},
		)},
	},
	{
		name:      "fields of other block types dropped",
		in:        `{"role":"assistant","content":[{"type":"text","text":"t","data":"x","source":{"type":"url","url":"u"}},{"type":"redacted_thinking","data":"d","text":"t"}]}`,
		want:      llm.Message{Role: llm.RoleAssistant, Content: llm.Blocks(llm.TextBlock("t"), llm.RedactedThinkingBlock("d"))},
		canonical: `{"role":"assistant","content":[{"type":"text","text":"t"},{"type":"redacted_thinking","data":"d"}]}`,
	},
	{
		name: "thinking with tool call signature",
		in:   `{"role":"assistant","content":[{"type":"thinking","text":"Let me check the weather."}],"tool_calls":[{"id":"call_1","name":"get_weather","arguments":{"location":"SF"},"signature":"sig-g1"}]}`,
		want: llm.Message{
			Role:      llm.RoleAssistant,
			Content:   llm.Blocks(llm.ThinkingBlock("Let me check the weather.", "")),
			ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"location":"SF"}`), Signature: "sig-g1"}},
		},
	},
	{
		name:      "arguments compacted, key order and number precision kept",
		in:        "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"name\":\"n\",\"arguments\":{ \"z\" : 12345678901234567890 ,\n \"a\":[1.50, \"x y\"] }}]}",
		want:      llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"z":12345678901234567890,"a":[1.50,"x y"]}`)}),
		canonical: `{"role":"assistant","tool_calls":[{"id":"c","name":"n","arguments":{"z":12345678901234567890,"a":[1.50,"x y"]}}]}`,
	},
	{
		name:      "HTML and line separators escaped as encoding/json does",
		in:        "{\"role\":\"user\",\"content\":\"a<b>&c\u2028\u2029\\u0007\\/\"}",
		want:      llm.UserText("a<b>&c\u2028\u2029\a/"),
		canonical: `{"role":"user","content":"a\u003cb\u003e\u0026c\u2028\u2029\u0007/"}`,
	},
	{
		name:      "escapes inside arguments",
		in:        `{"role":"assistant","tool_calls":[{"id":"c","name":"n","arguments":{"q":"<a> & \" \\ \u2028"}}]}`,
		want:      llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"q":"\u003ca\u003e \u0026 \" \\ \u2028"}`)}),
		canonical: `{"role":"assistant","tool_calls":[{"id":"c","name":"n","arguments":{"q":"\u003ca\u003e \u0026 \" \\ \u2028"}}]}`,
	},
	{
		name:      "invalid UTF-8 replaced",
		in:        "{\"role\":\"user\",\"content\":\"a\xffb\"}",
		want:      llm.UserText("a\ufffdb"),
		canonical: `{"role":"user","content":"a` + "\ufffd" + `b"}`,
	},
	{
		name: "invalid detail and unsupported media type kept for validation",
		in:   `{"role":"user","content":[{"type":"image","source":{"type":"inline","base64_data":"R0lG"},"media_type":"image/tiff","detail":"ultra"}]}`,
		want: llm.UserBlocks(llm.ImageInline("image/tiff", "R0lG").WithDetail("ultra")),
	},
}

func TestMessageJSONRoundTrip(t *testing.T) {
	for _, tc := range roundTripCases {
		t.Run(tc.name, func(t *testing.T) {
			var got llm.Message
			if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decoded message mismatch (-want +got):\n%s", diff)
			}
			canonical := tc.canonical
			if canonical == "" {
				canonical = tc.in
			}
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if diff := cmp.Diff(canonical, string(out)); diff != "" {
				t.Errorf("Marshal(Unmarshal(x)) != canonical(x) (-want +got):\n%s", diff)
			}
			direct, err := got.MarshalJSON()
			if err != nil {
				t.Fatalf("MarshalJSON: %v", err)
			}
			if string(direct) != string(out) {
				t.Errorf("MarshalJSON = %s, json.Marshal = %s", direct, out)
			}
			// The canonical form is a fixed point.
			var again llm.Message
			if err := json.Unmarshal(out, &again); err != nil {
				t.Fatalf("Unmarshal(canonical): %v", err)
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("canonical form decodes differently (-first +second):\n%s", diff)
			}
			out2, err := json.Marshal(again)
			if err != nil {
				t.Fatalf("Marshal(again): %v", err)
			}
			if string(out2) != string(out) {
				t.Errorf("canonical form not stable: %s then %s", out, out2)
			}
		})
	}
}

func TestMessageSliceJSON(t *testing.T) {
	in := `[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a"}]`
	var got []llm.Message
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := []llm.Message{llm.SystemText("s"), llm.UserText("u"), llm.AssistantText("a")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("Marshal = %s, want %s", out, in)
	}
}

func TestUnmarshalRejects(t *testing.T) {
	cases := []struct {
		name  string
		in    string
		field string
	}{
		{"unknown role", `{"role":"bot","content":"x"}`, "role"},
		{"missing role", `{"content":"x"}`, "role"},
		{"role not a string", `{"role":5}`, "role"},
		{"content a number", `{"role":"user","content":5}`, "content"},
		{"content an object", `{"role":"user","content":{"type":"text","text":"x"}}`, "content"},
		{"unknown block type", `{"role":"user","content":[{"type":"text","text":"a"},{"type":"video","url":"x"}]}`, "content[1].type"},
		{"missing block type", `{"role":"user","content":[{"text":"a"}]}`, "content[0].type"},
		{"block not an object", `{"role":"user","content":["a"]}`, "content[0]"},
		{"text not a string", `{"role":"user","content":[{"type":"text","text":1}]}`, "content[0].text"},
		{"unknown source type", `{"role":"user","content":[{"type":"image","source":{"type":"file","url":"x"}}]}`, "content[0].source.type"},
		{"missing source type", `{"role":"user","content":[{"type":"image","source":{"url":"x"}}]}`, "content[0].source.type"},
		{"source not an object", `{"role":"user","content":[{"type":"image","source":"https://x"}]}`, "content[0].source"},
		{"tool_calls not an array", `{"role":"assistant","tool_calls":{}}`, "tool_calls"},
		{"tool call id not a string", `{"role":"assistant","tool_calls":[{"id":1,"name":"n"}]}`, "tool_calls[0].id"},
		{"message not an object", `["user"]`, ""},
		{"malformed", `{"role":"user",`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var m llm.Message
			err := m.UnmarshalJSON([]byte(tc.in))
			if err == nil {
				t.Fatalf("UnmarshalJSON(%s) = nil error, decoded %+v", tc.in, m)
			}
			checkValidationError(t, err, -1, tc.field)
			// Through encoding/json too.
			if err := json.Unmarshal([]byte(tc.in), &m); err == nil {
				t.Fatalf("json.Unmarshal(%s) = nil error", tc.in)
			}
		})
	}
}

func TestMarshalRejects(t *testing.T) {
	cases := []struct {
		name  string
		msg   llm.Message
		field string
	}{
		{"unknown role", llm.Message{Role: "bot", Content: llm.Text("x")}, "role"},
		{"zero message", llm.Message{}, "role"},
		{"unknown block type", llm.UserBlocks(llm.TextBlock("a"), llm.Block{Type: "video"}), "content[1].type"},
		{"unknown source type", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{Type: "file", URL: "x"}}), "content[0].source.type"},
		{"source without type", llm.UserBlocks(llm.Block{Type: llm.BlockImage, Source: llm.ImageSource{URL: "x"}}), "content[0].source.type"},
		{"arguments not JSON", llm.AssistantToolCalls(llm.ToolCall{ID: "c", Name: "n", Arguments: json.RawMessage(`{"a":`)}), "tool_calls[0].arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.msg.MarshalJSON()
			if err == nil {
				t.Fatal("MarshalJSON succeeded")
			}
			checkValidationError(t, err, -1, tc.field)
			if _, err := json.Marshal(tc.msg); !errors.Is(err, llm.ErrInvalidMessage) {
				t.Errorf("json.Marshal error %v does not match ErrInvalidMessage", err)
			}
		})
	}
}

func TestToolJSON(t *testing.T) {
	in := `{"name":"get_weather","description":"Get <current> weather.","parameters":{ "type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	var got llm.Tool
	if err := json.Unmarshal([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	want := llm.Tool{
		Name:        "get_weather",
		Description: "Get <current> weather.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	out, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	const canonical = `{"name":"get_weather","description":"Get \u003ccurrent\u003e weather.","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}`
	if string(out) != canonical {
		t.Errorf("Marshal = %s\nwant      %s", out, canonical)
	}
	if _, err := json.Marshal(llm.Tool{Name: "x", Parameters: json.RawMessage("{")}); !errors.Is(err, errcat.ProviderInvalidRequest) {
		t.Errorf("Marshal of invalid parameters: %v", err)
	}
	var bad llm.Tool
	if err := json.Unmarshal([]byte(`{"name":1}`), &bad); !errors.Is(err, llm.ErrInvalidMessage) {
		t.Errorf("Unmarshal of a numeric name: %v", err)
	}
}

func TestContentAndBlockJSON(t *testing.T) {
	cases := []struct {
		name string
		c    llm.Content
		want string
	}{
		{"absent", llm.Content{}, `null`},
		{"text", llm.Text("hi"), `"hi"`},
		{"blocks", llm.Blocks(llm.TextBlock("a"), llm.ImageURL("u")), `[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"u"}}]`},
		{"empty blocks", llm.Blocks(), `[]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, err := json.Marshal(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tc.want {
				t.Errorf("Marshal = %s, want %s", out, tc.want)
			}
			var back llm.Content
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.c, back); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	var b llm.Block
	if err := json.Unmarshal([]byte(`{"type":"thinking","text":"t","signature":"s"}`), &b); err != nil {
		t.Fatal(err)
	}
	if want := llm.ThinkingBlock("t", "s"); b != want {
		t.Errorf("block = %+v, want %+v", b, want)
	}
	if err := json.Unmarshal([]byte(`{"type":"audio"}`), &b); !errors.Is(err, llm.ErrInvalidMessage) {
		t.Errorf("Unmarshal of an audio block: %v", err)
	}
}

// checkValidationError asserts err is a *llm.ValidationError with the
// given index and field, matching both the sentinel and the category.
func checkValidationError(t *testing.T, err error, index int, field string) {
	t.Helper()
	var ve *llm.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *llm.ValidationError", err, err)
	}
	if ve.Index != index || ve.Field != field {
		t.Errorf("error %q: Index, Field = %d, %q; want %d, %q", err, ve.Index, ve.Field, index, field)
	}
	if !errors.Is(err, llm.ErrInvalidMessage) {
		t.Errorf("error %q does not match llm.ErrInvalidMessage", err)
	}
	if !errors.Is(err, errcat.ProviderInvalidRequest) || errcat.Of(err) != errcat.ProviderInvalidRequest {
		t.Errorf("error %q is not in category provider_invalid_request", err)
	}
}

// TestStringDecodingMatchesEncodingJSON checks the decoder's string
// unquoting against encoding/json on escapes, surrogates and invalid UTF-8.
func TestStringDecodingMatchesEncodingJSON(t *testing.T) {
	for _, lit := range []string{
		`"plain"`, `""`, `"\"\\\/\b\f\n\r\t"`, `"\u0000\u001f\u007f"`, `"\u00e9\u4e2d"`,
		`"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`,
		`"\uD83D\uDE00"`, "\"\xff\"", "\"a\xc3\"", "\"\xed\xa0\x80\"", "\"caf\u00e9 \u2028\"", `"\u2028\u2029"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("encoding/json rejects %s: %v", lit, err)
		}
		var m llm.Message
		if err := json.Unmarshal([]byte(`{"role":"user","content":`+lit+`,"tool_call_id":`+lit+`}`), &m); err != nil {
			t.Fatalf("decoding %s: %v", lit, err)
		}
		if got := m.Content.Text(); got != want || m.ToolCallID != want {
			t.Errorf("decoding %s = %q, %q; want %q", lit, got, m.ToolCallID, want)
		}
	}
}

func TestUnmarshalNullAndRepeatedKeys(t *testing.T) {
	m := llm.UserText("kept")
	if err := json.Unmarshal([]byte(`null`), &m); err != nil {
		t.Fatal(err)
	}
	if m.Text() != "kept" {
		t.Errorf("null overwrote the message: %+v", m)
	}
	for _, in := range []string{
		`{"role":"user","content":"a","content":"b"}`,
		`{"role":"user","content":[{"type":"text","text":"a","text":"b"}]}`,
		`{"role":"assistant","tool_calls":[{"id":"a","name":"n","arguments":{},"arguments":{}}]}`,
	} {
		if err := json.Unmarshal([]byte(in), &m); !errors.Is(err, llm.ErrInvalidMessage) {
			t.Errorf("Unmarshal(%s) = %v, want a repeated-key error", in, err)
		}
	}
	// Unknown keys may repeat; they are ignored.
	if err := json.Unmarshal([]byte(`{"role":"user","x":1,"x":2,"content":"c"}`), &m); err != nil {
		t.Errorf("repeated unknown key: %v", err)
	}
}

// AppendMessagesJSON writes json.Marshal's bytes for a []Message, and
// fails as it does, leaving dst as it was.
func TestAppendMessagesJSON(t *testing.T) {
	for _, ms := range [][]llm.Message{nil, {}, {llm.UserText("a <b>")}, {llm.UserText("q"), llm.AssistantText("\u2028"), llm.ToolResult("c1", "42")}} {
		want, err := json.Marshal(ms)
		if err != nil {
			t.Fatal(err)
		}
		got, err := llm.AppendMessagesJSON([]byte("x"), ms)
		if err != nil || string(got) != "x"+string(want) {
			t.Errorf("llm.AppendMessagesJSON(%v) = %s, %v; want x%s", ms, got, err, want)
		}
	}
	dst := []byte("x")
	if got, err := llm.AppendMessagesJSON(dst, []llm.Message{llm.UserText("ok"), {Role: "nobody"}}); err == nil || string(got) != "x" {
		t.Errorf("an invalid message: %s, %v", got, err)
	}
}
