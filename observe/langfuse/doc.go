// Package langfuse maps Armature graph events onto Langfuse traces and
// observations (OpenArmature observability §8) and sends them to
// Langfuse's public ingestion API. It needs no Langfuse SDK and does not
// use OpenTelemetry.
//
// An [Observer] is registered on a graph (or one invocation) with
// [graph.InvocationEvents]; it consumes the same event stream as the OTel
// observer (otelobserver), and both may be attached:
//
//   - each invocation is a trace (no root observation wraps it): its id is
//     the invocation id's 32 hex digits for a UUID, else the first 16
//     bytes of its SHA-256 (Langfuse's create_trace_id, [TraceID]), the
//     raw id then also in metadata.invocation_id; its name is a label
//     ([Observer.Labeled]), a resolver (Config.TraceName) or the entry
//     node; its metadata carries correlation_id, entry_node,
//     spec_version, implementation_name / implementation_version and the
//     caller's invocation metadata as top-level keys; sessionId is the
//     bound session and userId the promoted "userId" metadata entry;
//     input and output follow the §8.4.1 decision tree (the
//     TraceInputFromState / TraceOutputFromState hooks, the raw states
//     with CaptureStatePayload, else the privacy-safe stub {entry_node,
//     correlation_id} / {final_node, status});
//   - each node attempt, subgraph run, fan-out instance and parallel
//     branch is a span observation, nested exactly as the OTel spans are
//     (lineage-keyed, units synthesized on their first inner event), with
//     metadata namespace, step, attempt_index, fan_out_index, branch_name,
//     subgraph_name, the fan_out_* / parallel_branches_* rows, the
//     correlation id and the caller metadata in scope (augmentations
//     reach the observations open on the augmenting path, §3.4); a
//     failure is level ERROR with its error category as statusMessage;
//   - each LLM call is one Generation observation (one per call, whatever
//     its retries) under the calling node: model, modelParameters, usage
//     (unreported counters omitted), metadata finish_reason, system,
//     response_model, response_id, and — with CaptureProviderPayload — the
//     input messages, the output and request_extras, capped by the §5.5.5
//     truncation contract ([Truncate]); the active prompt's identity is
//     metadata.prompt and, when it carries a Langfuse prompt reference
//     (ObservabilityEntities["langfuse_prompt"], a
//     [prompt.LangfusePromptRef] or a [PromptReference]), the generation
//     links to it; a token budget adds metadata.token_budget and
//     token_budget_exceeded and, exceeded, the WARNING level;
//   - tool executions are Tool observations, embedding calls Embedding
//     observations and rerank calls Retriever observations (§8.4.5–§8.4.7),
//     their payloads gated like the generation's;
//   - DetachedSubgraphs / DetachedFanOuts trace those units in traces of
//     their own (§8.5), referenced from the dispatching observation's
//     metadata.detached_child_trace_ids.
//
// Token events are not rendered. Observation times are the graph events'
// own; Config.Now (event envelopes) and Config.NewID (observation, event
// and detached trace ids) make the output deterministic.
//
// # Exporting
//
// The observer hands its events to an [Exporter] and never waits for the
// network. [Client] is the exporter for a real Langfuse (cloud or
// self-hosted): it batches events to POST {host}/api/public/ingestion
// with HTTP basic authentication (public key, secret key), from a
// background goroutine, with a bounded queue that drops and counts what
// overflows it rather than block, retries with exponential backoff on
// network errors, 429 and 5xx (honouring Retry-After), and
// [Client.Flush] / [Client.Shutdown] for the end of a process. Its
// configuration never logs or prints the secret key. The observer takes
// the client in either form of §8.9: a caller-constructed exporter
// (Config.Exporter, used as it is and never shut down by the observer), or
// credentials (Config.Client) from which it builds and owns one:
//
//	cfg, ok := langfuse.ClientConfigFromEnv() // LANGFUSE_PUBLIC_KEY, _SECRET_KEY, _HOST
//	if ok {
//		obs, err := langfuse.New(langfuse.Config{Client: cfg})
//		...
//		g.AddObserver(obs.Observe, graph.InvocationEvents())
//		defer obs.Shutdown(context.Background())
//	}
//
// [ClientConfig.PromptConfig] gives the same project's configuration to a
// Langfuse prompt backend (prompt.NewLangfuse).
//
// Package langfusetest is a fake ingestion API (an httptest server that
// checks the requests as Langfuse does and rebuilds the traces) and an
// in-memory recorder, for tests without a Langfuse account.
package langfuse
