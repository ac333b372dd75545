// Package adaptertest is the end-to-end script every backend adapter
// passes (the acceptance test of the backend adapter contract, package
// adapter): [Run] serves one agent of the backend under test — the
// scripted fake [Model] and the [Tools] gateway, handed to the adapter's
// factory — over an SQLite store, and drives it over chat REST,
// OpenHarness and the OpenAI-compatible endpoint: plain turns, tool
// turns, approvals started on one surface and approved on another across
// a restart, cancellation of running and suspended turns, a direct tool
// request, and the run records after another restart.
//
// An adapter module's test calls it in a few lines:
//
//	func TestEndToEnd(t *testing.T) {
//		adaptertest.Run(t, adaptertest.Config{Backend: "adk", Factory: adk.Factory,
//			Section: json.RawMessage(`{"instruction": "..."}`)})
//	}
//
// The adapter must bridge adapter.Agent.Provider (the scripted Model) to
// its upstream's model, hand the agent's Tools to its upstream as tools,
// map the upstream's approval request for issue_refund onto an
// adapter.Suspension, and honour the turn's context.
//
// [CheckBridge] checks how an adapter bridges the workspace's model;
// [CheckRollback] and [CheckRandomTurns] that the model is always sent
// the conversation the runtime committed, after failed, cancelled and
// uncommitted turns, failed resumes, superseded approvals, deletes and
// restarts ([FlakySessions] fails session writes on demand);
// [CheckUsage] that each upstream model call's usage reaches the turn;
// [CheckRandomRuns] that, through the RuntimeClient, each such turn's run
// record ends in the status its outcome says; [CheckImages] that a
// user's images reach the model, on their turn and as history; and
// [CheckLostApproval] how an approval whose upstream state is gone
// fails.
//
// [RunBinary] drives an adapter's armature serve binary as an operator
// would, across a SIGKILL; [RunUpstream] runs that binary with the
// agent's model pointed at aimock, a third-party mock of the OpenAI,
// Anthropic and Gemini APIs from the npm registry: plain, tool and
// approval turns, the upstream's rate limit, empty answer and cut
// stream, each failure in the category a native agent reports.
// [Gemini3Upstream] is a Gemini API that refuses a function call sent
// back without its thought signature, as Gemini 3 does;
// [AnthropicThinkingUpstream] is Anthropic's Messages API with extended
// thinking, which refuses a tool turn's request whose calls come back
// without the signed reasoning that preceded them.
//
// For the runtime's overhead (issue 20's target: at most 20 µs per
// turn), [Paired] pairs an upstream's direct turn with the same agent's
// turn through the runtime ([MemoryServer], [SubmitLayer]); [Floor] is
// the runtime's own cost around an adapter that does no work
// ([Scripted]), [FloorBeside] the same between two of a real upstream's
// turns, and [Timings] times an adapter's Run and its events from
// inside the runtime.
//
// Run uses only the public API of the main module, so adapters living in
// other modules run it as is (RunUpstream also starts aimock with
// Node.js: without it, it skips locally and fails in CI). It waits on explicit signals, never on
// timings.
package adaptertest
