package harness_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/syncbuf"
)

// TestErroredTurnLogsItsCause: an errored turn's cause is logged at
// debug level (the category alone at warn), so an operator can see why
// (an unparsable prompt file, a refused connection); not at info.
func TestErroredTurnLogsItsCause(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		var buf bytes.Buffer
		log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: level}))
		g := newGraph(t, nil, nil, func(context.Context, graph.State) (graph.Update, error) {
			return nil, errors.New("prompt file support.yaml: line 3: bad indentation")
		})
		h := newHarness(t, harness.Config{Graph: g, Mode: harness.Sessioned, Logger: log})
		if _, err := h.Handle(context.Background(), harness.Transmission{Intent: harness.IntentNewSession, SessionID: "s"}); err == nil {
			t.Fatal("the turn did not error")
		}
		got := buf.String()
		if !strings.Contains(got, "harness: turn errored") {
			t.Fatalf("level %v: no errored line:\n%s", level, got)
		}
		if has := strings.Contains(got, "bad indentation"); has != (level == slog.LevelDebug) {
			t.Fatalf("level %v: the cause logged = %v:\n%s", level, has, got)
		}
	}
}

// TestCancelledTurnIsNoWarning: a turn its caller cancelled (a user's
// stop) is logged at info as cancelled, not warned about as a node that
// failed; a turn past its deadline is still warned about.
func TestCancelledTurnIsNoWarning(t *testing.T) {
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want string
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			`level=INFO msg="harness: turn cancelled"`},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 20*time.Millisecond)
		}, `level=WARN msg="harness: turn errored"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf syncbuf.Buffer
			log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
			started := make(chan struct{})
			g := newGraph(t, nil, nil, func(ctx context.Context, _ graph.State) (graph.Update, error) {
				close(started)
				<-ctx.Done()
				return nil, ctx.Err()
			})
			h := newHarness(t, harness.Config{Graph: g, Mode: harness.Sessioned, Logger: log})
			ctx, cancel := tc.ctx()
			defer cancel()
			if tc.name == "cancelled" {
				go func() { <-started; cancel() }()
			} // else its deadline ends it
			if _, err := h.Handle(ctx, harness.Transmission{Intent: harness.IntentNewSession, SessionID: "s"}); err == nil {
				t.Fatal("the turn did not end errored")
			}
			if got := buf.String(); !strings.Contains(got, tc.want) {
				t.Fatalf("log:\n%s\nwant a line with %s", got, tc.want)
			}
		})
	}
}
