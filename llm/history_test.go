package llm_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// historyCall is an assistant message calling get_weather once per id.
func historyCall(ids ...string) llm.Message {
	calls := make([]llm.ToolCall, len(ids))
	for i, id := range ids {
		calls[i] = llm.ToolCall{ID: id, Name: "get_weather", Arguments: weatherArgs}
	}
	return llm.AssistantToolCalls(calls...)
}

func TestCheckHistory(t *testing.T) {
	approval := llm.AssistantText("I need your approval to call send_email with {\"to\":\"bob\"}.")
	// stored: indexes 0-5; call_1 answered, call_2 open (awaiting approval).
	stored := []llm.Message{
		llm.SystemText("be terse"),
		llm.UserText("weather?"),
		historyCall("call_1"),
		llm.ToolResult("call_1", "72F"),
		historyCall("call_2"),
		approval,
	}
	cases := []struct {
		name    string
		history []llm.Message
		added   []llm.Message
		field   string // "" when valid
		reason  string // a substring of the reason
		index   int
	}{
		// Valid appends.
		{name: "nothing added", history: stored},
		{name: "empty history and nothing added"},
		{name: "first turn", added: []llm.Message{llm.UserText("hi"), llm.AssistantText("hello")}},
		{name: "text turn", history: stored[:4], added: []llm.Message{llm.AssistantText("72F"), llm.UserText("thanks")}},
		{name: "tool loop in added", history: stored[:4], added: []llm.Message{
			llm.UserText("and Paris?"), historyCall("call_3", "call_4"),
			llm.ToolResult("call_4", "60F"), llm.ToolResult("call_3", "65F"), llm.AssistantText("done"),
		}},
		{name: "result for a call in history", history: stored, added: []llm.Message{llm.ToolResult("call_2", "sent"), llm.AssistantText("sent")}},
		{name: "approval-request pattern", added: []llm.Message{
			llm.UserText("email bob"), historyCall("call_1"), approval, llm.ToolResult("call_1", "sent"),
		}},
		{name: "approval pattern across the save", history: []llm.Message{llm.UserText("email bob"), historyCall("call_1"), approval},
			added: []llm.Message{llm.ToolResult("call_1", "sent")}},
		{name: "call with content", history: stored[:4], added: []llm.Message{{Role: llm.RoleAssistant, Content: llm.Text("checking"),
			ToolCalls: []llm.ToolCall{{ID: "call_9", Name: "n"}}}}},
		{name: "system message anywhere (not checked)", history: stored[:2], added: []llm.Message{llm.SystemText("late")}},

		// Message.Validate.
		{name: "empty assistant", history: stored, added: []llm.Message{{Role: llm.RoleAssistant}},
			field: "messages[6].content", reason: "needs content or tool calls", index: 6},
		{name: "empty assistant string", history: stored[:4], added: []llm.Message{llm.AssistantText("ok"), llm.AssistantText("")},
			field: "messages[5].content", reason: "needs content or tool calls", index: 5},
		{name: "empty call id", history: stored, added: []llm.Message{historyCall("")},
			field: "messages[6].tool_calls[0].id", reason: "needs an id", index: 6},
		{name: "call id twice in one message", history: stored[:2], added: []llm.Message{historyCall("a", "a")},
			field: "messages[2].tool_calls[1].id", reason: "duplicate tool call id", index: 2},
		{name: "tool message without id", history: stored, added: []llm.Message{{Role: llm.RoleTool, Content: llm.Text("x")}},
			field: "messages[6].tool_call_id", reason: "needs a tool_call_id", index: 6},
		{name: "unknown role", added: []llm.Message{{Role: "bot", Content: llm.Text("x")}},
			field: "messages[0].role", reason: "unknown role", index: 0},

		// A tool message answers an earlier call, once.
		{name: "result matches no call", history: stored, added: []llm.Message{llm.ToolResult("call_3", "x")},
			field: "messages[6].tool_call_id", reason: `"call_3" matches no tool call`, index: 6},
		{name: "result before its call", history: stored[:4], added: []llm.Message{llm.ToolResult("call_5", "x"), historyCall("call_5")},
			field: "messages[4].tool_call_id", reason: `"call_5" matches no tool call`, index: 4},
		{name: "result into empty history", added: []llm.Message{llm.UserText("hi"), llm.ToolResult("call_1", "x")},
			field: "messages[1].tool_call_id", reason: "matches no tool call", index: 1},
		{name: "call answered in history", history: stored, added: []llm.Message{llm.ToolResult("call_1", "again")},
			field: "messages[6].tool_call_id", reason: `answers call "call_1" a second time (messages[3]`, index: 6},
		{name: "history call answered twice in added", history: stored, added: []llm.Message{llm.ToolResult("call_2", "a"), llm.ToolResult("call_2", "b")},
			field: "messages[7].tool_call_id", reason: `answers call "call_2" a second time (messages[6]`, index: 7},
		{name: "added call answered twice", history: stored[:4], added: []llm.Message{historyCall("call_7"), llm.ToolResult("call_7", "a"), approval, llm.ToolResult("call_7", "b")},
			field: "messages[7].tool_call_id", reason: `answers call "call_7" a second time (messages[5]`, index: 7},

		// Tool call ids are unique across the history.
		{name: "call id of an answered history call", history: stored, added: []llm.Message{historyCall("call_1")},
			field: "messages[6].tool_calls[0].id", reason: `"call_1" duplicates the id of messages[2].tool_calls[0]`, index: 6},
		{name: "call id of an open history call", history: stored, added: []llm.Message{historyCall("call_9", "call_2")},
			field: "messages[6].tool_calls[1].id", reason: "duplicates the id of messages[4].tool_calls[0]", index: 6},
		{name: "call id repeated in added", history: stored[:4], added: []llm.Message{historyCall("x", "y"), llm.ToolResult("x", ""), llm.ToolResult("y", ""), historyCall("y")},
			field: "messages[7].tool_calls[0].id", reason: "duplicates the id of messages[4].tool_calls[1]", index: 7},

		// The first offending message wins.
		{name: "list rule before a shape rule", history: stored, added: []llm.Message{llm.ToolResult("nope", ""), {Role: llm.RoleAssistant}},
			field: "messages[6].tool_call_id", reason: "matches no tool call", index: 6},
		{name: "shape rule before a list rule", history: stored, added: []llm.Message{{Role: llm.RoleAssistant}, llm.ToolResult("nope", "")},
			field: "messages[6].content", reason: "needs content", index: 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := llm.CheckHistory(tc.history, tc.added)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("CheckHistory = %v, want nil", err)
				}
				return
			}
			var ve *llm.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("CheckHistory = %v (%T), want a *llm.ValidationError", err, err)
			}
			got := [2]string{ve.Field, fmt.Sprint(ve.Index)}
			if diff := cmp.Diff([2]string{tc.field, fmt.Sprint(tc.index)}, got); diff != "" {
				t.Errorf("field, index (-want +got):\n%s", diff)
			}
			if !strings.Contains(ve.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", ve.Reason, tc.reason)
			}
			if !errors.Is(err, llm.ErrInvalidMessage) || !errors.Is(err, errcat.ProviderInvalidRequest) ||
				errcat.Of(err) != errcat.ProviderInvalidRequest || !strings.HasPrefix(err.Error(), "llm: "+tc.field+": ") {
				t.Errorf("error %q: want ErrInvalidMessage, provider_invalid_request and the llm: <field> prefix", err)
			}
			if want := refCheckHistory(tc.history, tc.added); want.field != tc.field {
				t.Errorf("the reference implementation says %+v", want)
			}
		})
	}
}

