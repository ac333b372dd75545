package chat_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/llm"
)

// embBackends runs f on a SQLite file and on a PostgreSQL schema.
func embBackends(t *testing.T, f func(t *testing.T, path string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "ids.db")) })
	t.Run("postgres", func(t *testing.T) {
		_, url := pgtest.Schema(t)
		f(t, "pg:"+url)
	})
}

// TestEmbedderBadMessageID: a message id that is within MaxIDLength
// but not valid UTF-8, or holds a NUL byte, must be refused up front
// (chat_message_shape_invalid, nothing run) as an over-long one is —
// not run the turn's tools and then fail to save it.
func TestEmbedderBadMessageID(t *testing.T) {
	for name, id := range map[string]string{"invalid-utf8": "msg-\xff\xfe", "nul": "msg-\x00-1"} {
		t.Run(name, func(t *testing.T) {
			embBackends(t, func(t *testing.T, path string) {
				refunds := &embRefunds{ran: map[string]int{}}
				w := embOpen(t, path, refunds.tools())
				ctx := context.Background()
				out, err := w.h.Send(ctx, "s1", llm.UserText("where is order 7?"), chat.WithMessageID(id))
				if err == nil {
					// Accepted: then a retransmission must replay it.
					again, err2 := w.h.Send(ctx, "s1", llm.UserText("where is order 7?"), chat.WithMessageID(id))
					if err2 != nil || !again.Info().Replayed {
						t.Fatalf("accepted id %q: first %T, retransmission %T %v (replayed=%v), want a replay", id, out, again, err2, again.Info().Replayed)
					}
					return
				}
				if cat := errcat.Of(err); cat != errcat.ChatMessageShapeInvalid {
					e := out.(*chat.Errored)
					t.Fatalf("message id %q: category %s (bucket %v), want chat_message_shape_invalid; err: %v", id, cat, e.Bucket, err)
				}
			})
		})
	}
}

// TestEmbedderBadRequestID: the same for a signal's RequestID: the
// approved refund must not run when the resume cannot be recorded.
func TestEmbedderBadRequestID(t *testing.T) {
	for name, id := range map[string]string{"invalid-utf8": "req-\xff\xfe", "nul": "req-\x00-1"} {
		t.Run(name, func(t *testing.T) {
			embBackends(t, func(t *testing.T, path string) {
				refunds := &embRefunds{ran: map[string]int{}}
				w := embOpen(t, path, refunds.tools())
				ctx := context.Background()
				out, err := w.h.Send(ctx, "s1", llm.UserText("please refund order 7"))
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("send: %T %v", out, err)
				}
				res, err := w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve(""), RequestID: id})
				refunds.mu.Lock()
				ran := refunds.ran["7"]
				refunds.mu.Unlock()
				if err != nil {
					cat := errcat.Of(err)
					if ran > 0 || cat != errcat.ChatMessageShapeInvalid {
						t.Fatalf("request id %q: signal failed with %s (%v) after the refund ran %d times; want it refused up front (chat_message_shape_invalid) with no refund", id, cat, err, ran)
					}
					return
				}
				again, err2 := w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve(""), RequestID: id})
				if err2 != nil || !again.Info().Replayed {
					t.Fatalf("accepted request id %q: first %T, retransmission %T %v, want a replay", id, res, again, err2)
				}
			})
		})
	}
}

// TestEmbedderBadRecordKey: a Signal.RecordKey holding a NUL byte (or
// invalid UTF-8), which no store can keep, is refused up front
// (chat_message_shape_invalid), before the decision takes effect: the
// approved refund does not run under a key whose write would fail.
func TestEmbedderBadRecordKey(t *testing.T) {
	for name, key := range map[string]string{"invalid-utf8": "key-\xff\xfe", "nul": "key-\x00-1"} {
		t.Run(name, func(t *testing.T) {
			embBackends(t, func(t *testing.T, path string) {
				refunds := &embRefunds{ran: map[string]int{}}
				w := embOpen(t, path, refunds.tools())
				ctx := context.Background()
				out, err := w.h.Send(ctx, "s1", llm.UserText("please refund order 7"))
				s, ok := out.(*chat.Suspended)
				if !ok {
					t.Fatalf("send: %T %v", out, err)
				}
				_, err = w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve(""), RecordKey: key})
				refunds.mu.Lock()
				ran := refunds.ran["7"]
				refunds.mu.Unlock()
				if err == nil {
					return
				}
				cat := errcat.Of(err)
				if cat == errcat.ChatMessageShapeInvalid && ran == 0 {
					return // refused up front
				}
				// A retry of the same approval: does the refund run again, or
				// is the decision lost?
				_, err2 := w.h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "s1", Payload: agent.Approve("")})
				refunds.mu.Lock()
				ran2 := refunds.ran["7"]
				refunds.mu.Unlock()
				hist := history(t, w.store, "s1")
				t.Fatalf("record key %q: signal failed with %s (%v) after the refund ran %d times; a retry without the key: %v, refund ran %d times in all; history:\n%v\nwant the key refused up front (chat_message_shape_invalid), nothing run",
					key, cat, err, ran, err2, ran2, texts(hist))
			})
		})
	}
}

