// Package graph is Armature's graph engine: the OpenArmature graph-engine
// capability in Go.
//
// A graph is a set of named nodes over a typed state. Each node receives
// the current [State] and returns a partial [Update]; the engine merges the
// update into the state through each field's [Reducer], follows the node's
// single outgoing edge (static, or conditional on the post-update state),
// and stops at [End]. A node may itself be a compiled graph (a subgraph)
// with its own schema, connected to its parent by input and output
// projections.
//
// # State
//
// State is described by a [Schema] of fields. Application code declares
// typed handles once and reads and writes through them, so node bodies are
// checked by the compiler:
//
//	var (
//		Count = graph.NewField[int]("count")
//		Log   = graph.NewListField[string]("log", graph.Append)
//	)
//	schema := graph.MustSchema(Count, Log)
//
// Graphs described at run time (workflow files, the conformance fixtures)
// use [NewDynamicField] with a [Type] parsed by [ParseType]. Both kinds of
// state serialize to JSON ([State.MarshalJSON], [Schema.DecodeState]).
//
// States are immutable snapshots. Appending reducers share storage between
// snapshots safely, so a merge costs O(len(update)), not O(len(list)): a
// long chat history is not copied on every turn.
//
// # Building and running
//
// A [Builder] collects nodes, edges and the entry node; [Builder.Compile]
// checks the graph (no entry, unreachable nodes, dangling edges, multiple
// outgoing edges, projection mistakes, reducer configuration) and returns an
// immutable [Graph] or a categorized *[CompileError]. [Graph.Invoke] runs it
// and returns a [Result] whose Status is Completed or Errored (Suspended is
// reserved for the suspension capability).
//
// Every failure carries a spec category from package errcat: a node that
// returns an error fails with node_exception (the node's error stays
// reachable with errors.Is / errors.As), a failing edge with
// edge_exception or routing_error, a bad update with reducer_error or
// state_validation_error. The recoverable state is on the *[NodeError] and
// on the Result.
//
// Each invocation has an invocation id and a correlation id, caller
// supplied ([WithInvocationID], [WithCorrelationID]) or minted as UUIDv4s.
// Both are carried in the context: [InvocationID], [CorrelationID] and
// [CurrentNode] work anywhere below a node body.
//
// # Observers
//
// Observers ([Observer]) receive a [NodeEvent] when each node attempt starts
// and completes. They attach to a compiled graph ([Graph.AddObserver]: every
// invocation, including runs as a subgraph) or to one invocation
// ([WithObserver]), optionally for some phases only ([Phases]).
//
// Delivery never slows the graph: each invocation with observers has an
// unbounded queue, delivered by one of the graph's delivery goroutines
// at a time (a bounded pool whose idle goroutines wait briefly for the
// next events before they exit), and Invoke returns without waiting for
// it. Delivery is strictly serial, in a fixed order per event:
// graph-attached observers from the outermost graph inward, then the
// invocation's own. A failing or panicking observer is logged and
// isolated. [Graph.Drain] waits for delivery (optionally with a timeout that
// abandons what is left); [Graph.DrainEventsFor] waits for one invocation's
// events emitted so far and is safe to call from inside a node.
//
// Calls made from a node are reported as typed call events (graph-engine
// §6), delivered on the same queue: [LLMCompletionEvent],
// [LLMFailedEvent] and [LLMTokenEvent] for [llm.Complete];
// [EmbeddingEvent] / [EmbeddingFailedEvent] and [RerankEvent] /
// [RerankFailedEvent] for retrieval.Embed and retrieval.Rerank;
// [ToolCallEvent] / [ToolCallFailedEvent] for [CallTool] / [StartTool].
// Each carries the calling node's identity and lineage ([CallSourceOf])
// and, for model and retrieval calls, the prompt-context the call was
// made under (the active prompt, its group and token budget: see
// [llm.WithActivePrompt] and prompt.Activate).
//
// # Middleware
//
// [Middleware] wraps node dispatch (pipeline-utilities §2): per node with
// [WithMiddleware], per graph with [Builder.Use] (outside the per-node
// chain), outermost first. A middleware can transform the state it passes
// on, replace the update, short-circuit, recover from errors or call next
// again. It never crosses a subgraph boundary: a parent's middleware sees a
// subgraph node as one dispatch, and a subgraph's middleware wraps only its
// own nodes.
//
// Three canonical middleware ship with the package:
//
//   - [NewRetry] re-runs the chain on retryable failures
//     ([DefaultRetryable]: transient provider categories, through one
//     node_exception carrier) with full-jitter exponential backoff. Every
//     attempt produces its own event pair; [AttemptIndex] tells the
//     attempt, and the innermost retry wins.
//   - [NewTiming] reports each dispatch's duration, outcome and failure
//     category, measured on the monotonic clock.
//   - [NewFailureIsolation] turns a failure into a degraded update and a
//     [FailureIsolationEvent]. Compose it outside retry: retry transients,
//     degrade on exhaustion.
//
// Failures are classified through engine carriers with
// errcat.CauseChain and errcat.Derived (pipeline-utilities §6.4).
//
// # Fan-out and parallel branches
//
// [Builder.AddFanOut] runs a subgraph once per item of a list field (or a
// count of times), up to a concurrency bound, on fresh instance states,
// and merges each instance's collect field into a target field in item
// order, whatever order the instances finish in. [Builder.AddParallelBranches]
// runs heterogeneous branches — subgraphs with their own schemas, or inline
// callables over the parent state, each optionally conditional — at once
// and merges their contributions in declaration order.
//
// Both start their units in order, either fail fast (cancelling the rest
// through the context and failing the node with the first error) or
// collect (recording failures in an errors field), accept middleware
// around each unit (retry a whole instance or branch), and tag the events
// of everything inside them with fan-out indices or branch names and the
// full lineage chains. Every goroutine they start is waited for before the
// node returns.
//
// # Sessions and suspension
//
// [WithSessions] connects a graph to a session store: an invocation with
// [WithSessionID] starts from the stored session and saves it at End (see
// package session). A warm turn revalidates its cached copy instead of
// re-reading the history and persists only what changed. The cache is
// bounded by count and by the sessions' stored size
// ([SessionConfig].CacheSize, CacheBytes); several graphs can share one
// budget through a [SessionCache].
//
// A session outside the cache is read from the store. [SessionConfig].Tail
// (or the [WithSessionTail] hint an agent with a window declares) makes
// that read take only the last items of append-only list fields — a
// cold turn then costs the tail, not the whole history. The state then
// holds the tail; [SessionListOffset] and [Result].SessionOffsets (and
// [SessionInfo].Offsets for the session hooks) count the items before
// it, so that persisted indices stay absolute, and [SessionWholeState]
// gives a node the whole history when it needs it. Turns append to the
// partial list as to a whole one; a write that would replace a partial
// list first reads the left-out items back (failing with
// session_write_conflict when they are gone). Resumed runs,
// [Graph.SessionState] and graphs with a checkpointer always load whole,
// so a resumed run sees the whole history.
//
// [Graph.DeleteSession] deletes a session for good: its record and the
// paused and checkpoint records of its invocations. What nodes keep of a
// session in memory outside its state (a cache keyed by the session id,
// as an agent's index of the session's tool-call ids) is registered at
// compile time with [WithSessionForget], and the delete drops it, for the
// graph and every graph it runs as a subgraph: a session created again
// under the same id starts with nothing of the deleted one.
//
// A node can pause the invocation until a signal arrives with [Suspend]:
// the invocation returns a Suspended [Result] carrying the signal
// descriptor, the paused state is persisted (with the session, atomically
// as far as a reader can tell: never a paused record without its session
// state; the record names how many items of each append-only session list
// the state holds, which the session holds, instead of holding them, so
// that a suspension costs what its turn adds, not the history), and
// [Graph.Resume] with the signal's payload continues after the
// suspending node — in this process or, with a durable
// [WithCheckpointStore], in any other. Suspend records the suspension in
// the node's context and unwinds the node body and its middleware with a
// private panic the engine recovers, so user code cannot swallow it and
// middleware post-phases do not run. Suspensions propagate out of
// subgraphs, fan-out instances and parallel branches (cancelling their
// siblings).
//
// # Concurrency
//
// A compiled Graph is safe for concurrent use by any number of
// invocations. Within one invocation nodes run one at a time, except the
// instances of a fan-out and the branches of a parallel-branches node.
// Node functions, edge functions, middleware and custom reducers must not
// retain or modify the State values they receive.
package graph
