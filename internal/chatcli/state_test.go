package chatcli_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/internal/chatcli"
)

// The state file "only remembers the last session per server, so a
// restarted client continues it" (README, Terminal client). Two clients
// of two servers share the default state file (two terminals): each
// saves only its own server's entry, so the one that quits last does not
// erase the other's (before, each rewrote the whole file from what it
// loaded at start).
func TestStateFileKeepsOtherServersEntries(t *testing.T) {
	ts1, ts2 := newDemoServer(t), newDemoServer(t)
	statePath := filepath.Join(t.TempDir(), "chat.json")
	c1 := chatcli.Config{Client: newClient(t, ts1.URL, ""), StatePath: statePath, Session: "one"}
	c2 := chatcli.Config{Client: newClient(t, ts2.URL, ""), StatePath: statePath, Session: "two"}
	s1 := startChat(t, c1)
	s1.waitFor("you> ")
	s2 := startChat(t, c2)
	s2.waitFor("you> ")
	s2.quit()
	s1.quit()
	st, err := chatcli.LoadState(statePath)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Servers[ts2.URL].Session; got != "two" {
		t.Fatalf("after both clients quit, the state remembers %q for the second server (want \"two\"); state: %+v", got, st.Servers)
	}
}

// The remembered session is gone (a server started on fresh data, or the
// session was deleted): the client starts a new session and reads its
// stream from the beginning, as with --session naming a missing session.
// Before, it kept the old session's stream position: the server
// answered last_event_id_unknown and the client skipped every event up
// to that id, so on a server whose ids start again (fresh data) the
// first turns showed no tool calls.
func TestNewSessionStartsItsStreamAtTheBeginning(t *testing.T) {
	var cur atomic.Pointer[http.Handler]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*cur.Load()).ServeHTTP(w, r) }))
	t.Cleanup(front.Close)
	use := func(ts *httptest.Server) { h := ts.Config.Handler; cur.Store(&h) }
	use(newDemoServer(t))
	statePath := filepath.Join(t.TempDir(), "chat.json")
	cfg := chatcli.Config{Client: newClient(t, front.URL, ""), StatePath: statePath}
	s := startChat(t, cfg)
	s.waitFor("you> ")
	for _, m := range []string{"where is order 1?", "where is order 2?", "where is order 3?"} {
		s.send(m)
		s.waitFor("you> ")
	}
	s.quit()
	if st, _ := chatcli.LoadState(statePath); st.Servers[front.URL].LastEventID == 0 {
		t.Fatalf("setup: no stream position remembered: %+v", st.Servers)
	}

	use(newDemoServer(t)) // the server starts again on fresh data
	s2 := startChat(t, cfg)
	s2.waitFor("new session ")
	s2.waitFor("you> ")
	s2.send("where is order 42?")
	got := s2.waitFor("you> ")
	if !strings.Contains(got, "  · calling lookup_order") {
		t.Fatalf("the first turn of the new session shows no tool call:\n%s", got)
	}
}

// Clients saving their servers' entries at the same time all keep them:
// each save re-reads the file under its lock and writes it atomically.
func TestSaveServerStateConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir", "chat.json")
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			for j := range 5 {
				ss := chatcli.ServerState{Session: fmt.Sprint("s", i), LastEventID: int64(j + 1)}
				if err := chatcli.SaveServerState(path, fmt.Sprint("http://server", i), ss); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
	st, err := chatcli.LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]chatcli.ServerState{}
	for i := range n {
		want[fmt.Sprint("http://server", i)] = chatcli.ServerState{Session: fmt.Sprint("s", i), LastEventID: 5}
	}
	if diff := cmp.Diff(want, st.Servers); diff != "" {
		t.Fatalf("state after concurrent saves (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the lock is left behind: %v", err)
	}
}

// A lock left behind by a client that died holding it is taken over once
// stale; a fresh one held by a live client is waited for.
func TestSaveServerStateStaleLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chat.json")
	if err := os.WriteFile(path+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(path+".lock", old, old); err != nil {
		t.Fatal(err)
	}
	if err := chatcli.SaveServerState(path, "http://a", chatcli.ServerState{Session: "x"}); err != nil {
		t.Fatal(err)
	}
	if st, err := chatcli.LoadState(path); err != nil || st.Servers["http://a"].Session != "x" {
		t.Fatalf("after taking over a stale lock: %+v, %v", st, err)
	}
}
