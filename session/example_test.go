package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/armature-go/armature/session"
)

func Example() {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})

	// First turn: create the record.
	w, _ := store.Save(ctx, session.SaveRequest{
		SessionID: "user-42", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`["hi"]`)},
	})

	// Next turn: append only what changed, conditional on the version
	// we know.
	w, err := store.Append(ctx, session.AppendRequest{
		SessionID: "user-42", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"hello!"`)}},
	})
	fmt.Println(w.Version, err)

	// A writer holding an old version loses, visibly.
	_, err = store.Append(ctx, session.AppendRequest{
		SessionID: "user-42", ExpectedVersion: 1,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"stale"`)}},
	})
	fmt.Println(errors.Is(err, session.ErrWriteConflict))

	rec, _ := store.Load(ctx, session.LoadRequest{SessionID: "user-42"})
	fmt.Println(string(rec.State["messages"]))
	// Output:
	// 2 <nil>
	// true
	// ["hi","hello!"]
}

// A long list read backwards a page at a time: the newest page, then
// each one before the page it has.
func ExampleMemoryStore_LoadPage() {
	ctx := context.Background()
	store := session.NewMemoryStore(session.MemoryConfig{})
	_, _ = store.Save(ctx, session.SaveRequest{SessionID: "user-42", State: map[string]json.RawMessage{
		"messages": json.RawMessage(`["a","b","c","d","e"]`),
	}})
	for before := -1; ; {
		page, err := store.LoadPage(ctx, session.PageRequest{SessionID: "user-42", Field: "messages", Before: before, Max: 2})
		if err != nil {
			panic(err)
		}
		fmt.Printf("%d of %d: %s\n", page.Offset, page.Length, page.Items)
		if page.Offset == 0 {
			break
		}
		before = page.Offset
	}
	// Output:
	// 3 of 5: ["d" "e"]
	// 1 of 5: ["b" "c"]
	// 0 of 5: ["a"]
}
