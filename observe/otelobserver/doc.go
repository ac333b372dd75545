// Package otelobserver maps Armature graph events onto OpenTelemetry spans
// (OpenArmature observability §4–§7).
//
// An [Observer] is registered on a graph (or one invocation) with
// [graph.InvocationEvents] and driven by the engine's strictly serial event
// delivery (the observer-driven lifecycle of §6):
//
//   - each invocation is one "openarmature.invocation" span, opened by the
//     started [graph.InvocationEvent] and closed by the completed one,
//     carrying openarmature.invocation_id, openarmature.graph.entry_node,
//     openarmature.graph.spec_version, openarmature.implementation.name /
//     .version and openarmature.outcome;
//   - each node attempt is one span named after the node (§4.5), opened by
//     its started event and closed by its completed or suspended event,
//     keyed by (namespace, attempt_index, fan_out_index_chain,
//     branch_name_chain); a node inside a subgraph, fan-out instance or
//     branch is a child of the enclosing dispatch node's span, an
//     outermost node a child of the invocation span (fan-out instance and
//     branch dispatch spans are not synthesized);
//   - every span carries openarmature.correlation_id, and
//     openarmature.session_id when the invocation is session-bound (§5.6);
//   - status follows §4.2: OK for completed nodes; ERROR with the error
//     category as description, openarmature.error.category and an
//     exception event for failures; the logical SUSPENDED status is OK plus
//     openarmature.outcome="suspended" on the suspending node's span (which
//     also gets the §5.8 openarmature.suspension.* attributes, see
//     [SuspensionAttributes]) and on the invocation span.
//
// Span timestamps are the events' Time, so asynchronous delivery does not
// skew them. Spans still open when their invocation completes (the
// enclosing dispatches of a suspending node) are ended with it. The
// observer only uses the TracerProvider it is given and never touches the
// OTel global provider.
//
// Log correlation (§7) is [LogHandler], an slog.Handler wrapper that adds
// openarmature.invocation_id, openarmature.correlation_id and
// openarmature.session_id to records logged with an invocation context.
package otelobserver
