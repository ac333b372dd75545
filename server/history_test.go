package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/servertest"
)

// TestHistoryPagesOverHTTP: GET /v1/sessions/{id} answers the whole
// history with message_offset 0 and message_count, ?limit= its newest
// messages, ?before= the page before an index; bad parameters are a 400
// naming them, a page of a session that does not exist a 404.
func TestHistoryPagesOverHTTP(t *testing.T) {
	ts := servertest.NewDemo(t)
	for i := range 4 {
		resp, err := http.Post(ts.URL+"/v1/sessions/p1/messages", "application/json",
			strings.NewReader(fmt.Sprintf(`{"content":"where is order %d?"}`, i+1)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("turn %d: %s", i, resp.Status)
		}
	}
	type page struct {
		SessionID     string            `json:"session_id"`
		Version       int64             `json:"version"`
		Messages      []json.RawMessage `json:"messages"`
		MessageOffset int               `json:"message_offset"`
		MessageCount  int               `json:"message_count"`
	}
	get := func(query string) (int, page, string) {
		t.Helper()
		resp, err := http.Get(ts.URL + "/v1/sessions/p1" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		var p page
		_ = json.Unmarshal(raw, &p)
		return resp.StatusCode, p, string(raw)
	}
	code, whole, _ := get("")
	n := len(whole.Messages)
	if code != 200 || n < 8 || whole.MessageCount != n || whole.MessageOffset != 0 || whole.SessionID != "p1" || whole.Version == 0 {
		t.Fatalf("whole: %d %+v", code, whole)
	}
	same := func(what string, got []json.RawMessage, want []json.RawMessage) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
		}
		for i := range got {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("%s: message %d is %s, want %s", what, i, got[i], want[i])
			}
		}
	}
	code, last, _ := get("?limit=3")
	if code != 200 || last.MessageOffset != n-3 || last.MessageCount != n {
		t.Fatalf("?limit=3: %d %+v", code, last)
	}
	same("?limit=3", last.Messages, whole.Messages[n-3:])
	code, before, _ := get(fmt.Sprintf("?before=%d&limit=4", last.MessageOffset))
	if code != 200 || before.MessageOffset != n-7 {
		t.Fatalf("?before: %d %+v", code, before)
	}
	same("?before", before.Messages, whole.Messages[n-7:n-3])
	code, first, _ := get("?before=2")
	if code != 200 || first.MessageOffset != 0 {
		t.Fatalf("?before=2: %d %+v", code, first)
	}
	same("?before=2", first.Messages, whole.Messages[:2])
	for _, bad := range []string{"?limit=0", "?limit=10001", "?before=-3", "?before=soon"} {
		code, _, body := get(bad)
		name := strings.TrimPrefix(strings.SplitN(bad, "=", 2)[0], "?")
		if code != 400 || !strings.Contains(body, name) || !strings.Contains(body, "invalid_request") {
			t.Errorf("%s: %d %s, want a 400 invalid_request naming %s", bad, code, body, name)
		}
	}
	resp, err := http.Get(ts.URL + "/v1/sessions/nobody?limit=3&before=9")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("a page of a session that does not exist: %s, want 404", resp.Status)
	}
}