// TestCheckHistoryManyIDs crosses the small-set threshold: many calls and
// results in one append, against a history with many calls.
func TestCheckHistoryManyIDs(t *testing.T) {
	history := longHistory(300)
	var calls []string
	for i := range 40 {
		calls = append(calls, fmt.Sprintf("new_%d", i))
	}
	added := []llm.Message{historyCall(calls...)}
	for i := len(calls) - 1; i >= 0; i-- {
		added = append(added, llm.ToolResult(calls[i], "ok"))
	}
	if err := llm.CheckHistory(history, added); err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(added)
	bad[len(bad)-1] = llm.ToolResult("call_17", "late") // answered in history
	err := llm.CheckHistory(history, bad)
	var ve *llm.ValidationError
	if !errors.As(err, &ve) || ve.Index != len(history)+len(bad)-1 || !strings.Contains(ve.Reason, "a second time") {
		t.Fatalf("CheckHistory = %v", err)
	}
	bad = slices.Clone(added)
	bad[0] = historyCall(append(slices.Clone(calls), "call_3")...)
	err = llm.CheckHistory(history, bad)
	if !errors.As(err, &ve) || ve.Field != fmt.Sprintf("messages[%d].tool_calls[40].id", len(history)) {
		t.Fatalf("CheckHistory = %v", err)
	}
}

