package harness_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
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
