package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/runtime"
)

// The run inspector and the event stream:
//
//	GET  /v1/runs/{id}                 a run record
//	GET  /v1/runs/{id}/events          its events, ?after=<event id>&limit=<n>
//	POST /v1/runs/{id}/cancel          cancel a live or suspended run → {"cancelled": bool}
//	GET  /v1/sessions/{id}/runs        the session's runs, ?page_token=&page_size=<n>
//	GET  /v1/sessions/{id}/events      server-sent events of the session
func (s *Server) runRoutes() {
	s.handle("GET /v1/runs/{id}", s.getRun)
	s.handle("GET /v1/runs/{id}/events", s.getRunEvents)
	s.handle("POST /v1/runs/{id}/cancel", s.cancelRun)
	s.handle("GET /v1/sessions/{id}/runs", s.listRuns)
	s.handle("GET /v1/sessions/{id}/events", s.streamEvents)
}

func runID(r *http.Request) (string, error) {
	id := r.PathValue("id")
	if !validID(id) {
		return "", badRequest("invalid run id")
	}
	return id, nil
}

func (s *Server) storeErr(err error, what string) error {
	switch {
	case errors.Is(err, runtime.ErrNotFound):
		return notFound(what)
	case errors.Is(err, runtime.ErrInvalidRequest):
		return badRequest("invalid request: %s", what)
	}
	return err
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	run, err := s.Run(r.Context(), tenantOf(r), id)
	if err != nil {
		return s.storeErr(err, "run")
	}
	run.Tenant = ""
	writeJSON(w, http.StatusOK, run)
	return nil
}

func afterParam(r *http.Request) (int64, error) {
	v := r.URL.Query().Get("after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, badRequest("after must be an event id")
	}
	return n, nil
}

// countParam reads the optional query parameter name, a count from 1 to
// most (0 when it is absent: the store's default).
func countParam(r *http.Request, name string, most int) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, badRequest("%s must be a number from 1 to %d", name, most)
	}
	return n, nil
}

// getRunEvents answers a run's events after ?after= (exclusive), at most
// ?limit= of them (default runtime.DefaultEventsLimit, at most
// runtime.MaxEventsLimit): a client reads a run with more by asking
// again after the last one it got.
func (s *Server) getRunEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	after, err := afterParam(r)
	if err != nil {
		return err
	}
	limit, err := countParam(r, "limit", runtime.MaxEventsLimit)
	if err != nil {
		return err
	}
	tenant := tenantOf(r)
	if _, err := s.Run(r.Context(), tenant, id); err != nil {
		return s.storeErr(err, "run")
	}
	evs, err := s.Events(r.Context(), runtime.EventsRequest{Tenant: tenant, RunID: id, AfterID: after, Limit: limit})
	if err != nil {
		return s.storeErr(err, "events")
	}
	for i := range evs {
		evs[i].Tenant = ""
	}
	writeJSON(w, http.StatusOK, map[string]any{"events": nonNil(evs)})
	return nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) error {
	id, err := runID(r)
	if err != nil {
		return err
	}
	if err := discardBody(r); err != nil {
		return err
	}
	cancelled, err := s.Cancel(r.Context(), tenantOf(r), id)
	if err != nil {
		return s.storeErr(err, "run")
	}
	writeJSON(w, http.StatusAccepted, map[string]bool{"cancelled": cancelled})
	return nil
}

// cancelSuspended ends a suspended run's turn without resuming it
// (chat.Harness.CancelSuspended: its signal then answers
// harness_signal_correlation_failed) and records that as a child run,
// like a resumed turn, that ends cancelled. It reports false when the
// turn no longer awaits its signal (resumed, superseded, cancelled), and
// fails (sessionBusy) when another turn held the session for longer than
// the session wait: nothing was cancelled, and the cancel can be sent
// again.
func (s *Server) cancelSuspended(ctx context.Context, run *runtime.Run) (bool, error) {
	a := s.agents[run.AgentID]
	if a == nil {
		a = s.def
	}
	if err := a.Chat.CancelSuspended(ctx, storeKey(run.Tenant, run.SessionID), run.InvocationID, s.lockWait); err != nil {
		if errors.Is(err, chat.ErrSessionBusy) {
			return false, sessionBusy(err)
		}
		if ctx.Err() != nil {
			return false, err // its client left while it waited: nothing was cancelled (499)
		}
		if !errors.Is(err, errcat.HarnessSignalCorrelationFailed) {
			s.log.WarnContext(ctx, "server: cancelling a suspended run failed", "run_id", run.ID, "error", err)
		}
		return false, nil
	}
	// (The web page of earlier builds told a run that closed its
	// approval unanswered by this reason's start and supersededReason's:
	// they stay as they are, for its cached copies.)
	s.recordResolution(ctx, a, run, runtime.CauseApprovalCancelled, "cancelled while awaiting approval")
	return true, nil
}