// TestCheckHistoryAllocs: no allocation without tool messages, nor for a
// typical tool-call round, on a valid append.
func TestCheckHistoryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool allocates in json.Valid")
	}
	history := longHistory(1000)
	for _, tc := range []struct {
		name  string
		added []llm.Message
	}{
		{"text", []llm.Message{llm.UserText("hi"), llm.AssistantText("hello")}},
		{"tool round", []llm.Message{llm.UserText("hi"), historyCall("n1", "n2"), llm.ToolResult("n1", "a"), llm.ToolResult("n2", "b"), llm.AssistantText("ok")}},
		{"result only", []llm.Message{llm.ToolResult("open", "sent"), llm.AssistantText("sent")}},
	} {
		h := history
		if tc.name == "result only" {
			h = append(slices.Clone(history), historyCall("open"), llm.AssistantText("May I?"))
		}
		if err := llm.CheckHistory(h, tc.added); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := testing.AllocsPerRun(100, func() { _ = llm.CheckHistory(h, tc.added) }); n != 0 {
			t.Errorf("%s: %v allocations, want 0", tc.name, n)
		}
	}
}

// longHistory returns a valid history of about n messages: rounds of
// user, assistant tool call (ids call_0, call_1, ...), tool result and
// assistant text.
func longHistory(n int) []llm.Message {
	msgs := make([]llm.Message, 0, n+4)
	msgs = append(msgs, llm.SystemText("be terse"))
	for i := 0; len(msgs) < n; i++ {
		id := fmt.Sprintf("call_%d", i)
		msgs = append(msgs,
			llm.UserText("weather?"),
			historyCall(id),
			llm.ToolResult(id, "72F"),
			llm.AssistantText("It is 72F."))
	}
	return msgs
}

