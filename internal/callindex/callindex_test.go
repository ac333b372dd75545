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