// sessionBusy is the failure of a request that waited for its session
// longer than the server's session wait (chat.ErrSessionBusy) and did
// nothing: 503 invocation_cancelled with Retry-After, as the OpenAI
// endpoints answer a turn that found its session busy.
func sessionBusy(err error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Code: string(errcat.InvocationCancelled), RetryAfter: retryAfterSeconds, Err: err,
		Message: "another turn held the session for longer than the server's session wait; nothing was done, try again"}
}

// recordResolution records how a suspended run ended without being
// resumed: a run of its own, its parent the suspended run, cancelled
// for cause with reason (a client reading the suspended run finds it
// among the runs naming it parent, as it finds a resumed turn's).
func (s *Server) recordResolution(ctx context.Context, a *Agent, run *runtime.Run, cause runtime.CancelCause, reason string) {
	turn, tctx, err := s.runs.Begin(context.WithoutCancel(ctx), runtime.BeginRequest{Tenant: run.Tenant, SessionID: run.SessionID,
		AgentID: a.ID, ParentID: run.ID, CorrelationID: correlationOf(ctx), Adapter: a.backend()})
	if err != nil {
		s.log.WarnContext(ctx, "server: recording a run failed", "error", err)
		return
	}
	turn.Settle() // it writes nothing to the session: a delete purges it with the run it resolves
	if err := turn.CancelledFor(tctx, cause, reason); err != nil {
		s.log.WarnContext(ctx, "server: recording a run's end failed", "run_id", turn.ID(), "error", err)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ackFlushWait)
	defer cancel()
	_ = turn.Flush(fctx)
	s.purgeOrphan(ctx, turn, false) // the suspension's conversation was deleted meanwhile
}

// supersededReason is the reason recorded for a suspended run a new
// message superseded.
const supersededReason = "superseded: the user sent a new message instead of answering the approval request"

// endSuperseded records the end of the suspended runs a turn's message
// superseded (chat.Turn.SupersededInvocations: a suspended turn's
// invocation id is its run's id), as a cancelled approval's is.
func (s *Server) endSuperseded(ctx context.Context, tenant string, a *Agent, invocations []string) {
	for _, id := range invocations {
		run, err := s.runs.Store().Run(ctx, tenant, id)
		if err != nil || run.Status != runtime.StatusSuspended {
			continue
		}
		s.recordResolution(ctx, a, run, runtime.CauseSuperseded, supersededReason)
	}
}

// listRuns answers a page of the session's runs, newest first: ?page_size=
// of them (default runtime.DefaultPageSize, at most runtime.MaxPageSize),
// from ?page_token= (a previous page's next_page_token).
func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	tok, err := pageToken(r)
	if err != nil {
		return err
	}
	size, err := countParam(r, "page_size", runtime.MaxPageSize)
	if err != nil {
		return err
	}
	resp, err := s.Runs(r.Context(), runtime.ListRunsRequest{Tenant: tenantOf(r), SessionID: id, PageToken: tok, PageSize: size})
	if err != nil {
		return s.storeErr(err, "page token")
	}
	for i := range resp.Runs {
		resp.Runs[i].Tenant = ""
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": nonNil(resp.Runs), "next_page_token": resp.NextPageToken})
	return nil
}

// sseHeartbeat is how often an idle stream sends a comment line.
const sseHeartbeat = 15 * time.Second

