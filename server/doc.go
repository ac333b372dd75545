// Package server is armature serve's HTTP layer over the chat harness:
// the chat REST API with server-sent events, health and readiness probes,
// Prometheus metrics, and (in later files) the OpenHarness v1 endpoint and
// the OpenAI-compatible chat completions endpoint.
//
// Every route but /healthz, /readyz and /metrics authenticates a bearer
// token (Config.Tokens) that names the caller's tenant; without tokens the
// server only listens on loopback and serves the tenant "default". A
// tenant's sessions are stored under "<tenant>/<session id>", so no
// request can name another tenant's session. Request bodies are limited
// (Config.MaxBodyBytes), connections have read, write and idle timeouts,
// malformed input gets a JSON error envelope ({"error": {"code",
// "message"}}) and nothing is stored, and errors never carry secrets or
// internal error text.
//
// A turn runs detached from its HTTP request: a client that disconnects
// does not cancel it, and Serve's graceful shutdown waits for in-flight
// turns.
//
// The chat REST API:
//
//	POST   /v1/sessions                 {"session_id"?}            → 201 {"session_id", ...}
//	GET    /v1/sessions                 ?page_token=               → {"sessions": [...], "next_page_token"}
//	GET    /v1/sessions/{id}                                       → {"session_id", "version", "messages": [...]}
//	DELETE /v1/sessions/{id}                                       → 204
//	POST   /v1/sessions/{id}/messages   {"content" | "message", "message_id"?, "agent"?}
//	POST   /v1/sessions/{id}/signals    {"signal_id" | "invocation_id", "payload"}
//
// A send or signal answers 200 with the turn's outcome: {"outcome":
// "completed", "replies": [...]}, {"outcome": "suspended", "signal":
// {"signal_id", "metadata"}, "pending_messages": [...]} or {"outcome":
// "errored", "error": {"bucket", "category", "retryable"}, "reply": {...}}.
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
