package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/runtime"
)

// The server is the runtime every protocol surface talks to; it
// implements the four focused runtime interfaces of package adapter, for
// embedded callers (and tests) that drive it without HTTP.
var _ adapter.Runtime = (*Server)(nil)

// ErrStopped is returned by Submit once Stop began.
var ErrStopped = errors.New("server: stopped")

// tenantOrDefault is the tenant an embedded caller of the runtime
// interfaces means: "" is DefaultTenant, on every method (Submit, Run,
// Events, Runs, Cancel, Subscribe), as on an unauthenticated server.
// The HTTP surfaces never pass "" (Config.Validate refuses a token of
// tenant "").
func tenantOrDefault(tenant string) string {
	if tenant == "" {
		return DefaultTenant
	}
	return tenant
}

// Submit runs one turn (adapter.RuntimeClient): a message, or a signal
// resuming a suspended turn, for the tenant's session (tenant "" is
// DefaultTenant; the session is minted when req.SessionID is empty),
// under the same admission limits, run records and events as the HTTP
// surfaces. An errored turn is an outcome, not an
// error; errors are refusals (unknown agent, invalid id, limits).
func (s *Server) Submit(ctx context.Context, req adapter.SubmitRequest) (*adapter.Response, error) {
	if s.stopping() {
		return nil, ErrStopped
	}
	tenant := tenantOrDefault(req.Tenant)
	id := req.SessionID
	if id == "" {
		id = newSessionID()
	}
	if !validID(tenant) || !validID(id) {
		return nil, badRequest("tenant and session ids must be 1-128 bytes of [A-Za-z0-9._:-]")
	}
	a, err := s.agentFor(req.Agent)
	if err != nil {
		return nil, err
	}
	release, err := s.turns.acquire(ctx, tenant)
	if err != nil {
		return nil, err
	}
	defer release()
	resp := s.submit(ctx, tenant, a, id, req)
	resp.RunID = runIDOf(resp.Outcome, resp.RunID)
	return resp, nil
}

// submit runs an admitted turn of agent a in the tenant's session id:
// Submit, and every HTTP surface (chat REST, OpenHarness, the OpenAI
// chat completions and Responses endpoints, whose admission the route
// wrapper did), run their turns through it.
func (s *Server) submit(ctx context.Context, tenant string, a *Agent, id string, req adapter.SubmitRequest) *adapter.Response {
	resp := &adapter.Response{SessionID: id}
	if sig := req.Signal; sig != nil {
		resp.Outcome, resp.RunID = s.signal(ctx, tenant, a, req.Agent != "", id, chatSignal(sig))
		if sig.RequestID != "" && req.Agent != "" {
			// (A signal naming no agent resumes whichever agent's turn
			// awaits it: its retransmission is answered by that agent.)
			s.refuseIDOfOtherAgent(ctx, tenant, a, id, resp)
		}
		return resp
	}
	var opts []chat.SendOption
	if req.CorrelationID != "" {
		opts = append(opts, chat.WithInvokeOptions(graph.WithCorrelationID(req.CorrelationID)))
	}
	resp.Outcome, resp.RunID = s.sendStream(ctx, tenant, a, id, req.Message, req.MessageID, req.OnChunk, opts...)
	if req.MessageID != "" {
		s.refuseIDOfOtherAgent(ctx, tenant, a, id, resp)
	}
	return resp
}

// refuseIDOfOtherAgent refuses, in resp, a request whose id (a message's:
// REST message_id, the OpenAI Idempotency-Key, the OpenHarness
// request_id; or a signal's request id) was recorded for a turn of
// another agent than a. An id names one request, its agent included:
// this is another request, refused as an id given again with another
// message is, and that turn's answer is not this one's. Nothing ran for
// it.
func (s *Server) refuseIDOfOtherAgent(ctx context.Context, tenant string, a *Agent, id string, resp *adapter.Response) {
	if s.otherAgentsTurn(ctx, tenant, a, resp.Outcome) {
		resp.Outcome = a.Chat.ErroredOutcome(chat.Turn{SessionID: storeKey(tenant, id)}, errIDOfOtherAgent)
		resp.RunID = ""
	}
}

