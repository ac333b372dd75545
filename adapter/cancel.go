package adapter

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/session"
)

// OnCancel is the hook a chat harness over a's chat graph g calls when
// it cancels a suspended turn (chat.Config.OnCancel): when a is a
// Discarder, the cancelled suspension is discarded at once (Discard,
// with a Request carrying only the tenant and session id), rather than
// at the session's next turns, which a session never written to again
// would not have; nil otherwise, or when g keeps no sessions. The
// suspension is read from the session as g stores it; a session that
// holds no suspension with that signal id discards nothing. Discarding
// it again later, when the session's next turn finds it stale, must
// succeed (Discard is idempotent).
func OnCancel(a Adapter, g *graph.Graph) func(ctx context.Context, key, signalID string) error {
	d, ok := a.(Discarder)
	if !ok || g == nil || g.SessionStore() == nil {
		return nil
	}
	store := g.SessionStore()
	return func(ctx context.Context, key, signalID string) error {
		// The suspension is a field of the session's state: its history
		// is not needed (one message read, not all).
		rec, err := store.Load(ctx, session.LoadRequest{SessionID: key, Tail: []session.ListTail{{Field: chat.MessagesField, Max: 1}}})
		if errors.Is(err, session.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		p, ok := storedSuspension(rec.State[SuspensionField])
		if !ok || agent.SignalPrefix+p.ToolCall.ID != signalID {
			return nil
		}
		tenant, id := splitKey(key)
		return d.Discard(ctx, &Request{Tenant: tenant, SessionID: id}, &Discarded{SignalID: signalID, ToolCall: p.ToolCall, State: p.State})
	}
}

// storedSuspension decodes SuspensionField as a session store holds it:
// the JSON string the runner stores, or (a store that decoded it) the
// object itself.
func storedSuspension(raw json.RawMessage) (*pendingSuspension, bool) {
	var text string
	if json.Unmarshal(raw, &text) == nil {
		raw = json.RawMessage(text)
	}
	return decodeSuspension(raw)
}
