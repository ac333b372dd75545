package runtime_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
)

// levelLog records the level and message of every log line.
type levelLog struct {
	mu    sync.Mutex
	lines []slog.Record
}

func (l *levelLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *levelLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, r)
	return nil
}
func (l *levelLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *levelLog) WithGroup(string) slog.Handler      { return l }

func (l *levelLog) count(min slog.Level) (n int, msgs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.lines {
		if r.Level >= min {
			n++
			msgs = append(msgs, r.Message)
		}
	}
	return n, msgs
}

// A run that committed to a conversation another process deletes is
// purged while still started (PurgeRequest.Committed), and the process
// that ran it gives its end up quietly when it finds the run gone: no
// failure for Flush, nothing for the redo, one Info line and no warning,
// whether its end goes to the flusher (alone or in a group commit with
// another turn's) or on its own path (a watched session).
func TestPurgeCommittedRunEndGivenUp(t *testing.T) {
	for _, mode := range []string{"flusher", "group", "watched"} {
		t.Run(mode, func(t *testing.T) {
			ctx := t.Context()
			store := runtime.NewMemoryStore(runtime.MemoryConfig{})
			logs := &levelLog{}
			a, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, Linger: time.Hour, Logger: slog.New(logs), RetryRefused: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			b, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
			if err != nil {
				t.Fatal(err)
			}
			if mode == "watched" {
				_, stop := a.Subscribe(ctx, "acme", "s")
				defer stop()
			}
			begin := func(session string) (*runtime.Turn, context.Context) {
				tr, tctx, err := a.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: session, AgentID: "agent"})
				if err != nil {
					t.Fatal(err)
				}
				if err := tr.Flush(ctx); err != nil { // the server waits for the start (startDurable)
					t.Fatal(err)
				}
				if err := tr.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "the secret"}); err != nil {
					t.Fatal(err)
				}
				return tr, tctx
			}
			turn, tctx := begin("s")
			turn.Settle()
			other, octx := begin("other")
			res, err := b.PurgeSession(ctx, "acme", "s", nil, turn.ID())
			if err != nil || res.Runs != 1 {
				t.Fatalf("PurgeSession = %+v, %v; want the committed run purged while started", res, err)
			}
			if err := turn.Complete(tctx, map[string]any{"text": "the secret"}); err != nil {
				t.Fatalf("Complete = %v, want nil: the run is gone, nothing to record", err)
			}
			if mode == "group" {
				if err := other.Complete(octx, map[string]any{"text": "kept"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := turn.Flush(ctx); err != nil {
				t.Fatalf("Flush = %v, want nil", err)
			}
			if err := a.Flush(ctx); err != nil {
				t.Fatalf("Recorder.Flush = %v, want nil", err)
			}
			if mode != "group" {
				if err := other.Complete(octx, map[string]any{"text": "kept"}); err != nil {
					t.Fatal(err)
				}
			}
			if err := a.Close(ctx); err != nil {
				t.Fatalf("Close = %v, want nil", err)
			}
			if _, err := store.Run(ctx, "acme", turn.ID()); !errors.Is(err, runtime.ErrNotFound) {
				t.Fatalf("the purged run came back: %v", err)
			}
			if evs, err := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s"}); err != nil || len(evs) != 0 {
				t.Fatalf("the purged run's events: %d, %v; want none", len(evs), err)
			}
			if run, err := store.Run(ctx, "acme", other.ID()); err != nil || run.Status != runtime.StatusCompleted {
				t.Fatalf("the other session's run = %+v, %v; want it completed", run, err)
			}
			if n, msgs := logs.count(slog.LevelWarn); n != 0 {
				t.Fatalf("%d warnings or errors: %q", n, msgs)
			}
			if n, msgs := logs.count(slog.LevelInfo); n != 1 {
				t.Fatalf("%d Info lines, want 1: %q", n, msgs)
			}
		})
	}
}

// refuseStarts is a memory store that refuses every record starting a
// run, as a full disk would.
type refuseStarts struct{ *runtime.MemoryStore }

var errRefused = errors.New("disk full")

func (s refuseStarts) StartRun(context.Context, runtime.Run) error { return errRefused }

func (s refuseStarts) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	for _, t := range turns {
		if t.Start != nil {
			return nil, errRefused
		}
	}
	return s.MemoryStore.WriteTurns(ctx, turns)
}

// A run whose start the store refused, and that is not kept to be
// written again (no redo), is not in the store when its end is written:
// that is not a purge, and is not given up as one. The turn's failure
// reaches Flush, and no line says the session was deleted.
func TestRefusedStartNotTakenForPurged(t *testing.T) {
	ctx := t.Context()
	logs := &levelLog{}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: refuseStarts{runtime.NewMemoryStore(runtime.MemoryConfig{})},
		Logger: slog.New(logs), RetryRefused: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close(ctx)
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s", AgentID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Flush(ctx); !errors.Is(err, errRefused) {
		t.Fatalf("Flush of the refused start = %v, want the refusal", err)
	}
	_ = turn.Complete(tctx, map[string]string{"ok": "yes"})
	if err := turn.Flush(ctx); err == nil {
		t.Fatal("Flush after the end = nil, want the start's refusal")
	}
	_, msgs := logs.count(slog.LevelDebug)
	for _, m := range msgs {
		if strings.Contains(m, "session deleted") {
			t.Fatalf("a refused start was taken for a purge: %q", m)
		}
	}
}
