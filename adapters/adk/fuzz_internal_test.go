package adk

import (
	"encoding/json"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
)

// FuzzCommitted: any stored cursor is read without a panic; only this
// adapter's own cursor makes the position known, and it reads back the
// position written.
func FuzzCommitted(f *testing.F) {
	f.Add([]byte(`{"adk_position":1795896254000000}`))
	f.Add([]byte(`{"adk_position":null}`))
	f.Add([]byte(`{"offset":3}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		req := &adapter.Request{History: []llm.Message{llm.UserText("hi")}, Cursor: raw}
		at, known, _ := committed(req)
		var c struct {
			Position *int64 `json:"adk_position"`
		}
		if known != (json.Unmarshal(raw, &c) == nil && c.Position != nil) || (known && at != *c.Position) {
			t.Fatalf("cursor %q: %d, %v", raw, at, known)
		}
		if known {
			for _, u := range []string{"", "00ff", userSum(llm.UserText("hi"))} {
				back, ok, user := committed(&adapter.Request{Cursor: cursor{Position: at, User: u}.json()})
				if !ok || back != at || user != u {
					t.Fatalf("position %d, user %q written and read back as %d, %v, %q", at, u, back, ok, user)
				}
			}
		}
	})
}

// FuzzSeedContents: any history the runtime holds converts into at most
// one ADK-Go content per message, without a panic, each with an author.
func FuzzSeedContents(f *testing.F) {
	f.Add([]byte(`[{"role":"user","content":"where is order 3?"},{"role":"assistant","tool_calls":[{"id":"c1","name":"lookup_order","arguments":{"order":"3"}}]},{"role":"tool","tool_call_id":"c1","content":"shipped"},{"role":"assistant","content":"It shipped."}]`))
	f.Add([]byte(`[{"role":"system","content":"x"},{"role":"tool","tool_call_id":"nope","content":""}]`))
	e := &Engine{agent: "assistant"}
	f.Fuzz(func(t *testing.T, raw []byte) {
		history, err := llm.DecodeMessages(raw)
		if err != nil {
			return
		}
		contents, authors, err := e.seedContents(history)
		if err != nil {
			return
		}
		if len(contents) != len(authors) || len(contents) > len(history) {
			t.Fatalf("%d contents, %d authors from %d messages", len(contents), len(authors), len(history))
		}
		for i, c := range contents {
			if c == nil || len(c.Parts) == 0 || authors[i] == "" {
				t.Fatalf("content %d: %+v by %q", i, c, authors[i])
			}
		}
	})
}