// TestEmbedderBadSendRecordKey: the same for WithRecordKey on a Send.
func TestEmbedderBadSendRecordKey(t *testing.T) {
	for name, key := range map[string]string{"invalid-utf8": "key-\xff\xfe", "nul": "key-\x00-1"} {
		t.Run(name, func(t *testing.T) {
			embBackends(t, func(t *testing.T, path string) {
				w := embOpen(t, path, (&embRefunds{ran: map[string]int{}}).tools())
				ctx := context.Background()
				out, err := w.h.Send(ctx, "s1", llm.UserText("where is order 7?"), chat.WithRecordKey(key))
				if err == nil {
					return
				}
				if cat := errcat.Of(err); cat != errcat.ChatMessageShapeInvalid {
					t.Fatalf("record key %q: %s (bucket %v): %v; want chat_message_shape_invalid before the turn runs", key, cat, out.(*chat.Errored).Bucket, err)
				}
			})
		})
	}
}

// TestEmbedderBadSignalRefs: a signal naming no suspended turn — here
// an id holding a NUL byte, or invalid UTF-8, as a client could send —
// is harness_signal_correlation_failed (user-correctable) on every
// store, and CancelSuspended of such an invocation id the same; not a
// store failure whose bucket tells the user the session is over.
func TestEmbedderBadSignalRefs(t *testing.T) {
	for name, bad := range map[string]string{"nul": "x\x00y", "invalid-utf8": "x\xffy"} {
		t.Run(name, func(t *testing.T) {
			embBackends(t, func(t *testing.T, path string) {
				w := embOpen(t, path, (&embRefunds{ran: map[string]int{}}).tools())
				ctx := context.Background()
				if out, err := w.h.Send(ctx, "s1", llm.UserText("please refund order 7")); err != nil {
					t.Fatalf("send: %T %v", out, err)
				}
				var fails []string
				for what, sig := range map[string]chat.Signal{
					"signal id":              {SignalID: bad, SessionID: "s1", Payload: agent.Approve("")},
					"invocation id":          {InvocationID: bad, SessionID: "s1", Payload: agent.Approve("")},
					"unscoped signal id":     {SignalID: bad, Payload: agent.Approve("")},
					"unscoped invocation id": {InvocationID: bad, Payload: agent.Approve("")},
				} {
					_, err := w.h.Signal(ctx, sig)
					if cat := errcat.Of(err); cat != errcat.HarnessSignalCorrelationFailed {
						fails = append(fails, fmt.Sprintf("%s %q: %s: %v", what, bad, cat, err))
					}
				}
				if err := w.h.CancelSuspended(ctx, "s1", bad); errcat.Of(err) != errcat.HarnessSignalCorrelationFailed {
					fails = append(fails, fmt.Sprintf("CancelSuspended %q: %s: %v", bad, errcat.Of(err), err))
				}
				// Not recorded, or refused as a malformed id, as SQLite
				// answers: not a store failure.
				okErr := func(err error) bool {
					return errors.Is(err, chat.ErrNotRecorded) || errcat.Of(err) == errcat.ChatMessageShapeInvalid
				}
				if _, err := w.h.Recorded(ctx, "s1", bad); !okErr(err) {
					fails = append(fails, fmt.Sprintf("Recorded %q: %v, want ErrNotRecorded or chat_message_shape_invalid", bad, err))
				}
				if _, err := w.h.Replay(ctx, "s1", bad); !okErr(err) {
					fails = append(fails, fmt.Sprintf("Replay %q: %v, want ErrNotRecorded or chat_message_shape_invalid", bad, err))
				}
				if len(fails) > 0 {
					t.Fatal(strings.Join(fails, "\n"))
				}
			})
		})
	}
}
