package demo

import (
	"context"
	"iter"
	"sync/atomic"

	"github.com/armature-go/armature/llm"
)

// Counting is the demo model counting its calls, streamed and plain: for
// tests of which calls a surface makes. Its zero value is ready to use.
type Counting struct {
	Model
	// Streamed and Plain count the Stream and Complete calls.
	Streamed, Plain atomic.Int32
}

var _ llm.Streamer = (*Counting)(nil)

// Complete counts the call and answers as Model does.
func (m *Counting) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	m.Plain.Add(1)
	return m.Model.Complete(ctx, req)
}

// Stream counts the call and streams as Model does.
func (m *Counting) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	m.Streamed.Add(1)
	return m.Model.Stream(ctx, req)
}
