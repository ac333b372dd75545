// Package harness is the abstract harness of the OpenArmature harness
// capability: the layer between a deployment runtime (an HTTP server, an
// event consumer, a CLI) and a compiled graph.
//
// A [Harness] is sessioned or stateless, fixed at construction. Each
// inbound [Transmission] is classified deterministically into one
// dispatch [Path] — 3.0 stateless, 3.1 new session (the harness mints a
// UUIDv4 session id when none is given), 3.2 existing session, 3.3
// signal resume — and runs as one turn: one invocation or one resume.
// The [Outcome] is completed, errored or suspended:
//
//   - A suspended turn returns at once: the harness registers a signal
//     subscription with its [Coordinator] and never blocks on the turn.
//     A transmission carrying the signal later resumes it, on any worker
//     when the coordinator is a [StoreCoordinator] over the durable record
//     store every worker shares (the engine's paused record, written
//     atomically with the session, is the subscription).
//   - An errored turn carries its turn-boundary category — the derived
//     category of the error's cause chain, e.g. provider_unavailable
//     raised inside a node — and one of three [Bucket]s: session
//     terminating, retryable transient, user correctable. [BucketOf]
//     documents the table and how it settles the spec's inconsistencies.
//
// [Outcome.Response] renders the outcome transport-neutrally (completion
// response, error response with retry_safe / intervention_required /
// user_action_required flags, suspended acknowledgment). With
// Config.Tracer set, each turn runs inside an optional turn wrapper span
// carrying openarmature.session_id and, on resumes, the signal id.
//
// The chat harness (package chat) builds on this package; most
// applications use it instead.
//
// # Concurrency
//
// A Harness is safe for concurrent use. It does not serialize turns of
// one session: the chat harness does.
//
// # Example
//
//	h, err := harness.New(harness.Config{Graph: g})
//	out, err := h.Handle(ctx, harness.Transmission{SessionID: "conv-1", Input: in})
//	switch out.Status {
//	case graph.Suspended:
//		// later: h.Handle(ctx, harness.Transmission{
//		//	Signal: &harness.SignalRef{SignalID: "approval-1", SessionID: "conv-1"},
//		//	Payload: graph.Update{"approved": true}})
//	case graph.Errored:
//		log.Println(out.Category, out.Bucket)
//	}
package harness
