package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/internal/syncbuf"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// errBlip is a refused write: a database that is briefly unreachable.
var errBlip = errors.New("test: the store is briefly unreachable")

// refusingRuns is a run store that refuses writes, as a store that is
// briefly unreachable does: once armed, every write (refuseAll) or the
// first write of a run's completed end (not refuseAll), until opened.
// It tells when a completed end it took after a refusal, and when a
// purge, came.
type refusingRuns struct {
	*sqlite.RunStore

	mu        sync.Mutex
	armed     bool // refuse
	refuseAll bool // every write, not only the first completed end
	refused   bool // it refused a write
	written   chan struct{}
	purged    chan struct{}
}

func newRefusingRuns(rs *sqlite.RunStore, all bool) *refusingRuns {
	return &refusingRuns{RunStore: rs, armed: true, refuseAll: all, written: make(chan struct{}, 16), purged: make(chan struct{}, 16)}
}

// open takes writes from now on.
func (s *refusingRuns) open() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = false
}

// refuse reports whether to refuse a write of the records.
func (s *refusingRuns) refuse(recs ...runtime.AppendRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed {
		return false
	}
	for _, r := range recs {
		if s.refuseAll || (r.Finish != nil && r.Finish.Status == runtime.StatusCompleted) {
			if !s.refuseAll {
				s.armed = false
			}
			s.refused = true
			return true
		}
	}
	return false
}

// took tells that the store took the records.
func (s *refusingRuns) took(recs ...runtime.AppendRequest) {
	s.mu.Lock()
	refused := s.refused
	s.mu.Unlock()
	for _, r := range recs {
		if refused && r.Finish != nil && r.Finish.Status == runtime.StatusCompleted {
			s.written <- struct{}{}
		}
	}
}

func (s *refusingRuns) StartRun(ctx context.Context, run runtime.Run) error {
	if s.refuse(runtime.AppendRequest{RunID: run.ID}) {
		return errBlip
	}
	return s.RunStore.StartRun(ctx, run)
}

func (s *refusingRuns) WriteTurns(ctx context.Context, turns []runtime.TurnRecord) ([]runtime.Event, error) {
	recs := make([]runtime.AppendRequest, len(turns))
	for i, t := range turns {
		recs[i] = t.Append
	}
	if s.refuse(recs...) {
		return nil, errBlip
	}
	out, err := s.RunStore.WriteTurns(ctx, turns)
	if err == nil {
		s.took(recs...)
	}
	return out, err
}

func (s *refusingRuns) Append(ctx context.Context, req runtime.AppendRequest) ([]runtime.Event, error) {
	if s.refuse(req) {
		return nil, errBlip
	}
	out, err := s.RunStore.Append(ctx, req)
	if err == nil {
		s.took(req)
	}
	return out, err
}

func (s *refusingRuns) PurgeSession(ctx context.Context, req runtime.PurgeRequest) (runtime.PurgeResult, error) {
	res, err := s.RunStore.PurgeSession(ctx, req)
	s.purged <- struct{}{}
	return res, err
}

// signalLog is a log that signals when a line holding text is written.
type signalLog struct {
	buf  syncbuf.Buffer
	text string
	seen chan struct{}
	once sync.Once
}

func (l *signalLog) Write(p []byte) (int, error) {
	if strings.Contains(string(p), l.text) {
		l.once.Do(func() { close(l.seen) })
	}
	return l.buf.Write(p)
}

// refusedEndServer serves the demo agent over store, its runs recorded
// through rs with a redo after 5 ms, logging to log.
func refusedEndServer(t *testing.T, store *sqlite.Store, rs runtime.Store, log io.Writer) *httptest.Server {
	t.Helper()
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: rs, RetryRefused: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close(context.Background()) })
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	return servertest.On(t, store, a, func(c *server.Config) { c.Runs = rec })
}

