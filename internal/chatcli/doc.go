// Package chatcli is armature chat, the terminal client of armature
// serve's chat REST API. It uses the public HTTP API only: it creates,
// lists and reads sessions (POST/GET /v1/sessions, GET
// /v1/sessions/{id}), sends messages (POST /v1/sessions/{id}/messages),
// answers approvals (POST /v1/sessions/{id}/signals) and follows the
// current session's server-sent events (GET /v1/sessions/{id}/events,
// reconnecting with Last-Event-ID).
//
// A turn's reply is printed as the agent streams it (agent.output.delta
// events), tool calls as they start and end (agent.tool.start,
// agent.tool.result); when the send's answer arrives it is reconciled
// with what the stream printed, so text the stream missed is printed
// once and streamed text is not repeated. A suspended turn prompts
// inline for the approval and prints the resumed turn the same way.
// History lives on the server; the client remembers its last session per
// server in a small state file ([DefaultStatePath]), so a restarted
// client continues where it left off. Clients sharing the file each save
// only their own server's entry ([SaveServerState]). An approval
// answered again after its decision took effect (an earlier answer, this
// client's before its connection dropped or another client's) is told
// apart from one nothing awaits any more ([Outcome.DecisionTookEffect]).
// A message whose answer was lost on the way (a proxy's 502, 503 or 504
// in the server's place, or a connection cut once made) is sent again under its
// message id ([ClientConfig.ResendWait]): the server runs it once.
//
// Ctrl-C ([Config.Interrupt]) cancels what runs: a turn (on the server;
// a second Ctrl-C stops waiting for a server that does not answer), or a
// command's request (the client goes back to the prompt); at a prompt it
// ends the client. A line typed before an approval question was shown
// does not answer it.
//
// What the client prints from the server (replies, tool names and
// arguments, errors, ids) shows as text: terminal control characters and
// bidirectional controls (overrides, isolates and marks) as escapes,
// and line breaks in one-line fields (a tool's name, an id, an error) as
// \n, so that neither a model nor a server can draw a fake prompt or
// approval.
//
// What the client reads of a server is bounded (see [MaxAnswerBytes]
// and the bounds beside it): the user may point it at any URL, and a
// server that is broken or hostile (an endless answer, event or stream
// of text, a history or list without end) cannot make it grow its
// memory without bound. Past a bound the client stops reading and says
// so (error [too_large], a [*TooLargeError]), and goes on: a command or
// turn fails and the prompt comes back; a session whose history is too
// large is still entered; an event too large is skipped (or, when the
// stream gets no further, the stream is no longer followed and turns
// print when they end). Only a failure of what the client needs to
// start (creating its session) ends it, with the error.
//
// [Client] is safe for concurrent use. [Run] owns its goroutines: the
// current session's event stream, the request in flight and, during a
// command, the one taking its interrupts, all ended and waited for
// before it returns.
//
// # Example
//
//	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: "http://127.0.0.1:8080", Token: token})
//	if err != nil {
//		return err
//	}
//	path, _ := chatcli.DefaultStatePath()
//	return chatcli.Run(ctx, chatcli.Config{Client: c, In: os.Stdin, Out: os.Stdout, StatePath: path})
package chatcli
