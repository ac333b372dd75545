package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A Last-Event-ID the session's stream never had (above its newest
// event, or from another session, above or below this one's ids) ends
// the stream with an error event
// that resets the client's last event id; before, such a stream stayed
// open and silent forever. A known id resumes the stream.
func TestEventStreamUnknownLastEventID(t *testing.T) {
	ts := newDemoServer(t)
	post(t, ts.URL+"/v1/sessions/early/messages", `{"content":"where is order 2?"}`, nil)
	earlier := readFrames(t, openStream(t, ts.URL+"/v1/sessions/early/events", "").Body, func(f frame) bool {
		return f.event == "runtime.request.completed"
	})
	post(t, ts.URL+"/v1/sessions/s1/messages", `{"content":"where is order 3?"}`, nil)
	post(t, ts.URL+"/v1/sessions/other/messages", `{"content":"where is order 4?"}`, nil)
	all := readFrames(t, openStream(t, ts.URL+"/v1/sessions/s1/events", "").Body, func(f frame) bool {
		return f.event == "runtime.request.completed"
	})
	last := all[len(all)-1].id
	others := readFrames(t, openStream(t, ts.URL+"/v1/sessions/other/events", "").Body, func(f frame) bool {
		return f.event == "runtime.request.completed"
	})
	otherLast := others[len(others)-1].id

	// Another session's id below this session's newest is no more this
	// stream's than one above it (before, any id below the newest
	// resumed the stream after it).
	for _, lastID := range []string{"999999999", otherLast, earlier[len(earlier)-1].id, earlier[0].id} {
		resp := openStream(t, ts.URL+"/v1/sessions/s1/events", lastID)
		done := make(chan []string, 1)
		go func() {
			var lines []string
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			done <- lines
		}()
		select {
		case lines := <-done:
			got := strings.Join(lines, "\n")
			if !strings.HasPrefix(got, "id:\nevent: error\n") || !strings.Contains(got, `"code":"last_event_id_unknown"`) {
				t.Fatalf("Last-Event-ID %s: the stream sent %q, want an error event resetting the id", lastID, got)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Last-Event-ID %s: the stream stayed open and silent", lastID)
		}
	}

	// The newest id resumes: the stream stays open and brings the next turn.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/v1/sessions/s1/events", nil)
	req.Header.Set("Last-Event-ID", last)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got := make(chan []frame, 1)
	go func() {
		got <- readFrames(t, resp.Body, func(f frame) bool { return f.event == "runtime.request.completed" })
	}()
	time.Sleep(50 * time.Millisecond)
	post(t, ts.URL+"/v1/sessions/s1/messages", `{"content":"where is order 5?"}`, nil)
	fs := <-got
	if len(fs) == 0 || fs[0].event == "error" || fs[len(fs)-1].event != "runtime.request.completed" {
		t.Fatalf("resuming from the newest id: %+v", fs)
	}
	if fs[0].id <= last && len(fs[0].id) <= len(last) {
		t.Fatalf("resuming from %s replayed %s", last, fs[0].id)
	}
}
