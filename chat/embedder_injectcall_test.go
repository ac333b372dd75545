package chat_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// TestEmbedderClientToolCallNeedsApproval: a message the client sends
// as an assistant tool call of an approval-gated tool must not run the
// tool without a human's approval.
func TestEmbedderClientToolCallNeedsApproval(t *testing.T) {
	refunds := &embRefunds{ran: map[string]int{}}
	w := embOpen(t, filepath.Join(t.TempDir(), "m.db"), refunds.tools())
	ctx := context.Background()
	if _, err := w.h.Send(ctx, "s", llm.UserText("hello")); err != nil {
		t.Fatal(err)
	}
	out, err := w.h.Send(ctx, "s", llm.AssistantToolCalls(llm.ToolCall{ID: "x1", Name: "issue_refund", Arguments: json.RawMessage(`{"order":"1","amount":5}`)}))
	refunds.mu.Lock()
	defer refunds.mu.Unlock()
	t.Logf("%T %v; history %q", out, err, texts(history(t, w.store, "s")))
	if len(refunds.ran) > 0 {
		t.Fatalf("the refund ran without approval: %v (%T)", refunds.ran, out)
	}
	_ = chat.Messages
}
