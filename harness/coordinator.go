package harness

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
)

// Subscription ties an awaited signal to the paused invocation it resumes
// (harness §6).
type Subscription struct {
	// SignalID is the descriptor's signal id: the correlation key.
	SignalID string
	// InvocationID is the paused invocation.
	InvocationID string
	// SessionID is the invocation's session ("" in stateless mode).
	SessionID string
	// Metadata is the descriptor's metadata, when the coordinator keeps
	// it (the store coordinator does not).
	Metadata map[string]any
}

// SignalRef identifies an arriving signal: by the paused invocation's id
// (a REST callback naming it), or by its signal id, optionally scoped to
// a session so that equal signal ids in different sessions do not
// collide. A SessionID scopes an invocation id too: an invocation of
// another session is not found (a caller naming another tenant's or
// conversation's invocation resolves nothing).
type SignalRef struct {
	InvocationID string
	SignalID     string
	SessionID    string
}

// Coordinator is the signal coordinator of harness §6: it registers a
// subscription when a turn suspends and maps an arriving signal back to
// the paused invocation. Implementations are safe for concurrent use.
type Coordinator interface {
	// Subscribe registers the subscription of a suspended turn. A failure
	// turns the suspension into an errored outcome
	// (harness_signal_subscription_failed).
	Subscribe(ctx context.Context, s Subscription) error
	// Resolve maps a signal to its subscription. It fails with an error
	// wrapping ErrNoSubscription when nothing awaits the signal, and
	// ErrAmbiguousSignal when more than one invocation does.
	Resolve(ctx context.Context, ref SignalRef) (Subscription, error)
	// Release drops a subscription whose resume has run.
	Release(ctx context.Context, s Subscription) error
}

// PendingLister is the optional capability of a coordinator that can
// list the subscriptions awaiting a signal in one session: the chat
// harness uses it to find the suspended turn a new message supersedes.
// Both coordinators of this package implement it.
type PendingLister interface {
	// Pending returns the session's subscriptions (at most a few; a
	// session normally has at most one suspended turn).
	Pending(ctx context.Context, sessionID string) ([]Subscription, error)
}

// Coordinator errors.
var (
	// ErrNoSubscription: no paused invocation awaits the signal.
	ErrNoSubscription = errors.New("harness: no paused invocation awaits the signal")
	// ErrAmbiguousSignal: several paused invocations await the signal.
	ErrAmbiguousSignal = errors.New("harness: several paused invocations await the signal")
)

// MemoryCoordinator keeps subscriptions in memory: signals must arrive at
// the process whose turn suspended. Use [StoreCoordinator] to resume on
// any worker. The zero value is ready to use.
type MemoryCoordinator struct {
	mu     sync.Mutex
	bySig  map[string][]Subscription
	byInvo map[string]Subscription
	bySess map[string]map[string]struct{} // session id → invocation ids
}

var (
	_ Coordinator   = (*MemoryCoordinator)(nil)
	_ PendingLister = (*MemoryCoordinator)(nil)
)

// NewMemoryCoordinator returns an empty in-memory coordinator.
func NewMemoryCoordinator() *MemoryCoordinator { return &MemoryCoordinator{} }

// Subscribe records s; a second subscription for the same invocation
// replaces the first.
func (c *MemoryCoordinator) Subscribe(ctx context.Context, s Subscription) error {
	if s.InvocationID == "" {
		return fmt.Errorf("harness: subscription without an invocation id")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bySig == nil {
		c.bySig, c.byInvo, c.bySess = map[string][]Subscription{}, map[string]Subscription{}, map[string]map[string]struct{}{}
	}
	if old, ok := c.byInvo[s.InvocationID]; ok {
		c.removeLocked(old)
	}
	c.byInvo[s.InvocationID] = s
	c.bySig[s.SignalID] = append(c.bySig[s.SignalID], s)
	if c.bySess[s.SessionID] == nil {
		c.bySess[s.SessionID] = map[string]struct{}{}
	}
	c.bySess[s.SessionID][s.InvocationID] = struct{}{}
	return nil
}

// Resolve finds the subscription for ref.
func (c *MemoryCoordinator) Resolve(ctx context.Context, ref SignalRef) (Subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref.InvocationID != "" {
		s, ok := c.byInvo[ref.InvocationID]
		if !ok || (ref.SignalID != "" && s.SignalID != ref.SignalID) || (ref.SessionID != "" && s.SessionID != ref.SessionID) {
			return Subscription{}, fmt.Errorf("%w: invocation %q", ErrNoSubscription, ref.InvocationID)
		}
		return s, nil
	}
	var found []Subscription
	for _, s := range c.bySig[ref.SignalID] {
		if ref.SessionID == "" || s.SessionID == ref.SessionID {
			found = append(found, s)
		}
	}
	return pick(ref, found, func(s Subscription) string { return s.InvocationID })
}

// Pending returns the subscriptions of the session's paused invocations.
func (c *MemoryCoordinator) Pending(ctx context.Context, sessionID string) ([]Subscription, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Subscription
	for id := range c.bySess[sessionID] {
		out = append(out, c.byInvo[id])
	}
	return out, nil
}

// Release drops s.
func (c *MemoryCoordinator) Release(ctx context.Context, s Subscription) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(s)
	return nil
}