// sendTurn sends a turn to the session and returns its run id.
func sendTurn(t *testing.T, base, session string) string {
	t.Helper()
	resp, err := http.Post(base+"/v1/sessions/"+session+"/messages", "application/json", strings.NewReader(`{"content":"where is order 7?"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Outcome string `json:"outcome"`
		RunID   string `json:"run_id"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Outcome != "completed" || out.RunID == "" {
		t.Fatalf("turn on %s: %d %+v %v, want completed with a run id", session, resp.StatusCode, out, err)
	}
	return out.RunID
}

// getRunStatus answers GET /v1/runs/{id}: its status code and the run.
func getRunStatus(t *testing.T, base, id string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/v1/runs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var run struct {
		Status string `json:"status"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&run)
	return resp.StatusCode, run.Status
}

// listedRuns answers the ids of GET /v1/sessions/{id}/runs.
func listedRuns(t *testing.T, base, session string) []string {
	t.Helper()
	resp, err := http.Get(base + "/v1/sessions/" + session + "/runs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct {
		Runs []struct {
			ID string `json:"id"`
		} `json:"runs"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range page.Runs {
		ids = append(ids, r.ID)
	}
	return ids
}

// The first turn of a new session creates the session after its run
// started; the store refuses the run's end (once, or its start too
// until the turn is answered), and the redo, before it writes the run
// back, asks whether the conversation is gone. The session holds the
// turn (its outcome recorded under the run's record key, with the
// session's write), so it is not: the run is written back, completed,
// and listed with the session. It used to be taken for a session begun
// again after the run started, and purged.
func TestFirstTurnRunWrittenBackAfterARefusedEnd(t *testing.T) {
	for _, all := range []bool{false, true} {
		name := "end refused once"
		if all {
			name = "start and end refused"
		}
		t.Run(name, func(t *testing.T) {
			store := servertest.SQLite(t)
			rs := newRefusingRuns(store.Runs(), all)
			log := &signalLog{text: "a refused run was given up", seen: make(chan struct{})}
			ts := refusedEndServer(t, store, rs, log)

			id := sendTurn(t, ts.URL, "fresh")
			rs.open()
			select {
			case <-rs.written:
			case <-rs.purged:
				t.Fatalf("the run of the session's first turn was purged\n%s", log.buf.String())
			case <-log.seen:
				t.Fatalf("the run of the session's first turn was given up\n%s", log.buf.String())
			case <-time.After(20 * time.Second):
				t.Fatalf("the run's end was not written again\n%s", log.buf.String())
			}
			if code, status := getRunStatus(t, ts.URL, id); code != http.StatusOK || status != "completed" {
				t.Fatalf("GET run %s: %d %q, want 200 completed\n%s", id, code, status, log.buf.String())
			}
			if got := listedRuns(t, ts.URL, "fresh"); len(got) != 1 || got[0] != id {
				t.Fatalf("the session's runs = %v, want [%s]", got, id)
			}
		})
	}
}

// A run whose records the store refused, and whose session another
// replica deleted and a later turn began again meanwhile, is not written
// back: the session was created after the run started, and does not hold
// the run's turn (a delete drops the records of its turns with it). So
// the rule that keeps a first turn's run still tells a conversation
// begun again.
func TestRefusedRunOfAConversationDeletedAndBegunAgainIsNotWrittenBack(t *testing.T) {
	store := servertest.SQLite(t)
	rs := newRefusingRuns(store.Runs(), true)
	log := &signalLog{text: "a refused run was given up: its conversation does not exist", seen: make(chan struct{})}
	ts := refusedEndServer(t, store, rs, log)
	other := refusedEndServer(t, store, store.Runs(), io.Discard) // another replica

	old := sendTurn(t, ts.URL, "again") // its start and end refused: the store has nothing of it
	req, err := http.NewRequest(http.MethodDelete, other.URL+"/v1/sessions/again", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.StatusCode)
	}
	fresh := sendTurn(t, other.URL, "again") // begins the conversation again
	rs.open()
	select {
	case <-log.seen:
	case <-rs.written:
		t.Fatalf("the run of the deleted conversation was written back\n%s", log.buf.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("the refused run was not settled\n%s", log.buf.String())
	}
	if code, _ := getRunStatus(t, other.URL, old); code != http.StatusNotFound {
		t.Fatalf("GET the deleted conversation's run: %d, want 404", code)
	}
	if got := listedRuns(t, other.URL, "again"); len(got) != 1 || got[0] != fresh {
		t.Fatalf("the session's runs = %v, want [%s] (the new conversation's)", got, fresh)
	}
}
