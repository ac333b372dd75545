package callindex_test

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/armature-go/armature/internal/callindex"
	"github.com/armature-go/armature/llm"
)

func call(id string) llm.Message {
	return llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "t", Arguments: []byte(`{}`)})
}

// TestCache: a key's index persists between uses and follows its
// history; the cache keeps at most Max keys; concurrent uses are safe.
func TestCache(t *testing.T) {
	c := callindex.Cache{Max: 2}
	h := append(make([]llm.Message, 0, 16), llm.UserText("q"), call("a"))
	c.With("s", func(x *llm.CallIndex) { x.Sync(h) })
	c.With("s", func(x *llm.CallIndex) {
		if !x.HasCall("a") {
			t.Error("the index of s was lost between uses")
		}
	})
	for i := range 5 {
		c.With("k"+strconv.Itoa(i), func(x *llm.CallIndex) { x.Sync(h) })
	}
	c.With("s", func(x *llm.CallIndex) {
		if x.HasCall("a") {
			t.Error("the cache kept more than Max indexes")
		}
	})
	c.Forget("s")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 200 {
				c.With("k"+strconv.Itoa((i+j)%3), func(x *llm.CallIndex) { x.Sync(h) })
			}
		})
	}
	wg.Wait()
}

// TestOpen: the calls of the last exchange without a result, in call
// order, across its tool-call groups; none before the last user message.
func TestOpen(t *testing.T) {
	tc := func(id string) llm.ToolCall { return llm.ToolCall{ID: id, Name: "f"} }
	history := []llm.Message{
		llm.UserText("a"), llm.AssistantToolCalls(tc("old")),
		llm.UserText("b"), llm.AssistantToolCalls(tc("c1"), tc("c2")), llm.ToolResult("c1", "ok"),
		llm.AssistantText("an aside"), llm.AssistantToolCalls(tc("c3")),
	}
	var got []string
	for _, c := range callindex.Open(history) {
		got = append(got, c.ID)
	}
	if strings.Join(got, ",") != "c2,c3" {
		t.Fatalf("open calls %v, want c2,c3", got)
	}
	if open := callindex.Open(append(history, llm.UserText("c"))); len(open) != 0 {
		t.Fatalf("after a user message: %v", open)
	}
}

// An id longer than callindex.MaxIDBytes is replaced by a short one, the same for
// the same id, by Unique and Fresh alike; a repeated long id still gets
// a suffix, and the result stays within callindex.MaxIDBytes and the characters a
// provider accepts.
func TestLongIDsAreShortened(t *testing.T) {
	long := "call_" + strings.Repeat("L", 300)
	other := "call_" + strings.Repeat("M", 300)
	exact := strings.Repeat("x", callindex.MaxIDBytes)
	calls := []llm.ToolCall{{ID: long, Name: "a"}, {ID: long, Name: "b"}, {ID: other, Name: "c"}, {ID: exact, Name: "d"}, {ID: "call_1", Name: "e"}}
	none := func(string) bool { return false }
	for name, got := range map[string][]llm.ToolCall{
		"Unique": callindex.Unique(nil, 0, calls, nil),
		"Fresh":  callindex.Fresh(calls, 7, none),
	} {
		t.Run(name, func(t *testing.T) {
			if got[0].ID != callindex.Short(long) || got[2].ID != callindex.Short(other) || got[0].ID == got[2].ID {
				t.Fatalf("long ids became %q and %q", got[0].ID, got[2].ID)
			}
			if got[1].ID == got[0].ID || !strings.HasPrefix(got[1].ID, callindex.Short(long)+"_") {
				t.Fatalf("the repeated long id became %q (first %q)", got[1].ID, got[0].ID)
			}
			if got[3].ID != exact || got[4].ID != "call_1" {
				t.Fatalf("ids within the bound changed: %q, %q", got[3].ID, got[4].ID)
			}
			for _, tc := range got {
				if len(tc.ID) > callindex.MaxIDBytes || strings.Trim(tc.ID, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
					t.Fatalf("id %q (%d bytes)", tc.ID, len(tc.ID))
				}
			}
			if calls[0].ID != long {
				t.Fatal("the caller's calls were changed")
			}
		})
	}
	// A history that already holds the short form: the new call gets a
	// suffix, as any repeated id does.
	history := []llm.Message{llm.AssistantToolCalls(llm.ToolCall{ID: callindex.Short(long), Name: "a"}), llm.ToolResult(callindex.Short(long), "ok")}
	if got := callindex.Unique(history, 0, calls[:1], nil); got[0].ID == callindex.Short(long) || !strings.HasPrefix(got[0].ID, callindex.Short(long)+"_") {
		t.Fatalf("a long id whose short form the history holds became %q", got[0].ID)
	}
}

// An id with a byte that is not printable ASCII (NUL, a space, a
// bidirectional override, any non-ASCII) is replaced as a long one is;
// printable ids of every provider's form are kept.
func TestUnprintableIDsAreReplaced(t *testing.T) {
	for _, id := range []string{"a b", "call\x00", "x\u202eevil", "call_\u00e9", "\t", "call\n1"} {
		got := callindex.Fresh([]llm.ToolCall{{ID: id, Name: "a"}}, 3, func(string) bool { return false })
		if got[0].ID == id || !strings.HasPrefix(got[0].ID, "call_h") || got[0].ID != callindex.Short(id) {
			t.Errorf("%q became %q", id, got[0].ID)
		}
	}
	for _, id := range []string{"call_abc123", "toolu_01A09q90qw90lq917835lq9", "chatcmpl-tool-9f2e", "adk-5c1e.2:x", "a"} {
		if got := callindex.Short(id); got != id {
			t.Errorf("%q became %q", id, got)
		}
	}
}
