package chat

import (
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// Outcome is a chat turn's result (harness-chat §5.2, ChatTurnOutcome):
// exactly one of *Completed, *Errored or *Suspended. Switch on the
// concrete type:
//
//	switch o := out.(type) {
//	case *chat.Completed: render(o.Replies)
//	case *chat.Suspended: askApproval(o.Descriptor, o.PendingMessages)
//	case *chat.Errored:   show(o.Reply) // role system, text per bucket
//	}
type Outcome interface {
	// Info returns what every outcome shares.
	Info() *Turn
	isOutcome()
}

// Turn is the part every outcome shares.
type Turn struct {
	// SessionID is the turn's session.
	SessionID string
	// InvocationID is the invocation that ran the turn ("" when the turn
	// failed before invoking, e.g. on an invalid message).
	InvocationID string
	// Path is the dispatch path: harness.PathNewSession when the session
	// had no history, PathExistingSession when it had,
	// PathSignalResume for a resumed turn; "" when the turn failed
	// before the session was read.
	Path harness.Path
	// Resumed is set on the outcome of a signal-resume turn.
	Resumed bool
	// Delivered holds outcomes of resumed turns that had no listener,
	// handed to this Send ahead of its own outcome
	// (Config.DeliverResumedOnSend).
	Delivered []Outcome
	// Superseded lists the signal ids of the suspended turns this Send's
	// message superseded (see the package documentation): their
	// approvals were closed and their signals no longer resume anything.
	Superseded []string
	// SupersededInvocations lists the invocation ids of those turns, in
	// the same order.
	SupersededInvocations []string
	// Replayed is set on an outcome returned for a retransmission (the
	// same message id, request id or continuation): the turn ran once,
	// earlier, and this is its recorded outcome. A replayed Completed
	// has no FinalState.
	Replayed bool
	// RecordKey, on a replayed outcome, is the key the turn was recorded
	// under (WithRecordKey, Signal.RecordKey; "" when it had none), so
	// that a retransmission's answer names the record the first answer
	// named — a server's run id, say.
	RecordKey string
	// Usage sums the token usage the turn's model calls reported
	// (ReportModelCall; counters nil when no call reported them), and
	// FinishReason is the last call's finish reason ("" when the turn
	// made no model call). ModelCalls counts the calls. A replayed
	// outcome carries the first answer's, as recorded with it (none
	// from a record written before they were recorded).
	Usage        llm.Usage
	FinishReason llm.FinishReason
	ModelCalls   int
	// Prompts are the managed prompts the turn's nodes rendered
	// (ReportPrompt), in order; a replayed outcome does not carry them.
	Prompts []PromptUse

	// input, on a replayed outcome, is the message the turn answered,
	// when the session's history still holds it (see sameInput).
	input *llm.Message
	// signal, on a replayed resume, is the decision it took, when
	// recorded (see sameSignal).
	signal *signalRef
}

// Info returns t.
func (t *Turn) Info() *Turn { return t }

// Completed is a turn that ran to the end.
type Completed struct {
	Turn
	// Replies are the messages the turn appended after the user's, of
	// every role, in graph order (harness-chat §7); empty, never nil,
	// when the turn added none.
	Replies []llm.Message
	// FinalState is the session's state after the turn. When the turn
	// loaded only the history's tail (graph.SessionConfig.Tail, an agent
	// with a window bounded by messages), its messages are that tail and
	// what the turn added: Graph.SessionState reads the whole history.
	FinalState graph.State
}

// Errored is a turn that failed. Its Reply is the system message to show
// the user (harness-chat §10); Err is the underlying error.
type Errored struct {
	Turn
	Bucket   harness.Bucket
	Category errcat.Category
	Reply    llm.Message
	Err      error
}

// Suspended is a turn paused for a signal (harness-chat §8): Send has
// returned, and the resumed turn's outcome reaches the session's
// listeners (Subscribe).
type Suspended struct {
	Turn
	// Descriptor says what the turn waits for; its SignalID resumes it
	// (Harness.Signal).
	Descriptor graph.SignalDescriptor
	// PendingMessages are the messages appended before the suspension —
	// typically an assistant message asking for approval; empty, never
	// nil, when there were none.
	PendingMessages []llm.Message
}

func (*Completed) isOutcome() {}
func (*Errored) isOutcome()   {}
func (*Suspended) isOutcome() {}

// Replies holds the texts of errored replies (harness-chat §10). In
// UserCorrectable, "{diagnostic}" is replaced by the failure's
// diagnostic. The zero value uses the spec's texts.
type Replies struct {
	SessionTerminating string
	RetryableTransient string
	UserCorrectable    string
}

// The spec's reply texts (harness-chat §10).
const (
	DefaultSessionTerminatingReply = "This conversation can't continue. Please start a new one."
	DefaultRetryableTransientReply = "I had trouble responding. Try again in a moment."
	DefaultUserCorrectableReply    = "That request couldn't be processed: {diagnostic}. Please adjust your message and try again."
)

func (r Replies) withDefaults() Replies {
	if r.SessionTerminating == "" {
		r.SessionTerminating = DefaultSessionTerminatingReply
	}
	if r.RetryableTransient == "" {
		r.RetryableTransient = DefaultRetryableTransientReply
	}
	if r.UserCorrectable == "" {
		r.UserCorrectable = DefaultUserCorrectableReply
	}
	return r
}