// BenchmarkCheckHistory appends to a 10 000-message history: one
// assistant text (no history scan), an assistant tool call and its result
// (a full scan for the id's uniqueness), and a tool result answering the
// last call (a scan back to that call).
func BenchmarkCheckHistory(b *testing.B) {
	history := longHistory(10_000)
	open := append(slices.Clone(history), historyCall("open"), llm.AssistantText("May I?"))
	for _, bc := range []struct {
		name    string
		history []llm.Message
		added   []llm.Message
	}{
		{"text", history, []llm.Message{llm.AssistantText("It is sunny.")}},
		{"call+result", history, []llm.Message{historyCall("new_1"), llm.ToolResult("new_1", "72F")}},
		{"result", open, []llm.Message{llm.ToolResult("open", "sent")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := llm.CheckHistory(bc.history, bc.added); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refResult is the reference implementation's verdict: the offending
// field ("" when valid) and a substring of the reason.
type refResult struct {
	field, reason string
	index         int
}

// refCheckHistory is a direct reading of CheckHistory's rules: for each
// added message in order, Validate, then its tool call ids against every
// earlier message, then its tool_call_id against every earlier message.
func refCheckHistory(history, added []llm.Message) refResult {
	all := append(slices.Clone(history), added...)
	for i := len(history); i < len(all); i++ {
		m := all[i]
		if err := m.Validate(); err != nil {
			var ve *llm.ValidationError
			errors.As(err, &ve)
			return refResult{fmt.Sprintf("messages[%d].%s", i, ve.Field), ve.Reason, i}
		}
		for j, c := range m.ToolCalls {
			for k := range i {
				if slices.ContainsFunc(all[k].ToolCalls, func(d llm.ToolCall) bool { return d.ID == c.ID }) {
					return refResult{fmt.Sprintf("messages[%d].tool_calls[%d].id", i, j), "duplicates the id of", i}
				}
			}
		}
		if m.Role != llm.RoleTool {
			continue
		}
		called, answered := false, false
		for k := range i {
			called = called || slices.ContainsFunc(all[k].ToolCalls, func(d llm.ToolCall) bool { return d.ID == m.ToolCallID })
			answered = answered || (all[k].Role == llm.RoleTool && all[k].ToolCallID == m.ToolCallID)
		}
		switch {
		case !called:
			return refResult{fmt.Sprintf("messages[%d].tool_call_id", i), "matches no tool call", i}
		case answered:
			return refResult{fmt.Sprintf("messages[%d].tool_call_id", i), "a second time", i}
		}
	}
	return refResult{index: -1}
}

// fuzzHistory builds messages from data, two bytes each: the first picks
// the kind, the second the tool call ids from a pool of four (a fifth,
// "", breaks Message.Validate).
func fuzzHistory(data []byte) []llm.Message {
	ids := []string{"a", "b", "c", "d", ""}
	var msgs []llm.Message
	for i := 0; i+1 < len(data) && len(msgs) < 64; i += 2 {
		k, v := data[i], data[i+1]
		id := ids[int(v)%len(ids)]
		switch k % 8 {
		case 0:
			msgs = append(msgs, llm.UserText("u"))
		case 1, 2:
			msgs = append(msgs, llm.AssistantText("t"))
		case 3:
			calls := []string{id}
			if k&0x80 != 0 {
				calls = append(calls, ids[int(v/8)%len(ids)])
			}
			msgs = append(msgs, historyCall(calls...))
		case 4, 5:
			msgs = append(msgs, llm.ToolResult(id, "r"))
		case 6:
			msgs = append(msgs, llm.Message{Role: llm.RoleAssistant}) // empty reply
		case 7:
			msgs = append(msgs, llm.SystemText("s"))
		}
	}
	return msgs
}

// FuzzCheckHistory splits a random message list into a valid history
// (its longest valid prefix, or less) and an append, and checks that
// CheckHistory never panics, fails only with categorized, prefixed
// errors, and agrees with the reference implementation on the verdict,
// the field and the index.
func FuzzCheckHistory(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 4, 0, 1, 0}, uint8(2))
	f.Add([]byte{0, 0, 3, 0, 1, 0, 4, 0, 4, 0}, uint8(3))
	f.Add([]byte{0, 0, 131, 8, 4, 1, 4, 0, 3, 1}, uint8(1))
	f.Add([]byte{0, 0, 3, 4, 6, 0, 4, 2}, uint8(0))
	f.Add([]byte{7, 0, 0, 0, 3, 0, 4, 0, 3, 1, 4, 1, 4, 1, 3, 0}, uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, split uint8) {
		msgs := fuzzHistory(data)
		valid := len(msgs)
		if r := refCheckHistory(nil, msgs); r.field != "" {
			valid = r.index
		}
		h := min(int(split), valid)
		history, added := msgs[:h:h], msgs[h:]
		err := llm.CheckHistory(history, added)
		want := refCheckHistory(history, added)
		if (err == nil) != (want.field == "") {
			t.Fatalf("CheckHistory(%d messages, %d messages) = %v, reference %+v", len(history), len(added), err, want)
		}
		if err == nil {
			return
		}
		checkFuzzError(t, err)
		var ve *llm.ValidationError
		errors.As(err, &ve)
		if ve.Field != want.field || ve.Index != want.index || !strings.Contains(ve.Reason, want.reason) {
			t.Fatalf("CheckHistory error %q (index %d), reference %+v", err, ve.Index, want)
		}
	})
}

// FuzzCheckHistoryIndexed: with an index synced to a prefix of history
// (the same array, then appended to) or to an unrelated list, the
// indexed check returns exactly what CheckHistory returns, for any
// history, valid or not.
func FuzzCheckHistoryIndexed(f *testing.F) {
	f.Add([]byte{0, 0, 3, 0, 4, 0, 1, 0}, uint8(2), uint8(1))
	f.Add([]byte{0, 0, 3, 0, 1, 0, 4, 0, 4, 0}, uint8(3), uint8(0))
	f.Add([]byte{0, 0, 131, 8, 4, 1, 4, 0, 3, 1}, uint8(1), uint8(7))
	f.Add([]byte{7, 0, 0, 0, 3, 0, 4, 0, 3, 1, 4, 1, 4, 1, 3, 0}, uint8(5), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, split, synced uint8) {
		msgs := fuzzHistory(data)
		h := min(int(split), len(msgs))
		history, added := msgs[:h], msgs[h:]
		var x llm.CallIndex
		switch k := int(synced); {
		case k%5 == 4: // an index of another history: rebuilt
			x.Sync(fuzzHistory(append([]byte{3, 0, 4, 0}, data...)))
		default:
			x.Sync(history[:min(k, h)])
		}
		want := llm.CheckHistory(history, added)
		got := llm.CheckHistoryIndexed(history, added, &x)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("CheckHistoryIndexed = %v, CheckHistory = %v", got, want)
		}
		for _, m := range history {
			for _, c := range m.ToolCalls {
				if !x.HasCall(c.ID) {
					t.Fatalf("synced index lacks call %q", c.ID)
				}
			}
		}
	})
}

