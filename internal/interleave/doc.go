// Package interleave holds Armature's randomized interleaving test: random
// sequences of sends (new and retransmitted), signals (valid, malformed
// and stale), deletes, cancels, concurrent pairs of those on one session,
// graceful restarts and kill -9, run against the chat harness as a
// library and against the real armature serve binary over HTTP, both on
// SQLite. After every step it checks the invariants a chat product
// promises:
//
//   - no acknowledged message is lost or reordered, and no message that
//     was refused appears;
//   - every message appears once: no turn runs twice for one message id,
//     before or after a restart or a crash (an in-doubt request is
//     retransmitted after the crash, which must settle it);
//   - the history stays valid for every provider (llm.CheckHistory);
//   - every acknowledged turn has its run record with the right final
//     status, and no run stays started (over HTTP);
//   - every answer is the one the model of the session predicts (a stale
//     signal is 404, or 409 when its decision took effect in the
//     session's conversation; a malformed one 400 and leaves the approval
//     pending; a message supersedes a pending approval).
//
// A sequence is deterministic given its seed, apart from where a crash
// lands in an in-flight request. A failure prints the seed and the steps
// so far; rerun one with -interleave.seed. The default budget fits CI;
// -interleave.seeds and -interleave.steps run longer:
//
//	go test ./internal/interleave -interleave.seeds 50 -interleave.steps 400
//	go test ./internal/interleave -run 'TestInterleave/http' -interleave.seed 1234 -v
package interleave
