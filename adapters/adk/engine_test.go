package adk

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/demo"
)

func collect(evs *[]Event) func(Event) { return func(e Event) { *evs = append(*evs, e) } }

func TestEngineTurns(t *testing.T) {
	for _, driver := range []string{SessionMemory, SessionSQLite} {
		t.Run(driver, func(t *testing.T) {
			ctx := context.Background()
			cfg := Config{Tools: demo.Tools(), Session: SessionConfig{Driver: driver}}
			if driver == SessionSQLite {
				cfg.Session.Path = filepath.Join(t.TempDir(), "s.db")
			}
			e, err := NewEngine(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			var evs []Event
			res, err := e.Send(ctx, "u", "s1", "hello", collect(&evs))
			if err != nil || !strings.HasPrefix(res.Text, "You said") || len(res.Pending) != 0 {
				t.Fatalf("plain turn: %+v %v", res, err)
			}
			evs = nil
			res, err = e.Send(ctx, "u", "s1", "where is order 7?", collect(&evs))
			if err != nil || res.Text != "Here is what I found: order 7: shipped, arriving Thursday" {
				t.Fatalf("tool turn: %+v %v", res, err)
			}
			t.Logf("tool turn events: %+v", evs)
			evs = nil
			res, err = e.Send(ctx, "u", "s1", "please refund order 7", collect(&evs))
			if err != nil || len(res.Pending) != 1 || res.Pending[0].Tool != "issue_refund" {
				t.Fatalf("approval turn: %+v %v", res, err)
			}
			t.Logf("approval turn events: %+v pending %+v", evs, res.Pending)
			evs = nil
			res, err = e.Confirm(ctx, "u", "s1", collect(&evs), Decision{ConfirmationID: res.Pending[0].ConfirmationID, Confirmed: true})
			if err != nil || res.Text != "Here is what I found: refunded $30.00 for order 7" {
				t.Fatalf("confirm: %+v %v", res, err)
			}
			t.Logf("confirm events: %+v", evs)
			if _, err := e.Confirm(ctx, "u", "s1", collect(&evs), Decision{ConfirmationID: "nope", Confirmed: true}); !errors.Is(err, ErrNoPending) {
				t.Fatalf("confirm unknown: %v", err)
			}
		})
	}
}

// TestMemoryRestart documents the in-memory session service's restart
// semantics: a confirmation pending in a lost session cannot be given.
func TestMemoryRestart(t *testing.T) {
	ctx := context.Background()
	e, err := NewEngine(ctx, Config{Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Send(ctx, "u", "s1", "refund order 7", func(Event) {})
	if err != nil || len(res.Pending) != 1 {
		t.Fatalf("approval turn: %+v %v", res, err)
	}
	restarted, err := NewEngine(ctx, Config{Tools: demo.Tools()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := restarted.Confirm(ctx, "u", "s1", func(Event) {}, Decision{ConfirmationID: res.Pending[0].ConfirmationID, Confirmed: true}); !errors.Is(err, ErrNoPending) {
		t.Fatalf("confirm after a restart: %v, want ErrNoPending", err)
	}
}

// TestStreaming checks that ADK-Go's streaming mode streams a streaming
// model's answer as deltas that add up to the answer.
func TestStreaming(t *testing.T) {
	for _, streaming := range []bool{false, true} {
		ctx := context.Background()
		e, err := NewEngine(ctx, Config{Streaming: new(streaming), Tools: demo.Tools()})
		if err != nil {
			t.Fatal(err)
		}
		var deltas []string
		res, err := e.Send(ctx, "u", "s1", "where is order 7?", func(ev Event) {
			if ev.Kind == EventDelta {
				deltas = append(deltas, ev.Text)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(deltas, ""); got != res.Text || (len(deltas) > 1) != streaming {
			t.Errorf("streaming=%v: deltas %q, answer %q", streaming, deltas, res.Text)
		}
	}
}
