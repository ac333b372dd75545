package server_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/server"
)

// A client that reads its answer slowly, or not at all, holds no turn
// slot once its turn has ended: on a server of one turn slot, another
// client's turn gets through while the first client's answer (a JSON
// body, or a stream's last frames) still waits to be read, and the
// first client, reading at last, gets its whole answer.
func TestSlowAnswerHoldsNoTurnSlot(t *testing.T) {
	const chunks, size = 128, 4 << 10 // 512 KiB: more than the socket buffers hold, less than a stream's buffer
	// One turn at a time; a turn waits this long for the slot.
	ts := floodServer(t, floodModel{chunks, size}, func(c *server.Config) { c.MaxTurns, c.QueueWait = 1, 3*time.Second })

	cases := []struct {
		name, path, body string
		session          bool   // the session goes in the path ({sid}), else in a header
		end              string // how the whole answer ends
	}{
		{name: "rest", path: "/v1/sessions/{sid}/messages", body: `{"content":"flood"}`, session: true, end: `}`},
		{name: "chat", path: "/v1/chat/completions", body: `{"model":"demo","messages":[{"role":"user","content":"flood"}]}`, end: `}`},
		{name: "chat-stream", path: "/v1/chat/completions", body: `{"model":"demo","stream":true,"messages":[{"role":"user","content":"flood"}]}`, end: "data: [DONE]"},
		{name: "responses", path: "/v1/responses", body: `{"model":"demo","input":"flood"}`, end: `}`},
		{name: "responses-stream", path: "/v1/responses", body: `{"model":"demo","stream":true,"input":"flood"}`, end: "response.completed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sid := "slow-" + c.name
			path, header := c.path, fmt.Sprintf("%s: %s\r\n", server.SessionHeader, sid)
			if c.session {
				path, header = strings.Replace(path, "{sid}", sid, 1), ""
			}
			conn := dialStalled(t, ts.Listener.Addr().String())
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
				"%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", path, oaiToken, header, len(c.body), c.body)
			for runStatus(t, ts, sid) != "completed" {
			}

			// The first client has read nothing: its answer waits in the
			// server. Another client's turn gets the slot.
			resp := call(t, ts, "POST", "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hello"}]}`,
				map[string]string{server.SessionHeader: "other-" + c.name}, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("another client's turn answered %d while the first client's answer was unread: the unread answer held the turn slot", resp.StatusCode)
			}

			// The first client reads its whole answer.
			if err := conn.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			r, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(r.Body)
			if err != nil || r.StatusCode != http.StatusOK {
				t.Fatalf("status %d, %d bytes, %v", r.StatusCode, len(body), err)
			}
			if len(body) < chunks*size || !bytes.HasSuffix(bytes.TrimSpace(body), []byte(c.end)) && !bytes.Contains(body, []byte(c.end)) {
				t.Fatalf("the answer is not whole: %d bytes, ending %q", len(body), body[max(0, len(body)-80):])
			}
		})
	}
}
