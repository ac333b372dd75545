package agent

import (
	"context"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
)

// SummaryField is the state field recording where the session's latest
// compaction summary stands in its history (a [Summary]). It is a wire
// identifier and must not change.
const SummaryField = "context_summary"

// SummaryPrefix starts the text of every summary message compaction
// appends to the history, so that readers of the history (and the model)
// can tell it from a reply. It is a wire identifier and must not change.
const SummaryPrefix = "Summary of the earlier conversation: "

// DefaultCompactionPrompt is the system prompt of a summarizing call when
// [Compaction.Prompt] is empty.
const DefaultCompactionPrompt = "You condense conversations. Summarize the conversation below for the assistant who will continue it: " +
	"the user's goals and preferences, facts and decisions established, tool results that still matter, and open questions. " +
	"Be concise; write plain prose without a preamble."

// Compaction makes an agent summarize, with its model, the messages its
// [Window] is about to leave out, instead of only dropping them. See the
// package documentation, "Compaction".
type Compaction struct {
	// Prompt is the system prompt of the summarizing call; empty means
	// DefaultCompactionPrompt.
	Prompt string
}

// Summary is the [SummaryField] state field: where the session's latest
// summary message stands. The summary covers every message before it.
type Summary struct {
	// Message is the index in the whole history of the latest summary
	// message (absolute even when the turn loaded only the history's
	// tail, graph.SessionListOffset); 0 means there is none (a history
	// starts with the user's message).
	Message int `json:"message"`
}

var summaryField = graph.NewField[Summary](SummaryField)

// latestSummary returns the index in msgs of the session's latest
// summary message and the message, or -1 and nil; msgs is the history
// from index off on (a tail, or the whole history when off is 0), which
// holds the summary (Agent.loaded reads it whole otherwise).
func latestSummary(s graph.State, msgs []llm.Message, off int) (int, *llm.Message) {
	abs := summaryField.Get(s).Message
	at := abs - off
	if abs <= 0 || at < 0 || at >= len(msgs) {
		return -1, nil
	}
	return at, &msgs[at]
}

// compact runs after the turn's final answer. When the window of the next
// call (the history as it stands and one more user message the size of
// this turn's) would leave out messages that came after the latest
// summary, it asks the model to summarize the latest summary and every
// message since, and appends the summary to the history as an assistant
// message. A failed summarizing call is not the turn's failure: the turn
// ends without a new summary, and the next one tries again.
func (a *Agent) compact(ctx context.Context, s graph.State) (graph.Update, error) {
	s, off, err := a.loaded(ctx, s)
	if err != nil {
		return nil, err
	}
	msgs := chat.Messages.Get(s)
	at, prev := latestSummary(s, msgs, off)
	if start := a.nextStart(ctx, msgs, prev, off > 0); start <= at+1 {
		return nil, nil
	}
	var b strings.Builder
	if prev != nil {
		b.WriteString("Earlier summary:\n")
		b.WriteString(strings.TrimPrefix(prev.Text(), SummaryPrefix))
		b.WriteString("\n\nThe conversation since:\n")
	}
	renderTranscript(&b, msgs[at+1:])
	prompt := a.cfg.Compaction.Prompt
	if prompt == "" {
		prompt = DefaultCompactionPrompt
	}
	resp, err := llm.Complete(ctx, a.cfg.Provider, &llm.Request{System: prompt, Messages: []llm.Message{llm.UserText(b.String())},
		Config: a.cfg.Model, Retry: a.cfg.Retry})
	if err != nil || resp.Message.Text() == "" {
		return nil, nil // a summary is best effort: the next turn tries again
	}
	chat.ReportModelCall(ctx, resp)
	return graph.Update{
		chat.MessagesField: []llm.Message{llm.AssistantText(SummaryPrefix + resp.Message.Text())},
		SummaryField:       Summary{Message: off + len(msgs)},
	}, nil
}

// nextStart is where the window of the next turn's first call would start
// in msgs, with room left for a user message the size of the last one.
func (a *Agent) nextStart(ctx context.Context, msgs []llm.Message, sum *llm.Message, partial bool) int {
	w := a.cfg.Window
	if w.MaxMessages == 1 {
		return len(msgs)
	}
	if w.MaxMessages > 0 {
		w.MaxMessages--
	}
	if w.MaxTokens > 0 {
		for i := len(msgs) - 1; i >= 0; i-- { // the turn's user message
			if msgs[i].Role == llm.RoleUser {
				w.MaxTokens = max(1, w.MaxTokens-int(float64(a.tokens(&msgs[i]))*a.calib.ratio()))
				break
			}
		}
	}
	system, _ := a.system(ctx) // a failing managed prompt fails the turn's model call, not this estimate
	sent, _ := a.windowOf(w, msgs, system, sum, partial)
	return len(msgs) - len(sent)
}

// renderTranscript writes msgs as plain text for the summarizing call,
// one line a message, without the approval requests.
func renderTranscript(b *strings.Builder, msgs []llm.Message) {
	var asides llm.AsideFilter
	for i := range msgs {
		m := &msgs[i]
		if asides.Aside(m) {
			continue
		}
		b.WriteString(string(m.Role))
		if m.Role == llm.RoleTool {
			b.WriteString(" result")
		}
		b.WriteString(": ")
		b.WriteString(m.Text())
		for _, tc := range m.ToolCalls {
			b.WriteString(" [calls " + tc.Name + " with " + compactArgs(tc.Arguments) + "]")
		}
		b.WriteByte('\n')
	}
}
