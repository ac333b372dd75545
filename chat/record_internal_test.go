package chat

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// FuzzAppendRecord: the hand-written encoding of an outcome record, in
// either form, is valid JSON that parseRecord decodes to the record
// (invalid UTF-8 replaced).
func FuzzAppendRecord(f *testing.F) {
	f.Add("inv-1", "3.2", "run:abc", true, 0, 2, uint64(1))
	f.Add("inv-2", string(harness.PathExistingSession), "", false, 12, 2, uint64(1<<63))
	f.Add("inv-3", string(harness.PathNewSession), "run:x", false, 0, 4, uint64(7))
	f.Add("a\"b\\c\x00\x1f", "", "k\xff\xfeé\u2028", false, 5, 0, uint64(1<<63+7))
	f.Add("", "3.3", "", true, 1<<30, 1, ^uint64(0))
	f.Fuzz(func(t *testing.T, inv, path, key string, resumed bool, from, n int, sum uint64) {
		rec := outcomeRecord{Kind: "completed", InvocationID: inv, Path: harness.Path(path), Resumed: resumed, RecordKey: key,
			RepliesAt: &repliesRef{From: from, N: n, Sum: sum}}
		if n%2 == 1 {
			rec.Kind, rec.Descriptor = "suspended", &graph.SignalDescriptor{SignalID: key, Metadata: map[string]any{"tool": inv}}
		}
		if resumed && from%2 == 0 {
			rec.Signal = &signalRef{ID: inv + key, Sum: sum}
		}
		raw, err := appendRecord(nil, &rec)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(raw) {
			t.Fatalf("invalid JSON %q", raw)
		}
		got, err := parseRecord(raw)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		valid := func(s string) string { // each invalid byte becomes U+FFFD, as encoding/json does
			var b strings.Builder
			for i := 0; i < len(s); {
				r, size := utf8.DecodeRuneInString(s[i:])
				if r == utf8.RuneError && size == 1 {
					b.WriteRune(utf8.RuneError)
				} else {
					b.WriteString(s[i : i+size])
				}
				i += size
			}
			return b.String()
		}
		if got.Kind != rec.Kind || got.InvocationID != valid(inv) || string(got.Path) != valid(path) || got.Resumed != resumed ||
			got.RecordKey != valid(key) || *got.RepliesAt != *rec.RepliesAt {
			t.Fatalf("decoded %+v, encoded %+v", got, rec)
		}
		if (got.Signal == nil) != (rec.Signal == nil) || rec.Signal != nil && (got.Signal.Sum != sum || got.Signal.ID != valid(inv+key)) {
			t.Fatalf("signal %+v, encoded %+v", got.Signal, rec.Signal)
		}
		if utf8.ValidString(key) && rec.Descriptor != nil && got.Descriptor.SignalID != key {
			t.Fatalf("descriptor %+v", got.Descriptor)
		}
	})
}

// Records written before replies were located in the history still
// decode, with their copied replies; a record whose replies the history
// no longer holds decodes without them, reported as moved.
func TestDecodeRecord(t *testing.T) {
	hist := []llm.Message{llm.UserText("hi"), llm.AssistantText("hello"), llm.UserText("again"), llm.AssistantText("re")}
	history := func(int) ([]llm.Message, int, error) { return hist, 0, nil }
	for _, tc := range []struct {
		name    string
		raw     string
		replies []string
		moved   bool
	}{
		{"legacy copy", `{"kind":"completed","invocation_id":"i","replies":[{"role":"assistant","content":"old"}]}`, []string{"old"}, false},
		{"located", `{"kind":"completed","invocation_id":"i","replies_at":{"from":3,"n":1,"sum":` + sumOf(hist[3:]) + `}}`, []string{"re"}, false},
		{"located, two", `{"kind":"completed","invocation_id":"i","replies_at":{"from":0,"n":2,"sum":` + sumOf(hist[:2]) + `}}`, []string{"hi", "hello"}, false},
		{"rewritten", `{"kind":"completed","invocation_id":"i","replies_at":{"from":3,"n":1,"sum":1}}`, nil, true},
		{"out of range", `{"kind":"completed","invocation_id":"i","replies_at":{"from":3,"n":9,"sum":1}}`, nil, true},
		{"no replies", `{"kind":"completed","invocation_id":"i","replies_at":{"from":4,"n":0,"sum":0}}`, nil, false},
		{"compact", `[1,"i",1,3,1,` + sumOf(hist[3:]) + `]`, []string{"re"}, false},
		{"compact with record key", ` [1,"i",0,0,2,` + sumOf(hist[:2]) + `,"run:1"]`, []string{"hi", "hello"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, err := parseRecord([]byte(tc.raw))
			if err != nil {
				t.Fatal(err)
			}
			o, moved, err := rec.decode("s", history)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range o.(*Completed).Replies {
				got = append(got, m.Text())
			}
			if strings.Join(got, "|") != strings.Join(tc.replies, "|") || moved != tc.moved || !o.Info().Replayed {
				t.Errorf("replies %q moved %v, want %q %v", got, moved, tc.replies, tc.moved)
			}
		})
	}
}

// A record's index is absolute: decoded against a tail of the history
// (graph.SessionConfig.Tail), it is shifted by the tail's offset.
func TestDecodeRecordTail(t *testing.T) {
	hist := []llm.Message{llm.UserText("hi"), llm.AssistantText("hello"), llm.UserText("again"), llm.AssistantText("re")}
	for off := 0; off <= 3; off++ {
		history := func(from int) ([]llm.Message, int, error) {
			if from < off {
				return hist, 0, nil // the whole read a caller falls back to
			}
			return hist[off:], off, nil
		}
		for from := range 4 {
			raw := fmt.Sprintf(`{"kind":"completed","invocation_id":"i","replies_at":{"from":%d,"n":1,"sum":%s}}`, from, sumOf(hist[from:from+1]))
			rec, err := parseRecord([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			o, moved, err := rec.decode("s", history)
			if err != nil || moved {
				t.Fatalf("offset %d from %d: moved %v, %v", off, from, moved, err)
			}
			if r := o.(*Completed).Replies; len(r) != 1 || r[0].Text() != hist[from].Text() {
				t.Errorf("offset %d from %d: replies %v, want %q", off, from, r, hist[from].Text())
			}
		}
	}
}

func sumOf(msgs []llm.Message) string {
	raw, _ := json.Marshal(digestReplies(msgs))
	return string(raw)
}

// FuzzParseRecord: any stored value parses to a record or an error,
// never a panic; a compact record round-trips through appendRecord.
func FuzzParseRecord(f *testing.F) {
	f.Add(`[1,"i",1,3,1,99]`)
	f.Add(`[1,"i",2,0,0,0,"k"]`)
	f.Add(`[2,"i",9,0,0,0]`)
	f.Add(`[1,"i",1,3,1]`)
	f.Add(`{"kind":"suspended","invocation_id":"i"}`)
	f.Add(`[1,"i",1,-1,1,18446744073709551615]`)
	f.Fuzz(func(t *testing.T, raw string) {
		rec, err := parseRecord([]byte(raw))
		if err != nil || !strings.HasPrefix(strings.TrimSpace(raw), "[") {
			return
		}
		again, err := appendRecord(nil, rec)
		if err != nil {
			t.Fatal(err)
		}
		back, err := parseRecord(again)
		if err != nil || back.InvocationID != rec.InvocationID || back.Path != rec.Path || *back.RepliesAt != *rec.RepliesAt || back.RecordKey != rec.RecordKey {
			t.Fatalf("%s -> %s -> %+v, %v", raw, again, back, err)
		}
	})
}
