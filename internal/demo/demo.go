// Package demo is the built-in offline demo agent of armature serve: a
// scripted, deterministic model (no network) behind the real agent graph,
// with one ordinary tool (lookup_order) and one approval-gated tool
// (issue_refund), so a first run shows replies, streaming, tool calls and
// approvals on a fresh machine.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"regexp"
	"strconv"
	"strings"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"
)

// Model is the demo's scripted model. Its answer depends only on the
// conversation:
//
//   - after a tool result, it summarizes the result;
//   - a user message mentioning a refund calls issue_refund;
//   - one mentioning an order calls lookup_order;
//   - anything else gets a short echo with a hint.
//
// It implements llm.Streamer, streaming its text word by word.
type Model struct{}

var (
	_ llm.Provider = Model{}
	_ llm.Streamer = Model{}
)

// ModelName is the demo model's name.
const ModelName = "armature-demo"

var orderNumber = regexp.MustCompile(`\d+`)

// Ready reports the model ready.
func (Model) Ready(context.Context) error { return nil }

// System is the demo's provider system (llm.Systemer): gen_ai.system on
// its calls' spans and metrics.
func (Model) System() string { return "armature-demo" }

// Model is the demo model's name (llm.Modeler): gen_ai.request.model on
// its calls' spans and metrics.
func (Model) Model() string { return ModelName }

// Complete answers per the script.
func (m Model) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	msg, finish, err := respond(req)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(map[string]any{"model": ModelName, "message": msg})
	if err != nil {
		return nil, err
	}
	return &llm.Response{Message: msg, FinishReason: finish, Raw: raw}, nil
}

// respond validates req and answers it per the script.
func respond(req *llm.Request) (llm.Message, llm.FinishReason, error) {
	if err := req.Validate(); err != nil {
		return llm.Message{}, "", err
	}
	msg := answer(req)
	if len(msg.ToolCalls) > 0 {
		return msg, llm.FinishToolCalls, nil
	}
	return msg, llm.FinishStop, nil
}

// Stream yields the answer's text word by word, then its tool calls. The
// chunks of one answer share one allocation, and so do their raw
// payloads: a served turn streams every answer.
func (m Model) Stream(ctx context.Context, req *llm.Request) iter.Seq2[*llm.Chunk, error] {
	return func(yield func(*llm.Chunk, error) bool) {
		msg, finish, err := respond(req)
		if err != nil {
			yield(nil, err)
			return
		}
		text := msg.Text()
		words := strings.Count(text, " ") + 1
		chunks := make([]llm.Chunk, 0, words+len(msg.ToolCalls)+1)
		raws := make([]byte, 0, words*len(`{"delta":000}`))
		for i := 0; text != ""; i++ {
			w := text
			if j := strings.IndexByte(text, ' '); j >= 0 {
				w = text[:j+1]
			}
			text = text[len(w):]
			start := len(raws)
			raws = strconv.AppendInt(append(raws, `{"delta":`...), int64(i), 10)
			raws = append(raws, '}')
			chunks = append(chunks, llm.Chunk{Content: w, Raw: raws[start:len(raws):len(raws)]})
			if !yield(&chunks[len(chunks)-1], nil) {
				return
			}
		}
		for i, tc := range msg.ToolCalls {
			d := llm.ToolCallDelta{Index: i, ID: tc.ID, Name: tc.Name, Arguments: string(tc.Arguments)}
			chunks = append(chunks, llm.Chunk{ToolCalls: []llm.ToolCallDelta{d}, Raw: json.RawMessage(`{}`)})
			if !yield(&chunks[len(chunks)-1], nil) {
				return
			}
		}
		chunks = append(chunks, llm.Chunk{FinishReason: finish, Raw: json.RawMessage(`{}`)})
		yield(&chunks[len(chunks)-1], nil)
	}
}

// answer is the script. It reads the request's transcript
// (Request.Transcript) in place: a session's history can be long.
func answer(req *llm.Request) llm.Message {
	var (
		asides llm.AsideFilter
		last   = &llm.Message{}
		n      int // messages in the transcript
	)
	if req.System != "" {
		n++
	}
	for i := range req.Messages {
		if m := &req.Messages[i]; !asides.Aside(m) {
			last = m // not a copy: a session's history can be long
			n++
		}
	}
	if last.Role == llm.RoleTool {
		return llm.AssistantText("Here is what I found: " + last.Text())
	}
	text := strings.ToLower(last.Text())
	order := "42"
	if n := orderNumber.FindString(text); n != "" {
		order = n
	}
	id := fmt.Sprintf("call_%d", n)
	switch {
	case strings.Contains(text, "refund"):
		return llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "issue_refund",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order":%q,"amount":30}`, order))})
	case strings.Contains(text, "order"):
		return llm.AssistantToolCalls(llm.ToolCall{ID: id, Name: "lookup_order",
			Arguments: json.RawMessage(fmt.Sprintf(`{"order":%q}`, order))})
	}
	return llm.AssistantText(fmt.Sprintf("You said: %q. I'm the offline demo agent: ask me about an order (\"where is order 42?\") or for a refund.", last.Text()))
}

type lookupArgs struct {
	Order string `json:"order" jsonschema:"the order number"`
}

type refundArgs struct {
	Order  string  `json:"order" jsonschema:"the order number"`
	Amount float64 `json:"amount" jsonschema:"the amount to refund, in dollars"`
}

// Tools returns the demo's tools: lookup_order (safe), and issue_refund,
// which needs approval and is dangerous (money leaves).
func Tools() []agent.Tool {
	lookup := agent.MustTool("lookup_order", "Look an order up by number",
		func(ctx context.Context, a lookupArgs) (string, error) {
			return fmt.Sprintf("order %s: shipped, arriving Thursday", a.Order), nil
		}).WithRisk(agent.RiskSafe)
	refund := agent.MustTool("issue_refund", "Refund an order (needs approval)",
		func(ctx context.Context, a refundArgs) (string, error) {
			return fmt.Sprintf("refunded $%.2f for order %s", a.Amount, a.Order), nil
		}).WithApproval().WithRisk(agent.RiskDangerous)
	return []agent.Tool{lookup, refund}
}

// New returns the demo agent.
func New() (*agent.Agent, error) {
	return agent.New(agent.Config{Provider: Model{}, System: "You are the Armature demo agent.", Tools: Tools()})
}