// errIDOfOtherAgent refuses a message id whose turn was another agent's
// (errors.Is chat.ErrMessageIDReused).
var errIDOfOtherAgent = errcat.Wrap(errcat.MessageIDReused, "this id was already used for a request to another agent; send a new id for a new request", nil)

// otherAgentsTurn reports whether out replays a turn (its original run,
// also when this request opened a run of its own before it found the
// original's answer) that another agent than a ran.
func (s *Server) otherAgentsTurn(ctx context.Context, tenant string, a *Agent, out chat.Outcome) bool {
	orig := runIDOf(out, "")
	if !out.Info().Replayed || orig == "" {
		return false
	}
	run, err := s.runs.Store().Run(ctx, tenant, orig)
	return err == nil && run != nil && run.AgentID != "" && run.AgentID != a.ID
}

// Subscribe delivers the tenant's session's events as they are stored
// (adapter.RuntimeEventSource). With a WatchRelay (Config), the other
// servers sharing the run store are told that the session is watched
// here until the subscription is cancelled, so their turns of the
// session write their events as they come: a stream that reads the
// store (GET /v1/sessions/{id}/events, with an EventNotifier) then has
// them at once. Tenant "" is DefaultTenant, as for Submit.
//
// The channel closes when cancel is called, when the subscriber falls
// behind (runtime.Broker), or when the runtime stops: Stop (or Serve's
// shutdown) closes it
// once the turns it waits for have ended (their last events delivered).
// A subscription made once the server is stopping (Stop or Serve's
// shutdown began) is a closed channel. cancel is idempotent.
func (s *Server) Subscribe(ctx context.Context, tenant, sessionID string) (<-chan runtime.Event, func()) {
	tenant = tenantOrDefault(tenant)
	if s.stopping() {
		return closedEvents(), func() {}
	}
	events, cancel := s.runs.Subscribe(ctx, tenant, sessionID)
	if relay := s.cfg.WatchRelay; relay != nil {
		unwatch, unsubscribe := s.watch(ctx, relay, tenant, sessionID), cancel
		cancel = func() { unwatch(); unsubscribe() }
	}
	sub := &subscription{cancel: cancel}
	if !s.subs.add(s, sub) {
		sub.close() // Stop began meanwhile (and may have swept already)
		return events, func() {}
	}
	return events, func() {
		s.subs.remove(sub)
		sub.close()
	}
}

// stopping reports whether the server's shutdown began (s.closing).
func (s *Server) stopping() bool {
	select {
	case <-s.closing:
		return true
	default:
		return false
	}
}

// closedEvents is a closed event channel: the subscription of a
// stopped runtime.
func closedEvents() <-chan runtime.Event {
	ch := make(chan runtime.Event)
	close(ch)
	return ch
}

// subscription is one channel Subscribe gave out: close ends it (the
// Broker closes its channel, the WatchRelay stops announcing it) once,
// whether the subscriber's cancel or Stop calls it first.
type subscription struct {
	once   sync.Once
	cancel func()
}

func (c *subscription) close() { c.once.Do(c.cancel) }

// subscriptionSet holds the subscriptions Subscribe gave out on a
// server and not yet cancelled, which its shutdown closes. The zero
// value is ready.
type subscriptionSet struct {
	mu sync.Mutex
	m  map[*subscription]struct{}
}

// add registers sub unless s is stopping (then it reports false). The
// check is under the set's lock, which the shutdown's sweep takes after
// closing s.closing: a subscription is either swept or refused, never
// left open.
func (set *subscriptionSet) add(s *Server, sub *subscription) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	if s.stopping() {
		return false
	}
	if set.m == nil {
		set.m = map[*subscription]struct{}{}
	}
	set.m[sub] = struct{}{}
	return true
}

// remove unregisters sub.
func (set *subscriptionSet) remove(sub *subscription) {
	set.mu.Lock()
	defer set.mu.Unlock()
	delete(set.m, sub)
}

