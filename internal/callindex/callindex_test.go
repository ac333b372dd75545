package callindex_test

import (
	"strconv"
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
