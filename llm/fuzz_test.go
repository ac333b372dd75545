package llm_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// fuzzSeeds are message documents covering every field, block type and
// source variant, plus escapes, repeated keys and wrong kinds.
var fuzzSeeds = []string{
	`{"role":"user","content":"hello"}`,
	`{"role":"system","content":"be terse"}`,
	`{"role":"tool","content":"{\"temp\":68}","tool_call_id":"call_1"}`,
	`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","name":"get_weather","arguments":{"city": "Boston","n":[1,2.5e3,true,null]},"signature":"sig"}]}`,
	`{"role":"assistant","tool_calls":[{"id":"c","name":"n","arguments":null},{"id":"d","name":"m","arguments":"{\"a\":"}]}`,
	`{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/x.png"},"detail":"high"},{"type":"text","text":"describe"}]}`,
	`{"role":"user","content":[{"type":"image","media_type":"image/jpeg","source":{"type":"inline","base64_data":"ABC123=="}}]}`,
	`{"role":"user","content":[{"type":"image"},{"type":"image","source":null},{"type":"image","source":{"type":"url","url":"u","base64_data":"d"}}]}`,
	`{"role":"assistant","content":[{"type":"thinking","text":"hmm","signature":"s"},{"type":"redacted_thinking","data":"x"},{"type":"text","text":"42","signature":"t"}]}`,
	`{"role":"user","content":[]}`,
	`{"role":"user","content":""}`,
	`{"role":"user","content":"a<b>&c\u2028\ud83d\ude00\ud800x\\\"\/\b\f\n\r\t","extra":{"nested":[1,{"a":"b"}]}}`,
	"{\"role\":\"user\",\"content\":\"\xff\xfe\"}",
	`{"r\u006fle":"user","content":"escaped key"}`,
	`{"role":"user","role":"user","content":"x"}`,
	`{"role":"bot"}`,
	`{"role":"user","content":5}`,
	`{"role":"user","content":[{"type":"video"}]}`,
	`{"role":"user","content":[{"type":"image","source":{"type":"file"}}]}`,
	`{"role":"assistant","tool_calls":[null]}`,
	`{"ROLE":"user"}`,
	`null`,
	`[]`,
	` { "role" : "user" , "content" : [ { "type" : "text" , "text" : "spaced" } ] } `,
}

// FuzzMessageJSON decodes arbitrary bytes as a message and checks that
// decoding never panics, agrees with the reference decoder in
// oracle_test.go, fails only with categorized, prefixed errors, and that
// whatever decodes re-encodes to a stable canonical form that
// json.Marshal reproduces.
func FuzzMessageJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range roundTripCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m llm.Message
		err := m.UnmarshalJSON(data)
		want, werr := oracleMessage(data)
		if (err == nil) != (werr == nil) {
			t.Fatalf("UnmarshalJSON(%q) error = %v, reference decoder error = %v", data, err, werr)
		}
		if err != nil {
			checkFuzzError(t, err)
			var ve *llm.ValidationError
			if errors.As(err, &ve); ve.Field != werr.field {
				t.Fatalf("UnmarshalJSON(%q) error field %q, reference decoder %q (%v)", data, ve.Field, werr.field, err)
			}
			return
		}
		if diff := cmp.Diff(want, m); diff != "" {
			t.Fatalf("UnmarshalJSON(%q) differs from the reference decoder (-ref +got):\n%s", data, diff)
		}
		if verr := m.Validate(); verr != nil {
			checkFuzzError(t, verr)
		}
		_ = m.Text()
		if m.Role == "" {
			return // JSON null: nothing decoded
		}

		out, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("Marshal of decoded %q: %v", data, err)
		}
		direct, err := m.MarshalJSON()
		if err != nil || string(direct) != string(out) {
			t.Fatalf("MarshalJSON = %s, %v; json.Marshal = %s", direct, err, out)
		}
		if app, err := m.AppendJSON([]byte("prefix,")); err != nil || string(app) != "prefix,"+string(out) {
			t.Fatalf("AppendJSON(prefix) = %s, %v; want prefix,%s", app, err, out)
		}
		var again llm.Message
		if err := json.Unmarshal(out, &again); err != nil {
			t.Fatalf("Unmarshal(Marshal(Unmarshal(%q))) = %v; canonical %s", data, err, out)
		}
		if diff := cmp.Diff(m, again); diff != "" {
			t.Fatalf("canonical %s decodes differently (-first +second):\n%s", out, diff)
		}
		out2, err := json.Marshal(again)
		if err != nil || string(out2) != string(out) {
			t.Fatalf("canonical form not stable: %s then %s (%v)", out, out2, err)
		}
		if (m.Validate() == nil) != (again.Validate() == nil) {
			t.Fatalf("validity changed across a round trip of %s", out)
		}
	})
}