// closeAll closes every subscription and unregisters them.
func (set *subscriptionSet) closeAll() {
	set.mu.Lock()
	subs := set.m
	set.m = nil
	set.mu.Unlock()
	for sub := range subs {
		sub.close()
	}
}

// Run returns a run record (adapter.RuntimeInspector). Tenant "" is
// DefaultTenant, as for Submit.
func (s *Server) Run(ctx context.Context, tenant, runID string) (*runtime.Run, error) {
	return s.runs.Store().Run(ctx, tenantOrDefault(tenant), runID)
}

// Events returns a run's or a session's events
// (adapter.RuntimeInspector). req.Tenant "" is DefaultTenant, as for
// Submit.
func (s *Server) Events(ctx context.Context, req runtime.EventsRequest) ([]runtime.Event, error) {
	req.Tenant = tenantOrDefault(req.Tenant)
	return s.runs.Store().Events(ctx, req)
}

// Runs lists runs (adapter.RuntimeInspector). req.Tenant "" is
// DefaultTenant, as for Submit.
func (s *Server) Runs(ctx context.Context, req runtime.ListRunsRequest) (runtime.ListRunsResponse, error) {
	req.Tenant = tenantOrDefault(req.Tenant)
	return s.runs.Store().ListRuns(ctx, req)
}

// Cancel cancels a live or suspended run (adapter.RuntimeLifecycle), as
// POST /v1/runs/{id}/cancel does. A live run another server sharing the
// run store runs is cancelled through the CancelRelay (Config): the
// result then reports that the request was sent, and the run ends
// cancelled unless its turn ended first. Cancelling a suspended run
// waits for its session, at most Config.SessionWait: past it the cancel
// fails (an *Error, 503 invocation_cancelled, its cause
// chat.ErrSessionBusy), having cancelled nothing. Tenant "" is
// DefaultTenant, as for Submit.
func (s *Server) Cancel(ctx context.Context, tenant, runID string) (bool, error) {
	tenant = tenantOrDefault(tenant)
	run, err := s.runs.Store().Run(ctx, tenant, runID)
	if err != nil {
		return false, err
	}
	if run.Status == runtime.StatusSuspended && run.InvocationID != "" {
		return s.cancelSuspended(ctx, run)
	}
	if s.runs.Cancel(ctx, tenant, runID) {
		return true, nil
	}
	if c := s.cfg.CancelRelay; c != nil && run.Status == runtime.StatusStarted {
		if err := c.RequestCancel(ctx, tenant, runID); err != nil {
			return false, err
		}
		return true, nil
	}
	return false, nil
}

// Stop stops the runtime (adapter.RuntimeLifecycle) for an embedded
// server that is not Serve-ing (Serve stops on its context instead): new
// turns are refused with ErrStopped, turns in flight may end until ctx
// is done, and those still running then are cancelled. A server New
// created its own run recorder for writes what is queued. Then every
// channel Subscribe gave out is closed (the turns' last events
// delivered first), and later subscriptions are closed channels. It is
// idempotent.
func (s *Server) Stop(ctx context.Context) error {
	s.ready.Store(false)
	s.refusing.Store(true) // every surface refuses new turns (503), as Submit does
	s.closeOnce.Do(func() { close(s.closing) })
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.runs.CancelAll(context.Background())
		t := time.NewTimer(5 * time.Second)
		select {
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
	var err error
	if s.ownRuns {
		if ferr := s.runs.Flush(context.WithoutCancel(ctx)); ferr != nil {
			err = fmt.Errorf("server: stop: %w", ferr)
		}
	}
	// The SSE streams ended on s.closing; the subscriptions of embedded
	// callers end now, their turns' events delivered.
	s.subs.closeAll()
	return err
}

func chatSignal(sig *adapter.Signal) chat.Signal {
	return chat.Signal{SignalID: sig.SignalID, InvocationID: sig.InvocationID, Payload: graph.Update(sig.Payload), RequestID: sig.RequestID}
}
