package server

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/demo"
)

// TestOpenHarnessCrashAfterRefundEveryFormTookEffect: as
// TestOpenHarnessContinuationAfterCrashTookEffect (a process killed
// after the approved refund ran), but the continuation is sent again by
// its run_id alone (the form PROTOCOLS.md lets a Shell use), with the
// first request_id and a new one. doc.go: "the same continuation sent
// again, by token or run_id, is told so" (that the decision took
// effect).
func TestOpenHarnessCrashAfterRefundEveryFormTookEffect(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	m := &stallAfterRefund{entered: make(chan struct{}), release: make(chan struct{})}
	first := newOHEnvAgentAt(t, filepath.Join(dir, "first.db"), m, 500*time.Millisecond)
	s := first.post(t, ohBody("rid-s", `{"session_id": "s-crash", "user_intent": "refund order 7"}`))
	cont := s.ext(t).Continuation
	if cont == nil {
		t.Fatalf("got %s", s.raw)
	}
	approve := ohDecide("rid-c", "s-crash", cont.RunID, "", "approve")
	done := make(chan struct{})
	go func() {
		defer close(done)
		first.post(t, approve)
	}()
	t.Cleanup(func() { close(m.release); <-done })
	<-m.entered
	if err := first.srv.runs.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "next.db")
	db, err := sql.Open("sqlite", filepath.Join(dir, "first.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", path); err != nil {
		t.Fatal(err)
	}
	db.Close()
	time.Sleep(time.Second)
	next := newOHEnvAgentAt(t, path, demo.Model{}, 0)
	if _, err := next.srv.RecoverRuns(ctx); err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{approve, ohDecide("rid-c2", "s-crash", cont.RunID, "", "approve"),
		ohDecide("rid-c3", "s-crash", "", cont.ContinuationToken, "approve")} {
		r := next.post(t, body)
		t.Logf("%s", r.raw)
		if r.ext(t).Outcome == "completed" {
			t.Errorf("resumed again: %s", r.raw)
			continue
		}
		if r.msg.Response.Error == nil || !strings.Contains(r.msg.Response.Error.Message, "took effect") {
			t.Errorf("the continuation after the crash: %s, want that the decision took effect", r.raw)
		}
	}
}