func (c *MemoryCoordinator) removeLocked(s Subscription) {
	if cur, ok := c.byInvo[s.InvocationID]; ok {
		if ids := c.bySess[cur.SessionID]; ids != nil {
			delete(ids, s.InvocationID)
			if len(ids) == 0 {
				delete(c.bySess, cur.SessionID)
			}
		}
	}
	delete(c.byInvo, s.InvocationID)
	list := c.bySig[s.SignalID]
	for i := range list {
		if list[i].InvocationID == s.InvocationID {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(c.bySig, s.SignalID)
	} else {
		c.bySig[s.SignalID] = list
	}
}

// pick returns the single match, or the no-match / ambiguity error.
func pick[T any](ref SignalRef, found []T, id func(T) string) (T, error) {
	var zero T
	switch len(found) {
	case 0:
		return zero, fmt.Errorf("%w: signal %q%s", ErrNoSubscription, ref.SignalID, sessionSuffix(ref.SessionID))
	case 1:
		return found[0], nil
	}
	return zero, fmt.Errorf("%w: signal %q%s is awaited by invocations %q and %q (name the session or the invocation)",
		ErrAmbiguousSignal, ref.SignalID, sessionSuffix(ref.SessionID), id(found[0]), id(found[1]))
}

func sessionSuffix(id string) string {
	if id == "" {
		return ""
	}
	return fmt.Sprintf(" in session %q", id)
}

// StoreCoordinator finds paused invocations through the durable record
// store the graph writes them to (graph.WithCheckpointStore): the paused
// record, written atomically with the session at suspension, carries the
// signal id, so subscribing needs no write of its own and a signal
// arriving at any process sharing the store resumes the turn.
type StoreCoordinator struct {
	Store checkpoint.Store
}

var (
	_ Coordinator   = StoreCoordinator{}
	_ PendingLister = StoreCoordinator{}
)

// NewStoreCoordinator returns a coordinator over store.
func NewStoreCoordinator(store checkpoint.Store) StoreCoordinator {
	return StoreCoordinator{Store: store}
}

// Subscribe does nothing: the engine's paused record is the
// subscription.
func (c StoreCoordinator) Subscribe(ctx context.Context, s Subscription) error {
	if c.Store == nil {
		return errors.New("harness: store coordinator without a store")
	}
	return nil
}

// Resolve looks the paused record up by invocation id or signal id.
func (c StoreCoordinator) Resolve(ctx context.Context, ref SignalRef) (Subscription, error) {
	if c.Store == nil {
		return Subscription{}, errors.New("harness: store coordinator without a store")
	}
	if ref.InvocationID != "" {
		rec, err := c.Store.Load(ctx, checkpoint.Key{InvocationID: ref.InvocationID, Kind: checkpoint.KindSuspended})
		if err != nil {
			if errors.Is(err, checkpoint.ErrNotFound) {
				return Subscription{}, fmt.Errorf("%w: invocation %q", ErrNoSubscription, ref.InvocationID)
			}
			return Subscription{}, err
		}
		if ref.SignalID != "" && rec.SignalID != ref.SignalID {
			return Subscription{}, fmt.Errorf("%w: invocation %q awaits another signal", ErrNoSubscription, ref.InvocationID)
		}
		if ref.SessionID != "" && rec.SessionID != ref.SessionID {
			// Another session's invocation: the same answer as none.
			return Subscription{}, fmt.Errorf("%w: invocation %q", ErrNoSubscription, ref.InvocationID)
		}
		return Subscription{SignalID: rec.SignalID, InvocationID: rec.InvocationID, SessionID: rec.SessionID}, nil
	}
	resp, err := c.Store.List(ctx, checkpoint.ListRequest{
		Kind: checkpoint.KindSuspended, SignalID: ref.SignalID, SessionID: ref.SessionID, PageSize: 2,
	})
	if err != nil {
		return Subscription{}, err
	}
	s, err := pick(ref, resp.Records, func(s checkpoint.Summary) string { return s.InvocationID })
	if err != nil {
		return Subscription{}, err
	}
	return Subscription{SignalID: s.SignalID, InvocationID: s.InvocationID, SessionID: s.SessionID}, nil
}

// Pending lists the session's paused-invocation records.
func (c StoreCoordinator) Pending(ctx context.Context, sessionID string) ([]Subscription, error) {
	if c.Store == nil {
		return nil, errors.New("harness: store coordinator without a store")
	}
	resp, err := c.Store.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: sessionID, PageSize: 16})
	if err != nil {
		return nil, err
	}
	out := make([]Subscription, 0, len(resp.Records))
	for _, r := range resp.Records {
		out = append(out, Subscription{SignalID: r.SignalID, InvocationID: r.InvocationID, SessionID: r.SessionID})
	}
	return out, nil
}

// Release does nothing: the engine deletes the paused record when the
// resumed run ends.
func (c StoreCoordinator) Release(ctx context.Context, s Subscription) error { return nil }

// subscriptionOf builds the subscription of a suspended result.
func subscriptionOf(res *graph.Result, sessionID string) Subscription {
	d := res.Suspension.Descriptor
	return Subscription{SignalID: d.SignalID, InvocationID: res.InvocationID, SessionID: sessionID, Metadata: d.Metadata}
}
