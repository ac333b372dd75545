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
//     branch_name_chain); an outermost node is a child of the invocation
//     span;
//   - each subgraph node run is one span named after the node (§4.3,
//     §5.3), driven by the engine's [graph.SubgraphEvent] pair, parent of
//     the inner nodes' spans;
//   - a fan-out node's span carries openarmature.fan_out.item_count /
//     .concurrency (0 for unbounded) / .error_policy, a parallel-branches
//     node's openarmature.parallel_branches.branch_count / .error_policy;
//     under it each fan-out instance (named after the fan-out node, with
//     openarmature.node.fan_out_index and
//     openarmature.fan_out.parent_node_name, §5.4) and each branch (named
//     after the branch, with openarmature.node.branch_name and
//     openarmature.parallel_branches.parent_node_name, §5.7) gets a span
//     synthesized on its first inner event and ended with the dispatch
//     node (§6), ERROR when the last of its direct children failed;
//   - every span carries openarmature.correlation_id,
//     openarmature.session_id when the invocation is session-bound, and
//     openarmature.user.<key> for each caller-supplied invocation metadata
//     entry in scope (§5.6, [graph.WithMetadata]); an augmentation
//     ([graph.SetInvocationMetadata], delivered as a
//     [graph.MetadataEvent]) also updates the spans still open in the
//     augmenting context and its call-stack ancestors (§3.4), never a
//     shared fan-out / parallel-branches node span or a sibling;
//   - subgraphs and fan-outs named in Config.DetachedSubgraphs /
//     DetachedFanOuts are traced in detached mode (§4.4): each run or
//     instance in a trace of its own, rooted in an invocation span with
//     the same invocation id, linked from the dispatching span;
//   - status follows §4.2: OK for completed nodes; ERROR with the error
//     category as description, openarmature.error.category and an
//     exception event for failures (for node, subgraph and unit spans the
//     category is the derived category of the error's cause chain,
//     pipeline-utilities §6.3, so a categorized error raised by a node
//     keeps its category; an uncategorized one is node_exception); the logical SUSPENDED status is OK plus
//     openarmature.outcome="suspended" on the suspending node's span (which
//     also gets the §5.8 openarmature.suspension.* attributes, see
//     [SuspensionAttributes]) and on the invocation span.
//
// LLM calls made with [llm.Complete] from a node, and tool executions run
// through [graph.CallTool] / [graph.StartTool], reach the observer as the
// typed call events of graph-engine §6 and become spans too (§5.5):
//
//   - one "openarmature.llm.complete" span per wire attempt (several under
//     llm-provider §7.1 call-level retry, with openarmature.llm.attempt_index
//     and .retry_reason), a child of the calling node's span or, for a call
//     made by middleware around the node, of the nearest enclosing wrapper
//     (fan-out instance, branch, subgraph, invocation), resolved from the
//     event's lineage chains; it carries openarmature.llm.model,
//     .finish_reason, .usage.* (omitting unreported counters), the
//     ungated tool-call identity projections (.output.tool_calls.count /
//     .names / .ids) and, unless Config.DisableGenAISemconv, the gen_ai.*
//     request parameters and response attributes and the cache
//     attributes; Config.DisableLLMSpans suppresses it;
//   - payload attributes (input messages with inline images redacted,
//     output content and tool calls, request extras, tool arguments and
//     results) only with Config.CaptureProviderPayload, each cut to
//     Config.PayloadMaxBytes by the §5.5.5 contract ([Truncate]); so too
//     a failure's error text: without it, every span's exception event
//     (tool, LLM, embedding, rerank, node, subgraph, invocation) has the
//     error's type and a fixed exception.message ([MsgToolFailed],
//     [MsgCallFailed], [MsgNodeFailed], [MsgInvocationFailed]), since an
//     error's text may quote the payload;
//   - the LLM span also carries the active prompt's identity
//     (openarmature.prompt.name / .version / .label / .template_hash /
//     .rendered_hash / .group_name) and its declared token budget
//     (openarmature.prompt.token_budget.*), and, when a bound could be
//     evaluated against the usage, openarmature.llm.token_budget.exceeded
//     (§5.5.15; a call over budget is also logged at WARN on
//     Config.Logger);
//   - one "openarmature.tool.call" span per tool execution (§5.5.11);
//   - one "openarmature.embedding.complete" span per embedding call and
//     one "openarmature.rerank.complete" span per rerank call made with
//     retrieval.Embed / retrieval.Rerank (§5.5.8, §5.5.13): gen_ai.system,
//     request and response model, response id, input tokens when
//     reported, the openarmature.embedding.* / openarmature.rerank.*
//     counts, and the payload attributes under CaptureProviderPayload;
//     Config.DisableLLMSpans does not gate them;
//   - with Config.EnableMetrics, the §11 histograms
//     openarmature.gen_ai.client.token.usage and .operation.duration
//     (operations chat, embeddings and rerank) and the token-budget
//     instruments openarmature.gen_ai.client.token_budget.exceeded and
//     .utilization on Config.MeterProvider.
//
// Span timestamps are the events' Time, so asynchronous delivery does not
// skew them. A node's span is started in the SDK only when something
// needs it while the node runs (a subgraph, fan-out instance or branch
// span beneath it, a log record naming it), otherwise as the node ends,
// with its outcome among its start attributes; the spans of the node's
// LLM, tool, embedding and rerank calls are then started and ended under
// it. The exported spans are the same either way (which costs the SDK
// fewer copies of their attributes), but a node's call spans reach the
// span processors when the node ends rather than as each call ends.
// Spans still open when their invocation completes (the
// enclosing dispatches of a suspending node) are ended with it, and so
// are those of an invocation whose delivery a [graph.DrainTimeout]
// abandoned (its observer context is cancelled; a [graph.Synchronous]
// observer's is not, and it renders the rest of the invocation), without
// a status. The
// observer keeps each invocation's state by invocation id and delivery,
// so concurrent invocations sharing an id stay apart, and finds open
// spans by lineage in constant time (a fan-out renders in linear time).
// The
// observer only uses the TracerProvider it is given and never touches the
// OTel global provider.
//
// Given OpenTelemetry's no-op TracerProvider (noop.NewTracerProvider), an
// Observer renders no spans ([Observer.Spans] reports false): until
// [Observer.LogHandler] is called it keeps no state per invocation and
// handles only the typed call events, for their metrics and token-budget
// warnings. That is quick and never blocks, so armature serve registers
// such an observer [graph.Synchronous] when it exports no traces: its
// turns then run without a delivery goroutine.
//
// Log correlation (§7) is [LogHandler], an slog.Handler wrapper that adds
// openarmature.invocation_id, openarmature.correlation_id,
// openarmature.session_id and openarmature.user.* to records logged with
// an invocation context, and [Observer.LogHandler], which also adds the
// trace_id and span_id of the span active where the record was logged.
package otelobserver
