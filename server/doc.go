// Package server is armature serve's HTTP layer over the chat harness:
// the chat REST API with server-sent events, health and readiness probes,
// Prometheus metrics, the OpenAI-compatible chat completions endpoint and
// the OpenHarness v1 endpoint, and the browser UI (package server/web) at
// / and /assets/ (public, like the probes: the page sends the token the
// user gives it; Config.DisableWebUI turns it off).
//
// Every route but /healthz, /readyz, /metrics and the UI's authenticates a bearer
// token (Config.Tokens) that names the caller's tenant; without tokens the
// server only listens on loopback and serves the tenant "default". A
// tenant's sessions are stored under "<tenant>/<session id>", so no
// request can name another tenant's session. Request bodies are limited
// (Config.MaxBodyBytes), connections have read, write and idle timeouts,
// malformed input gets a JSON error envelope ({"error": {"code",
// "message"}}) and nothing is stored, and errors never carry secrets or
// internal error text (the OpenAI paths use OpenAI's error shape
// instead, see below). The one deliberate exception is the diagnostic a
// user-correctable turn's reply quotes (harness-chat §10.3 requires it):
// the failure's own message, e.g. a provider's "context length exceeds
// maximum", with credentials redacted by the provider mappings.
//
// A turn runs detached from its HTTP request: a client that disconnects
// does not cancel it, and Serve's graceful shutdown waits for in-flight
// turns.
//
// # Limits
//
// Every input that reaches memory or the store is bounded, and exceeding
// a bound is a 4xx with a message naming it, before anything is stored:
//
//	request body                   Config.MaxBodyBytes (1 MiB)      413
//	request headers                64 KiB                           431
//	session id (path, body,        1-128 bytes of [A-Za-z0-9._:-]   400
//	  metadata.session_id, header)
//	message_id, signal_id,         256 bytes (chat.MaxIDLength)     400
//	  invocation_id
//	OpenHarness request_id,        256 bytes                        200, invalid_request
//	  correlation_id
//	agent, OpenAI model            128 bytes                        400
//	page_token                     1024 bytes                       400
//	X-Correlation-ID header        128 visible ASCII bytes          ignored beyond
//	event streams, turns           Config.MaxSSEStreams, MaxTurns   429 / 503
//	  (total and per tenant)
//	request body cut short         its Content-Length               400
//	request body sent too slowly   Config.ReadTimeout (30s)         408 request_timeout
//
// A method a served path does not take is 405 method_not_allowed with
// an Allow header (the catch-all route matches every method, so it
// tells a wrong method from an unserved path itself).
//
// Message content is bounded by the body limit; the session cache and
// the run records by size (see armature serve's --session-cache-bytes,
// --run-retention and --run-max-bytes).
//
// # Browser safety
//
// Before routing, every request passes three checks (see browser.go):
// its Host header must name the server (loopback names plus
// Config.AllowedHosts; any Host with tokens and no list; /healthz and
// /readyz exempt), else 421 misdirected_request — DNS rebinding reaches
// nothing; a browser request from another origin (Origin, or
// Sec-Fetch-Site cross-site/same-site without it, top-level navigations
// aside) is refused unless allowed by Config.AllowedOrigins, else 403
// forbidden_origin — the server's own origin always passes, and allowed
// origins get CORS headers and preflight answers; a POST, PUT, PATCH or
// DELETE with a body must be application/json, else 415
// unsupported_media_type. A 401 carries WWW-Authenticate: Bearer; the
// Authorization scheme is case-insensitive ("bearer" too). On an OpenAI
// path these errors, like all others there, take the OpenAI shape.
//
// # Runs and the event stream
//
// Every turn, on every surface, is recorded as a run (package runtime):
//
//	GET  /v1/runs/{id}             the run record
//	GET  /v1/runs/{id}/events      its events, ?after=<event id>&limit=<n> (1–10000, default 1000)
//	POST /v1/runs/{id}/cancel      cancel a live or suspended run → {"cancelled": bool}
//	GET  /v1/sessions/{id}/runs    the session's runs, ?page_token=&page_size=<n> (1–1000, default 50)
//	GET  /v1/sessions/{id}/events  server-sent events of the session (Last-Event-ID)
//	POST /v1/agents/{agent}/tools/{tool}  {"arguments", "session_id"?} → {"run_id", "session_id", "tool", "output", "error"?}
//
// A turn's run output is its outcome's: a completed turn's "replies"
// (with "finish_reason" and "usage" when it called a model), a suspended
// turn's model usage; once a tool answered in the turn, "failed_tools"
// lists the calls whose tool failed ([] when none did), which a tool
// message does not say. A run recorded without it (no tool answered, an
// earlier build, a run recovered after a crash) tells nothing: its
// agent.tool.result events do.
//
// The last is a direct tool request: an operator invokes one of the
// agent's declared tools (Agent.Gateway) without the model, for a tenant
// Config.DirectTools authorizes (403 forbidden otherwise); it is
// recorded as a run of the agent with runtime.tool.direct.started and
// runtime.tool.direct.completed events. A tool that needs approval is
// never called directly (403 approval_required, no run recorded). A
// call is bounded by Agent.ToolTimeout and Agent.MaxToolResultBytes; its
// start is durable before the tool runs; a cancel ends its run
// cancelled; a delete of its session while it runs purges its run once
// it ends.
//
// Backends. Every agent's turns run through its chat harness, whatever
// its backend (Agent.Backend, package adapter: the native agent graph,
// or an upstream framework's adapter wrapped by adapter.Compile), so
// ids, run records, events, approvals, cancellation and sessions are the
// server's alike. Every agent.* event carries the backend's adapter
// field; an adapter's artifacts are recorded as runtime.artifact.created
// events and listed under the run output's "artifacts"; an agent with a
// Workflow records runtime.workflow.started / completed; with
// Config.Narration, turns record runtime.progress.narration events. The
// Server also implements the four runtime interfaces of package adapter
// (Submit, Subscribe, Run / Events / Runs, Cancel / Stop) for callers
// that drive it without HTTP.
//
// Run records tell the truth across crashes:
//
//   - A turn is answered (the REST or OpenHarness response, the OpenAI
//     response or the end of its stream) only once its run record, with
//     its final status, is durable; and it runs only once its run's
//     start is. So every answered turn has its run with the right final
//     status, and every turn that committed has a run, even if the
//     process is killed right after.
//   - The chat harness records each turn's outcome under the key
//     RunRecordKeyPrefix + run id in the same transaction as the turn's
//     session write. At startup, [Server.RecoverRuns] (armature serve
//     calls it before serving) ends every run a crash left started as
//     its turn really ended: completed or suspended (with its replies or
//     invocation) if the turn committed, failed with category
//     run_interrupted if it did not. It reads only the session store and
//     needs no subscriber.
//   - Every turn runs streamed internally, whether or not its client
//     streams it, so its node, tool and text events are recorded as they
//     happen, in the order they happened: each agent.node.completed after
//     the tool and text events of that node and before those of the
//     next, and the turn's last one before its terminal event. (The
//     graph a backend adapter's agent runs on is the runtime's
//     scaffolding, adapter.Wraps: its turns record the node completions
//     the upstream reports, and none of the scaffolding's.) While
//     nobody watches the session, the text chunks between two other
//     events are recorded as one agent.output.delta; and when, besides,
//     the turn's client does not stream it (a REST or OpenHarness turn
//     answered whole, and every resume), the model is called without
//     streaming (chat.WithWholeText, chat.Signal.WholeText) and each
//     reply's text recorded whole, in the same place. A node that
//     renders a managed prompt (chat.ReportPrompt) records an
//     agent.prompt.resolved event naming the prompt, its version and
//     label and the content hashes: which prompt version the turn used.
//   - A subscriber to the session's event stream that joins in the
//     middle of a turn gets the turn's events so far, then the rest
//     live, each once (event ids and Last-Event-ID replay). A
//     Last-Event-ID the session's stream never had (above its newest
//     event, another session's, or removed by retention) ends the
//     stream with "id:" (which resets an EventSource's last id), "event:
//     error" and data {"code": "last_event_id_unknown", "message"}: the
//     client's reconnect replays from the start.
//   - With servers sharing one run store (Config.EventNotifier: armature
//     serve --database), a session's stream on any of them carries the
//     turns of all of them: every notice (a local event, or another
//     server's commit heard through the store) makes the stream read what
//     is new after the last event it sent, in the store's id order, which
//     is commit order; so a notice missed costs a delay, never an event,
//     and Last-Event-ID resumes on any server.
//
// The chat REST API:
//
//	POST   /v1/sessions                 {"session_id"?}            → 201 {"session_id", ...}
//	GET    /v1/sessions                 ?page_token=               → {"sessions": [...], "next_page_token"?}
//	GET    /v1/sessions/{id}            ?limit=&before=            → {"session_id", "version", "messages": [...], "message_offset", "message_count"}
//	DELETE /v1/sessions/{id}                                       → 204 (the history and run records)
//	POST   /v1/sessions/{id}/messages   {"content" | "message", "message_id"?, "agent"?}
//	POST   /v1/sessions/{id}/signals    {"signal_id" and/or "invocation_id", "payload", "agent"?, "request_id"?}
//
// A session is read with its whole history, or a page of it: ?limit=N
// answers the newest N messages (1–10000), ?before=I the page before
// the message at index I (?limit= of them, 100 by default). Every
// answer names the index of its first message (message_offset) and the
// history's length (message_count): a client shows the newest page,
// then pages back with ?before= the message_offset it has. A page is
// read as one from the store (session.Pager): it costs what it holds,
// wherever it stands in the history.
//
// A DELETE, like a turn and a cancel of a suspended run, waits for the
// session's running turn at most Config.SessionWait: past it, 503
// invocation_cancelled with Retry-After, having done nothing. A DELETE
// or cancel whose client leaves while it waits does nothing either, and
// is answered (and counted) 499 invocation_cancelled; a send or signal
// whose client leaves while it waits for its session answers its
// errored outcome (invocation_cancelled, retryable), as it would have.
//
// The agents of a workspace share a session: a send names its agent
// ("agent", an agent id or task hint; the default agent when absent). A
// signal resumes the turn of the agent that suspended it, whichever
// agent the session's later messages named; a signal that names an
// agent resumes only that agent's turn (404 for another's). A signal
// nothing awaits is 404 (harness_signal_correlation_failed: superseded,
// cancelled, deleted, another agent's), or 409 with that category when
// its approval was already decided and the decision took effect
// (chat.ErrDecisionTookEffect: the call ran or was refused; asking
// again would not undo or repeat it). Each
// served agent's graph is named after it and resumes only its own
// paused records (graph.ErrOtherGraph), so no surface can hand one
// agent's approval to another agent's upstream.
//
// A signal's "request_id" (at most 256 bytes) makes it idempotent, as a
// send's "message_id" does: a retransmission — a retry after a dropped
// connection, on any replica, before or after a restart — answers the
// recorded outcome of the turn the first one resumed ("replayed": true)
// and resumes nothing; while the first still runs, it waits for it. The
// same request_id with another decision (another payload or signal id)
// is refused, as a message_id with another message is: the errored
// outcome, category message_id_reused; on the Responses API, an
// Idempotency-Key sent again with the other decision is 400 with that
// code.
//
// A send carries the user's text ("content") or the user's message
// ("message": role user, text or content blocks such as images); any
// other role, or both fields, is a 400.
//
// A send or signal answers 200 with the turn's outcome: {"outcome":
// "completed", "replies": [...]}, {"outcome": "suspended", "signal":
// {"signal_id", "metadata"}, "pending_messages": [...]} or {"outcome":
// "errored", "error": {"bucket", "category", "retryable"}, "reply": {...}}.
//
// # OpenAI-compatible endpoint
//
//	POST /v1/chat/completions     {"model", "messages", "stream"?, "stream_options"?, "metadata"?}
//	GET  /v1/models               {"object": "list", "data": [{"id", "object": "model", ...}]}
//	GET  /v1/models/{model}
//
// model names the agent: an agent id or a Config.TaskHints key (GET
// /v1/models lists both; "" is the default agent); an unknown one is 404
// model_not_found. Sampling parameters and max_tokens are ignored (the
// agent's configuration governs); n other than 1, client-side tools or
// functions, and a response_format other than text (a client asking for
// JSON must not get prose) are 400 unsupported_parameter. An
// Idempotency-Key header makes the request idempotent (see OpenHarness
// below: the same durable records). A key names one request, its model
// included: the key sent again with another model (another agent) is
// refused as with another message, 400 message_id_reused, and runs
// nothing. A turn cancelled while it runs (POST /v1/runs/{id}/cancel,
// or the server stopping) is 503 invocation_cancelled whose message
// says it was cancelled, not to try again in a moment. Without one, an automatic retry of
// the official OpenAI SDKs (RetryCountHeader 1 and on, the same tenant,
// path, session header and body as a first attempt within 15 minutes,
// taken by this server or found in the shared run records) is a
// retransmission of that attempt: it joins the turn still running, or
// answers its outcome. A 409, a 502 for the
// server's own credentials or model, and the 503 invocation_cancelled
// of a turn stopped by a cancel request (not by the server's shutdown:
// runtime.ErrShutdown) carry X-Should-Retry: false (ShouldRetryHeader),
// as does the 5xx of a resumed turn that failed, or was cancelled (the
// server's shutdown too), after it took its suspension up (Error.Final;
// an upstream's 429 is then a 503). Every error on an OpenAI path (every path under
// /v1 but /v1/sessions, /v1/runs, /v1/agents and /v1/openharness and
// below), also the browser checks' 403 and 415, a 401, a 405 and the
// 404 of an unserved route (/v1/embeddings), uses the OpenAI shape {"error": {"message", "type",
// "param", "code"}}: type is authentication_error (401),
// permission_error (403), not_found_error (404; invalid_request_error
// for model_not_found and previous_response_not_found, as OpenAI
// answers them), conflict_error (409), rate_limit_error (429),
// server_error (5xx), else invalid_request_error; param names the
// request field the message is about ("messages[1].role"), else null.
// A decoding error says what JSON a field expected ("an array"), never
// a Go type.
//
// Sessions. The chat harness keeps history server-side, so a request maps
// onto a session:
//
//   - The session is named by the X-Armature-Session-Id header, else by
//     metadata.session_id (both present must agree). Without either, the
//     request gets a fresh session with a minted id: a stateless client
//     that resends the whole conversation each time gets a correct answer
//     every time.
//   - The last message must be a user message: it is the turn's input.
//   - The earlier messages seed the history of a session that does not
//     exist yet (a fresh one, or a new name). For an existing session they
//     are assumed to be its history and are ignored: the stored history
//     is the truth.
//   - system and developer messages are dropped: the agent's own
//     instructions apply.
//   - The response names the session in the X-Armature-Session-Id header
//     and in x_armature.session_id; send it back to continue statefully
//     with only the new message. Fresh sessions are stored like any
//     other (GET/DELETE /v1/sessions/{id}).
//
// A completion is {"id", "object": "chat.completion", "created", "model",
// "choices": [{"index": 0, "message": {"role": "assistant", "content"},
// "finish_reason"}], "usage", "x_armature"}. content joins the
// texts of the assistant messages the turn appended, with blank lines.
// The agent's tool calls ran server-side, so they are never OpenAI
// tool_calls (a client would try to run them); x_armature reports them:
//
//	"x_armature": {"session_id", "run_id", "invocation_id", "outcome": "completed" | "suspended",
//	  "tool_calls": [{"id", "name", "arguments", "status", "result"}],
//	  "suspended": {"signal_id", "invocation_id", "session_id", "resume_url", "metadata"}}
//
// finish_reason is the last model call's where OpenAI has a name for it
// ("length", "content_filter"), else "stop" (never "tool_calls": the
// tools ran server-side). usage sums the token counts the turn's model
// calls reported (chat.Turn.Usage; cached tokens in
// prompt_tokens_details); a counter no call reported is 0, so a model
// that reports none (the offline demo agent) answers zeros.
//
// A suspended turn (an approval-gated tool) answers finish_reason "stop"
// with the pending message (the approval request) as content and
// x_armature.suspended; resume it with POST {resume_url} =
// /v1/sessions/{id}/signals {"signal_id", "invocation_id", "payload":
// {"approval": {"approved": true}}}, which answers with the resumed
// turn's outcome in the REST shape. Naming the invocation_id binds the
// decision to that turn: without it, a signal id resumes whatever turn
// of the session awaits it, also one of a conversation begun under the
// same session id after a delete whose request carries the same id (a
// model that numbers its tool calls from one in each conversation).
//
// An errored turn is an HTTP error whose message is the bucket's
// user-facing reply and whose code is the error category:
// user_correctable 400, retryable_transient 503 with Retry-After,
// session_terminating 409 — except an upstream rate limit
// (provider_rate_limit), which is 429 rate_limit_error with the
// upstream's Retry-After, so that the official SDKs back off.
//
// With "stream": true the answer is server-sent events: data frames of
// chat.completion.chunk objects (a first chunk with the role, content
// deltas as the model streams, a final chunk with the finish_reason
// and x_armature, a usage chunk when stream_options.include_usage), then
// "data: [DONE]". Tool progress goes in separate frames,
//
//	event: stable_harness.tool.progress
//	data: {"tool_call_id", "name", "status": "running" | "completed" | "failed", ...}
//
// never in delta.content. Each progress frame is also a chunk with the
// completion's id and an empty delta, because the official OpenAI SDKs
// decode every event as a chunk whatever its name: they see a no-op. A
// turn quiet for Config.StreamKeepAlive (15 s: a model thinking, a long
// tool, a wait for the session) gets a ": keep-alive" comment line, and
// another each time it stays quiet as long, which SSE clients skip, so
// that proxies dropping idle connections keep the stream; the first
// opens the stream (status 200). A turn that errors before streaming
// anything (frame or keep-alive) is an HTTP error as above; one that
// errors later ends with an "event: error" frame whose data is the
// OpenAI error shape. The turn runs to the end even if the client
// goes away. Like every turn, a completion is recorded as a run
// (GET /v1/sessions/{id}/runs) and reaches the session's event stream.
//
// # The OpenAI Responses API
//
//	POST /v1/responses       {"model", "input", "instructions"?, "previous_response_id"?, "store"?, "metadata"?, "stream"?}
//	GET  /v1/responses/{id}  the response of a run
//
// The Responses API runs the same turns as chat completions, on the same
// agents, sessions, tenants, limits and run records (PROTOCOLS.md §5). A
// response is its turn's run: its id is the run id, so GET
// /v1/responses/{id}, GET /v1/runs/{id} and x_armature.run_id name the
// same thing.
//
// Request. model names the agent as for chat completions. input is a
// string (the user message) or a list of items: messages of role user,
// assistant, system or developer (string content, or input_text /
// output_text / refusal parts, input_image by URL), function_call and
// function_call_output items, and mcp_call items of an earlier output,
// all as history; the last item is the turn's user message. System and
// developer messages are dropped: instructions replace the agent's
// system prompt for this turn's model calls only (they are not stored;
// the next turn has the agent's prompt again). previous_response_id
// continues that response's session (the X-Armature-Session-Id header
// and metadata.session_id also name one, and must agree); input then
// holds only the new message. A previous_response_id resolves only among
// the caller's tenant's stored responses, and only while their session
// is the conversation they belonged to (not deleted since, even when its
// run records were kept): anything else is 404
// previous_response_not_found. metadata is at most 16 string pairs
// (keys of 64 bytes, values of 512), echoed. store: false keeps no
// response (GET and previous_response_id answer 404), though the turn
// still joins its session's history and is recorded as a run.
// Sampling parameters and max_output_tokens are ignored (the agent's
// configuration governs); client-side tools, a text.format other than
// text, background, conversation, prompt, item_reference and file or
// audio inputs are 400 unsupported_parameter.
//
// Response. The object has OpenAI's fields: status completed, or
// incomplete (incomplete_details.reason max_output_tokens or
// content_filter) when the last model call stopped there; usage in
// input/output tokens; output items in turn order: each assistant text a
// message, and each tool the agent ran server-side an mcp_call item
// (server_label "armature", name, arguments, output, or error when the
// tool failed) — never a function_call, which would ask the client to
// run it. The x_armature object of chat completions rides along
// (session_id, run_id, outcome, tool_calls, suspended, replayed).
//
// Approvals. A suspended turn answers status completed with its pending
// messages as message items and then one mcp_approval_request item
// whose id is the signal id (agent.SignalPrefix + the tool call id),
// with the tool's name and arguments. The client decides by sending,
// with previous_response_id, exactly one input item {"type":
// "mcp_approval_response", "approval_request_id": <id>, "approve":
// true|false, "reason"?}: the signal-resume path (never a new message),
// answered by the resumed turn's response (a new run whose
// parentRequestId is the suspended run); the approved call's mcp_call
// carries approval_request_id. approve must be a JSON boolean. Of
// concurrent decisions on one approval exactly one wins; a decision on
// an approval already answered (a losing one, or one sent after) is 409
// conflict_error with code harness_signal_correlation_failed and a
// message saying so; a decision that matches no waiting approval
// otherwise (a new message superseded it, also while the decision
// waited for the session, it was cancelled, the previous response
// awaits none) is 400 with the same code.
//
// Idempotency. With an Idempotency-Key, a retransmission (also after a
// restart) answers the first response, same id, x_armature.replayed
// set, and runs nothing; an approval decision under a key resumes once.
// The key sent again with another model (another agent), like with
// another message, is 400 message_id_reused and runs nothing.
//
// Streaming (stream: true): typed SSE events, each "event: <type>" with a
// JSON data whose sequence_number counts from 0: response.created and
// response.in_progress; for each tool run response.output_item.added
// (mcp_call in_progress), response.mcp_call_arguments.done,
// response.mcp_call.in_progress, response.mcp_call.completed (or
// .failed) and response.output_item.done; for text
// response.output_item.added, response.content_part.added,
// response.output_text.delta as the model streams,
// response.output_text.done, response.content_part.done and
// response.output_item.done; items the turn produced without streaming
// (an approval prompt and its mcp_approval_request, a replayed turn's
// output) whole at the end; then response.completed (or
// response.incomplete) with the final response, which GET answers
// later. The stream opens with the turn's first output, or with its
// first keep-alive (Config.StreamKeepAlive: a turn quiet for 15 s gets a
// ": keep-alive" comment line, which SSE clients skip, so that proxies
// dropping idle connections keep the stream): a turn that errors before
// either is an HTTP error (a 429 with Retry-After as for chat
// completions); one that errors later ends with response.failed and an
// error event (after response.created and response.in_progress when it
// had sent none), the message it cut short closed with status incomplete
// (in its response.output_item.done and in the final response). That
// final response is also what GET answers later: status failed with
// the run's error (its category as code, the message the client was
// given), or, for a run cancelled while it streamed (POST
// /v1/runs/{id}/cancel, or the server stopping), status cancelled (as
// OpenAI's Responses API names it) with error {"code":
// "invocation_cancelled", "message": "The response was cancelled before
// it finished."}; its output is the items streamed until then.
//
// GET /v1/responses/{id} rebuilds the response from its run record and
// the outcome the turn recorded with its session write (durable,
// deleted with the session): a running turn is in_progress, a failed or
// cancelled one failed or cancelled with its error (as above) and the
// output its turn produced before it ended, rebuilt from the run's
// events (its text, first 1 MiB, and its tool calls) as its stream
// reported it. DELETE (405, Allow:
// GET, HEAD), cancel and input_items (404 not_found_error) are not
// served.
//
// # OpenHarness v1
//
//	POST /v1/openharness   an OpenHarness request message → a response message
//
// The endpoint is an OpenHarness Harness Engine over the chat harness,
// mapped as PROTOCOLS.md §1-§2 decide. Responses carry protocol_version
// "1.0.0" and supported_protocol_versions ["1.0.0"]; a request of another
// major version (or none) gets status error, code
// protocol_version_unsupported, retryable false. Protocol errors are HTTP
// 200 with status error (invalid_request with details.field for a wrong
// type, a bad enum or session id); a body that is not a JSON object gets
// 400, an oversized one 413, one sent slower than the read timeout 408
// request_timeout, each with an OpenHarness error envelope. So are the
// failures answered before the endpoint reads the request: 401
// unauthorized, 415, 405 with Allow, the tenant's fair share 429 and a
// 503 (retryable, with Retry-After), and a 500 — every answer of the
// endpoint parses as a response message.
// Unknown fields are ignored at every level. Every capability key the
// endpoint understands is answered in supported_capabilities or
// capability_denials (openharness.streaming and
// openharness.attachments.upload are denied, not_supported: there is no
// upload store, so ref_id and asset_id references are not resolved). A
// capability declared false or null is not denied. With
// openharness.ui.approval false, a turn that suspends for approval
// answers status error, code capability_required (details.capability),
// with the pending messages as render_message; the turn stays suspended
// and its continuation is in the extension. A body nested more than
// 10000 levels deep gets 400 invalid_request naming the limit;
// correlation_id, conversation_id and request_id must be UTF-8 without
// control (C0, DEL, C1) or format characters; signal_payload or option
// without a continuation, and an auth.session_id differing from
// context.session_id, are invalid_request.
//
// context.session_id (else auth.session_id) names the tenant's session;
// without one a session is minted. Every turn response reports the session
// in response.extensions["dev.armature"] = {session_id, agent, outcome,
// run_id, invocation_id, conversation_id?, resumed?, replayed?,
// superseded?, usage?, finish_reason?, continuation?,
// unused_attachments?}. run_id names the run that answered, the id
// GET /v1/runs/{id} answers for (and the REST and OpenAI surfaces report
// as run_id): a new turn's run id is also its invocation_id; a resumed
// turn is a new run whose parentRequestId is the suspended one, in the
// same invocation. context.conversation_id (at most 256 bytes) is
// metadata: recorded on the run (conversationId) and echoed; it does not
// split the session's history. user_intent is the
// user message (missing or empty: an errored chat_message_shape_invalid
// response); attachments with an http(s) image uri become image blocks by
// URL, data: URIs are refused, other references are listed as unused.
// task_hint["dev.armature.agent"] names an agent (or a Config.TaskHints
// route) and must resolve; task_hint.sop_id routes when it matches one
// and otherwise leaves the default agent. auth.tenant_id is never trusted:
// the bearer token decides the tenant.
//
// Outcomes: completed is status success with a render_message {text,
// message} per assistant text and dev.armature.tool_call /
// dev.armature.tool_result directives (each with a fallback_message);
// errored is status error {code: the error category, message: the
// user-facing reply, retryable, details.error_bucket, and
// details.retry_after_seconds with a Retry-After header when a
// rate-limited upstream named its wait} plus a render_message of the
// reply; suspended is status success with the pending messages and
// one request_approval directive (priority high, requires_user_approval,
// risk_tier the tool's declared agent.Risk from the suspension metadata's
// risk_tier, default caution, deadline_ms what remains of the
// suspension's timeout_hint, an ISO-8601 duration or RFC 3339 deadline)
// whose payload is {message, signal_id, run_id, continuation_token,
// options}; the continuation is repeated in
// response.extensions["dev.armature"].continuation. Every directive says
// execution sequential; the others have priority normal.
//
// A request with context.continuation resumes the suspended turn by
// signal, never by Send, and answers with the resumed turn's outcome
// (subscribed listeners are notified too). The continuation names the
// turn by its continuation_token (run_id, when sent too, must agree), or
// by run_id alone: the suspended run, looked up within the caller's
// tenant (and session, when sent). The resume payload is typed, never
// read from prose: context.extensions["dev.armature"].signal_payload, or
// .option naming one of the request_approval directive's options
// ({id, label, signal_payload}: approve and deny for an agent approval),
// whose signal_payload it is. Without either, the payload is
// {"user_reply": user_intent} for the graph to interpret; the agent's
// approval refuses it (a user-correctable
// suspension_resume_payload_invalid that leaves the turn suspended and
// the continuation valid). Tool results of a resumed turn carry the name
// of the call they answer.
//
// Idempotency: a request_id retransmitted for the same tenant and session
// returns the original turn's outcome without running a second turn or
// opening a second run, before or after a restart: the request_id is the
// chat harness's message id (chat.WithMessageID), recorded in the store
// with the turn, and a request without a session_id runs in a session
// derived from its request_id, so its retransmission finds it. The same
// request_id with a different request is refused: status error, code
// message_id_reused (user_correctable, not retryable, details.field
// request_id), and nothing runs; requests are compared on what determines
// the turn (the agent routed to, user_intent, attachments, and for a
// continuation its run_id, token and answer), not on white space, key
// order, correlation_id, capabilities, shell, environment_state or
// conversation_id. A suspension resumes once: any later continuation of
// it (the same token with any request_id, its run_id, or the token of a
// replayed suspension) gets the recorded outcome of the turn that resumed
// it, marked replayed, durably too (the token's digest is the chat
// signal's request id), and never decides a later suspension of the same
// invocation. Continuation tokens are not credentials: they are unsigned
// and carry no more authority than run_id (resolution is scoped to the
// tenant and to a signal still awaited). A retransmission's answer carries the
// Idempotent-Replayed: true header; while the original's response is in
// the in-process cache (the latest 4096 responses, 32 MiB at most) and
// its session is still the one it answered in (one read of the
// session's record tells), it is that response byte for byte (with the
// retransmission's ids), and otherwise (after a restart, or evicted) it
// is rebuilt from the recorded outcome and also marked "replayed" in
// the dev.armature extension, naming the run that answered first. The
// cache is only a fast path over the store, never an answer of its own:
// once the session is deleted (DELETE /v1/sessions/{id} on this replica
// or another, whose memory nobody else clears), the entry is dropped,
// and the request_id is answered as the store answers it, as REST
// message_id and the OpenAI Idempotency-Key are: the retransmission of
// a deleted session's request runs anew, in a new session, and every
// replica then answers that new run, replayed. Nothing of a deleted
// conversation is served from memory; spent continuation tokens alike. A retransmission that
// arrives while the original runs waits for it. A retryable error is not recorded, so retrying it runs again.
// One exception: a continuation whose resume took its suspension up
// (an approved call ran) and then failed on the server's side, or was
// cancelled, cannot run again, so its error is bucketed
// user_correctable (retryable: false), its code still the failure's
// category, with a message that the decision took effect;
// the same continuation sent again, by token or run_id, is told so.
// A continuation whose resume failed before it took the suspension up
// (the session's lock or store failing first) ran nothing and resumes
// the turn when sent again.
// Across replicas (PostgreSQL), a retransmission that reaches another
// replica while the original runs waits for it too and runs no second
// turn, but it is recorded as a run of its own that ends completed,
// its output naming the original ({"replay_of": <run id>}): no second
// turn's events, only that record.
// A request_id is at most 256 bytes. The same holds for REST message_id
// and the OpenAI endpoint's Idempotency-Key header.
// correlation_id (else the X-Correlation-ID header) is echoed in the body
// and in X-Correlation-ID, and set on the turn's invocation. HTTP profile:
// X-Request-ID stands for a missing request_id (1 to 128 visible ASCII
// characters; another value is refused, invalid_request naming it, as
// an ignored one would let a retransmission run again; it is echoed and
// logged on every route), and a W3C traceparent header makes the turn's spans
// children of the caller's span, on every route.
//
// # Example
//
//	srv, err := server.New(server.Config{
//		Agents:   []*server.Agent{{ID: "support", Chat: h}},
//		Sessions: store,
//		Tokens:   []server.Token{{Secret: os.Getenv("TOKEN"), Tenant: "acme"}},
//		Addr:     ":8080",
//	})
//	ln, _ := net.Listen("tcp", ":8080")
//	err = srv.Serve(ctx, ln, 30*time.Second)
package server