// TestCallIndexGrows: an index follows a history appended to in place,
// reading only the new messages, and starts over for another history.
func TestCallIndexGrows(t *testing.T) {
	h := make([]llm.Message, 0, 8)
	h = append(h, llm.UserText("q"), historyCall("a"))
	var x llm.CallIndex
	x.Sync(h)
	h = append(h, llm.ToolResult("a", "r"), historyCall("b"))
	x.Sync(h)
	if !x.HasCall("a") || !x.HasCall("b") || x.HasCall("c") {
		t.Fatal("the index does not follow the appended history")
	}
	other := []llm.Message{llm.UserText("q"), historyCall("c")}
	x.Sync(other)
	if x.HasCall("a") || !x.HasCall("c") {
		t.Fatal("the index of another history kept the old one's calls")
	}
	if err := llm.CheckHistoryIndexed(other, []llm.Message{historyCall("c")}, &x); err == nil {
		t.Fatal("a duplicate call id passed the indexed check")
	}
}

// TestCallIndexDoesNotRetain: an index kept after its history is dropped
// does not keep the history's messages alive.
func TestCallIndexDoesNotRetain(t *testing.T) {
	var x llm.CallIndex
	collected := make(chan struct{})
	func() {
		h := make([]llm.Message, 2, 1024)
		h[0], h[1] = llm.UserText("q"), historyCall("a")
		runtime.AddCleanup(&h[0], func(ch chan struct{}) { close(ch) }, collected)
		x.Sync(h)
	}()
	for range 20 {
		runtime.GC()
		select {
		case <-collected:
			if !x.HasCall("a") {
				t.Fatal("the index lost its ids")
			}
			return
		default:
		}
	}
	t.Fatal("the index kept its dropped history alive")
}
