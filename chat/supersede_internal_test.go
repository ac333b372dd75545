package chat

import (
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
)

// walkedApproval is awaitedApproval as it read the history before: the
// whole of it, from the first message (the reference).
func walkedApproval(hist []llm.Message) bool {
	var asides llm.AsideFilter
	found := false
	for i := range hist {
		m := &hist[i]
		if m.Role == llm.RoleAssistant && len(m.ToolCalls) > 0 {
			found = false
		}
		if asides.Aside(m) {
			found = true
		}
	}
	return found
}

// TestAwaitedApprovalRandom: awaitedApproval, which reads the history
// back to its last tool-call group only, answers as a walk of the whole
// history does, on random histories of user messages, replies, tool-call
// groups (some answered in part), approval requests among a group's
// results and stray messages (seed printed).
func TestAwaitedApprovalRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	call := 0
	for round := range 20000 {
		var hist []llm.Message
		for range rng.IntN(14) {
			switch rng.IntN(6) {
			case 0:
				hist = append(hist, llm.UserText("hi"))
			case 1:
				hist = append(hist, llm.AssistantText("reply"))
			case 2, 3:
				n := 1 + rng.IntN(3)
				calls := make([]llm.ToolCall, n)
				for i := range calls {
					call++
					calls[i] = llm.ToolCall{ID: "c" + strconv.Itoa(call), Name: "t", Arguments: json.RawMessage(`{}`)}
				}
				hist = append(hist, llm.AssistantToolCalls(calls...))
				for i, tc := range calls[:rng.IntN(n+1)] {
					if rng.IntN(3) == 0 {
						hist = append(hist, llm.AssistantText("may I run "+tc.ID+"?"))
					}
					if i < n || rng.IntN(2) == 0 {
						hist = append(hist, llm.ToolResult(tc.ID, "done"))
					}
				}
			case 4:
				hist = append(hist, llm.ToolResult("stray", "late"))
			case 5:
				hist = append(hist, llm.AssistantText("may I?"))
			}
		}
		if got, want := awaitedApproval(hist), walkedApproval(hist); got != want {
			t.Fatalf("round %d: awaitedApproval = %v, the whole walk %v, on %+v", round, got, want, hist)
		}
	}
}

// BenchmarkAwaitedApproval: what awaitedApproval costs a turn after a
// tool turn, at history lengths 10 and 10 000 (a turn of a user message,
// a call, its result and the answer, repeated): the same, since it reads
// the last tool-call group only.
func BenchmarkAwaitedApproval(b *testing.B) {
	for _, h := range []int{10, 10000} {
		b.Run("history="+strconv.Itoa(h), func(b *testing.B) {
			hist := make([]llm.Message, 0, h)
			for i := 0; len(hist) < h; i++ {
				tc := llm.ToolCall{ID: "c" + strconv.Itoa(i), Name: "t", Arguments: json.RawMessage(`{}`)}
				hist = append(hist, llm.UserText("hi"), llm.AssistantToolCalls(tc), llm.ToolResult(tc.ID, "done"), llm.AssistantText("ok"))
			}
			for b.Loop() {
				if awaitedApproval(hist) {
					b.Fatal("no approval awaited")
				}
			}
		})
	}
}