// streamEvents serves the session's runtime events as server-sent
// events: every event of every run of the session — turn starts, token
// deltas, tool progress, node completions, outcomes, including the
// outcome of a turn resumed by a signal (runtime.request.completed with
// its parentRequestId), which is the listener callback of the chat
// harness. Each frame is "id: <event id>", "event: <type>", "data:
// <event JSON>". A client that reconnects with Last-Event-ID (or
// ?after=) first gets the events it missed from the store.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request) error {
	id, err := sessionID(r)
	if err != nil {
		return err
	}
	after, err := afterParam(r)
	if err != nil {
		return err
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return badRequest("Last-Event-ID must be an event id")
		}
		after = n
	}
	if r.Method == http.MethodHead {
		// The stream's headers, not a stream: a HEAD holds no stream
		// slot and reads nothing.
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	tenant := tenantOf(r)
	release, err := s.streams.acquire(r.Context(), tenant)
	if err != nil {
		return err
	}
	defer release()
	// Subscribing brings the session's turn in flight live: the replay
	// below has its events so far, the subscription the rest.
	live, cancel := s.Subscribe(r.Context(), tenant, id)
	defer cancel()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev runtime.Event) error {
		ev.Tenant = ""
		data, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, data); err != nil {
			return err
		}
		return rc.Flush()
	}
	if err := rc.Flush(); err != nil {
		return nil
	}
	if after > 0 && !s.knownEventID(r.Context(), tenant, id, after) {
		// An id this session's stream never had (or whose events are
		// gone): never a stream that stays silent. The error event
		// resets the client's last event id (an empty "id:"), so an
		// EventSource reconnects and replays from the start.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(w, "id:\nevent: error\ndata: {\"code\":%q,\"message\":\"Last-Event-ID %d is not an event of this session's stream; reconnect without it to replay from the start\"}\n\n",
			CodeLastEventIDUnknown, after)
		_ = rc.Flush()
		return nil
	}
	// catchUp sends what the store holds after the last event sent; false
	// ends the stream (headers are out: the client reconnects).
	catchUp := func() bool {
		for {
			evs, err := s.runs.Store().Events(r.Context(), runtime.EventsRequest{Tenant: tenant, SessionID: id, AfterID: after})
			if err != nil {
				return false
			}
			for _, ev := range evs {
				if err := send(ev); err != nil {
					return false
				}
				after = ev.ID
			}
			if len(evs) < runtime.DefaultEventsLimit {
				return true
			}
		}
	}
	// With other servers writing the store (EventNotifier), every
	// notice, local or remote, is a cue to read what is new: the store
	// numbers events in commit order, so reading after the last one sent
	// misses none, whichever server stored it.
	var wake <-chan struct{}
	if s.cfg.EventNotifier != nil {
		w, unwake := s.wakes.add(tenant, id)
		defer unwake()
		wake = w
	}
	// Replay what the client missed, then go live; events published
	// while replaying are skipped by id.
	if !catchUp() {
		return nil
	}
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	ctx := r.Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil // shutting down: the client reconnects elsewhere or later
		case ev, ok := <-live:
			if !ok {
				return nil // dropped for falling behind: the client reconnects and replays
			}
			if ev.ID <= after {
				continue
			}
			if wake != nil {
				if !catchUp() {
					return nil
				}
				continue
			}
			if err := send(ev); err != nil {
				return nil
			}
			after = ev.ID
		case <-wake:
			if !catchUp() {
				return nil
			}
		case <-heartbeat.C:
			_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := io.WriteString(w, keepAliveFrame); err != nil || rc.Flush() != nil {
				return nil
			}
		}
	}
}

// knownEventID reports whether after can resume the session's stream:
// the session holds the event with that id. Events are
// stored before they are published, so an id a client received is
// there unless retention removed the session's events since.
func (s *Server) knownEventID(ctx context.Context, tenant, sessionID string, after int64) bool {
	evs, err := s.runs.Store().Events(ctx, runtime.EventsRequest{Tenant: tenant, SessionID: sessionID, AfterID: after - 1, Limit: 1})
	// The event itself must be the session's: an id between two of its
	// events is another session's (or one a delete or retention
	// removed). A failed read is not the client's fault: stream.
	return err != nil || (len(evs) > 0 && evs[0].ID == after)
}

// RecoverRuns reconciles the runs a previous process left in status
// started (runtime.Recorder.Reconcile): the turn of each was recorded by
// the chat harness under its run's record key (RunRecordKeyPrefix + the
// run id) in the same transaction as its session write, so a run whose
// turn committed ends as its turn did — completed with its replies, or
// suspended on its invocation — and any other run fails with category
// run_interrupted. Call it once at startup, before serving; it needs no
// subscriber and reads only the session store. A run whose session
// store read fails stays started, and the error is returned after the
// other runs are reconciled.
func (s *Server) RecoverRuns(ctx context.Context) (runtime.Reconciled, error) {
	return s.runs.Reconcile(ctx, s.resolveRun)
}

// RecoverAbandonedRuns is RecoverRuns for the runs of other replicas
// that are gone (runtime.Recorder.ReconcileAbandoned), safe to call
// while serving: on a database shared by replicas, a replica killed
// mid-turn leaves runs that the survivors end as their turns ended.
// armature serve calls it periodically on PostgreSQL.
func (s *Server) RecoverAbandonedRuns(ctx context.Context) (runtime.Reconciled, error) {
	return s.runs.ReconcileAbandoned(ctx, s.resolveRun)
}

// resolveRun tells what became of a run's turn from the outcome the chat
// harness recorded with the turn's session write.
func (s *Server) resolveRun(ctx context.Context, run runtime.Run) (runtime.Resolution, error) {
	a := s.agents[run.AgentID]
	if a == nil {
		a = s.def // the marks live in the shared session store
	}
	out, err := a.Chat.Recorded(ctx, storeKey(run.Tenant, run.SessionID), runRecordKey(run.ID))
	if errors.Is(err, chat.ErrNotRecorded) {
		return runtime.Resolution{}, nil
	}
	if err != nil {
		return runtime.Resolution{}, err
	}
	res, _ := runEnding(out)
	return res, nil
}