// FuzzValidate builds messages field by field, reaching states JSON cannot
// express (an image source without a type, stray fields, odd arguments),
// and checks that validation never panics, fails only with categorized,
// prefixed errors naming a field, agrees between Message.Validate and
// ValidateMessages, and that a valid message encodes and decodes back to
// an equal, still valid message.
func FuzzValidate(f *testing.F) {
	f.Add("user", uint8(1), "hello", "text", "t", "", "", "", "", "", []byte(nil), "", "")
	f.Add("user", uint8(2), "describe", "image", "", "url", "https://x/y.png", "", "", "high", []byte(nil), "", "")
	f.Add("user", uint8(2), "d", "image", "", "inline", "", "QUJD", "image/png", "", []byte(nil), "", "")
	f.Add("user", uint8(2), "", "image", "", "", "u", "", "", "", []byte(nil), "", "")
	f.Add("user", uint8(3), "", "text", "", "", "", "", "", "ultra", []byte(nil), "", "")
	f.Add("assistant", uint8(0), "", "", "", "", "", "", "", "", []byte(`{"city":"SF"}`), "call_1", "get_weather")
	f.Add("assistant", uint8(2), "answer", "thinking", "hmm", "", "", "sig", "", "", []byte(`null`), "c", "n")
	f.Add("assistant", uint8(2), "x", "redacted_thinking", "", "", "", "blob", "", "", []byte(`[1]`), "c", "n")
	f.Add("tool", uint8(1), "72F", "", "", "", "", "", "", "", []byte(nil), "call_1", "")
	f.Add("system", uint8(2), "s", "text", "s", "", "", "", "", "", []byte(nil), "", "")
	f.Add("", uint8(0), "", "", "", "", "", "", "", "", []byte(`{`), "", "")
	f.Fuzz(func(t *testing.T, role string, kind uint8, text, blockType, blockText, srcType, url, data, mediaType, detail string, args []byte, id, name string) {
		b := llm.Block{
			Type: llm.BlockType(blockType), Text: blockText, Signature: data,
			Source:    llm.ImageSource{Type: llm.SourceType(srcType), URL: url, Base64Data: data},
			MediaType: mediaType, Detail: llm.Detail(detail), Data: data,
		}
		m := llm.Message{Role: llm.Role(role)}
		switch kind % 4 {
		case 1:
			m.Content = llm.Text(text)
		case 2:
			m.Content = llm.Blocks(b, llm.TextBlock(text))
		case 3:
			m.Content = llm.Blocks()
		}
		if args != nil || name != "" {
			m.ToolCalls = []llm.ToolCall{{ID: id, Name: name, Arguments: args, Signature: data}}
		}
		if kind&4 != 0 {
			m.ToolCallID = id
		}

		checkEncodingMatchesEncodingJSON(t, text, args)

		err := m.Validate()
		if err != nil {
			checkFuzzError(t, err)
			var ve *llm.ValidationError
			if errors.As(err, &ve); ve.Field == "" || ve.Index != -1 {
				t.Fatalf("Validate error %v: Index %d, Field %q", err, ve.Index, ve.Field)
			}
		}
		// In the middle of a list, a message-level failure is reported at
		// its index with the same field under messages[1].
		lerr := llm.ValidateMessages([]llm.Message{llm.UserText("q"), m, llm.UserText("r")}, nil)
		if err != nil {
			var ve, lve *llm.ValidationError
			errors.As(err, &ve)
			if !errors.As(lerr, &lve) || lve.Index != 1 || lve.Field != "messages[1]."+ve.Field {
				t.Fatalf("Validate = %v but ValidateMessages = %v", err, lerr)
			}
			return
		}
		if lerr != nil {
			checkFuzzError(t, lerr)
		}
		_ = m.Text()

		out, merr := json.Marshal(m)
		if merr != nil {
			t.Fatalf("valid message %+v does not encode: %v", m, merr)
		}
		var back llm.Message
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("encoded valid message %s does not decode: %v", out, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("decoded %s is invalid: %v", out, err)
		}
		// The first encoding replaces invalid UTF-8 with the \ufffd escape,
		// which decodes to U+FFFD; from the decoded value on, the encoding
		// is a fixed point.
		out2, err := json.Marshal(back)
		if err != nil {
			t.Fatal(err)
		}
		var back2 llm.Message
		if err := json.Unmarshal(out2, &back2); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(back, back2); diff != "" {
			t.Fatalf("canonical %s decodes differently (-first +second):\n%s", out2, diff)
		}
		if out3, err := json.Marshal(back2); err != nil || string(out3) != string(out2) {
			t.Fatalf("re-encoding differs: %s then %s (%v)", out2, out3, err)
		}
		if !bytes.Contains(out, []byte(`\ufffd`)) && string(out2) != string(out) {
			t.Fatalf("re-encoding of valid UTF-8 differs: %s then %s", out, out2)
		}
	})
}

// checkEncodingMatchesEncodingJSON checks the package's string and raw
// JSON encoders against encoding/json's.
func checkEncodingMatchesEncodingJSON(t *testing.T, text string, args []byte) {
	t.Helper()
	want, _ := json.Marshal(text)
	got, err := llm.UserText(text).MarshalJSON()
	if err != nil || string(got) != `{"role":"user","content":`+string(want)+`}` {
		t.Fatalf("encoding %q: %s, %v; encoding/json: %s", text, got, err, want)
	}
	if len(args) == 0 {
		return // encoded as null (encoding/json rejects an empty, non-nil RawMessage)
	}
	call := llm.ToolCall{ID: "c", Name: "n", Arguments: args}
	got, err = call.MarshalJSON()
	wantArgs, wantErr := json.Marshal(json.RawMessage(args))
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("encoding arguments %q: %v; encoding/json: %v", args, err, wantErr)
	}
	if err == nil && string(got) != `{"id":"c","name":"n","arguments":`+string(wantArgs)+`}` {
		t.Fatalf("encoding arguments %q: %s; encoding/json: %s", args, got, wantArgs)
	}
}

func checkFuzzError(t *testing.T, err error) {
	t.Helper()
	var ve *llm.ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *llm.ValidationError", err, err)
	}
	if !strings.HasPrefix(ve.Error(), "llm: ") || ve.Reason == "" {
		t.Fatalf("error %q lacks the prefix or a reason", ve)
	}
	if !errors.Is(err, llm.ErrInvalidMessage) || !errors.Is(err, errcat.ProviderInvalidRequest) {
		t.Fatalf("error %q does not match ErrInvalidMessage and provider_invalid_request", err)
	}
}
