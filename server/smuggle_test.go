package server_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/servertest"
)

// A request with both Content-Length and Transfer-Encoding: chunked is
// framed by its chunks, and a proxy in front that framed it by its
// length would take the bytes after the chunks for a request of its own:
// a request smuggled past the proxy. The server answers the request and
// closes the connection (RFC 9112 §6.3), so the smuggled bytes are never
// read as a request. So does any request with a body in chunks; one
// with a Content-Length alone keeps its connection.
func TestChunkedRequestClosesItsConnection(t *testing.T) {
	ts := servertest.NewDemo(t)
	smuggled := "DELETE /v1/sessions/victim HTTP/1.1\r\nHost: " + ts.Listener.Addr().String() + "\r\n\r\n"
	tests := []struct {
		name, head, body string
		closed           bool
	}{
		{"content-length and chunked", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n", true},
		{"chunked alone", "Transfer-Encoding: chunked\r\n", "2\r\n{}\r\n0\r\n\r\n", true},
		{"content-length alone", "Content-Length: 2\r\n", "{}", false},
		{"HTTP/1.0 keep-alive, content-length and chunked", "Connection: keep-alive\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n", "{}", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ts.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			proto := "HTTP/1.1"
			if strings.HasPrefix(tc.name, "HTTP/1.0") {
				proto = "HTTP/1.0"
			}
			req := "POST /v1/sessions " + proto + "\r\nHost: " + ts.Listener.Addr().String() + "\r\nContent-Type: application/json\r\n" + tc.head + "\r\n" + tc.body
			if _, err := io.WriteString(c, req+smuggled); err != nil {
				t.Fatal(err)
			}
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			var statuses []int
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break // EOF (closed) or the read deadline (kept open)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				statuses = append(statuses, resp.StatusCode)
				if resp.Close || len(statuses) == 2 {
					break
				}
			}
			if len(statuses) == 0 || statuses[0] != http.StatusCreated {
				t.Fatalf("answers %v, want the POST's 201 first", statuses)
			}
			if tc.closed {
				if len(statuses) != 1 {
					t.Fatalf("answers %v: the bytes after the chunked body were read as a request", statuses)
				}
				_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
				if n, err := br.Read(make([]byte, 1)); err != io.EOF {
					t.Fatalf("the connection stayed open (read %d bytes, %v)", n, err)
				}
				return
			}
			if len(statuses) != 2 {
				t.Fatalf("answers %v, want the POST's and the next request's", statuses)
			}
		})
	}
}
