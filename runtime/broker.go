package runtime

import (
	"sync"
	"sync/atomic"
)

// BrokerConfig configures a Broker.
type BrokerConfig struct {
	// Buffer is each subscriber's channel capacity; default 256.
	Buffer int
}

// Broker fans stored events out to live subscribers of a tenant's
// session. It is safe for concurrent use.
//
// Publish never blocks: a subscriber whose buffer is full is
// disconnected (its channel is closed and Disconnected counts it)
// rather than silently missing events, because a gap in an SSE stream
// is invisible to the client while a closed stream makes it reconnect
// and replay from the store with Last-Event-ID. Within a session,
// subscribers receive events in the order they were published; the
// Recorder publishes each turn's events in ID order, and the turns of a
// session are serialized by the harness.
type Broker struct {
	buffer int

	mu     sync.Mutex
	subs   map[runKey]map[*subscriber]struct{} // key {tenant, session id}
	closed bool

	disconnected atomic.Int64
	// live counts the subscribers (changed under mu): with none, as on
	// a server nobody watches live, Subscribed and Publish answer
	// without the lock, which every event of every turn would take.
	live atomic.Int64
}

type subscriber struct {
	ch     chan Event
	closed bool // guarded by Broker.mu
}

// NewBroker returns a Broker with no subscribers.
func NewBroker(cfg BrokerConfig) *Broker {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	return &Broker{buffer: cfg.Buffer, subs: map[runKey]map[*subscriber]struct{}{}}
}

// Subscribe returns a channel receiving the events of the tenant's
// session published from now on, and a cancel func that unsubscribes and
// closes the channel (idempotent). The channel is also closed when the
// subscriber overflows or the Broker closes.
//
// To stream without a gap, subscribe first, then replay from the store
// (Store.Events with AfterID = Last-Event-ID), then forward live events,
// skipping those with an ID not above the last one replayed. Subscribe
// through [Recorder.Subscribe] so that the replay also has the events a
// turn in flight buffered before the subscription.
func (b *Broker) Subscribe(tenant, sessionID string) (events <-chan Event, cancel func()) {
	s := &subscriber{ch: make(chan Event, b.buffer)}
	k := runKey{tenant, sessionID}
	b.mu.Lock()
	if b.closed {
		s.closed = true
		close(s.ch)
		b.mu.Unlock()
		return s.ch, func() {}
	}
	set := b.subs[k]
	if set == nil {
		set = map[*subscriber]struct{}{}
		b.subs[k] = set
	}
	set[s] = struct{}{}
	b.live.Add(1)
	b.mu.Unlock()
	return s.ch, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.drop(k, s)
	}
}

// drop removes and closes s; b.mu is held.
func (b *Broker) drop(k runKey, s *subscriber) {
	if s.closed {
		return
	}
	s.closed = true
	close(s.ch)
	if set := b.subs[k]; set != nil {
		if _, ok := set[s]; ok {
			b.live.Add(-1)
		}
		delete(set, s)
		if len(set) == 0 {
			delete(b.subs, k)
		}
	}
}

// Publish delivers stored events to the subscribers of their tenant's
// session without blocking.
func (b *Broker) Publish(events ...Event) {
	if b.live.Load() == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range events {
		k := runKey{e.Tenant, e.SessionID}
		for s := range b.subs[k] {
			select {
			case s.ch <- e:
			default:
				b.disconnected.Add(1)
				b.drop(k, s)
			}
		}
	}
}

// Subscribed reports whether the tenant's session has a live subscriber.
func (b *Broker) Subscribed(tenant, sessionID string) bool {
	if b.live.Load() == 0 {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.subs[runKey{tenant, sessionID}]) > 0
}

// Disconnected returns how many subscribers were disconnected because
// their buffer was full.
func (b *Broker) Disconnected() int64 { return b.disconnected.Load() }

// Close closes every subscriber's channel and makes later subscriptions
// closed at once. It is idempotent.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	for k, set := range b.subs {
		for s := range set {
			b.drop(k, s)
		}
	}
}
