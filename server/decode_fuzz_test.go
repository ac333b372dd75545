package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/chat"
)

// fuzzRequest is a POST of body, capped as the server caps bodies.
func fuzzRequest(body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://localhost/v1/sessions/s/messages", bytes.NewReader(body))
	r.Body = http.MaxBytesReader(httptest.NewRecorder(), r.Body, 1<<20)
	return r
}

// checkDecodeErr fails unless err is a 400 *Error with a code and a
// message that does not echo the body.
func checkDecodeErr(t *testing.T, err error, body []byte) {
	t.Helper()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return
	}
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Code == "" || ae.Message == "" {
		t.Fatalf("error %#v is not a 400 *Error", err)
	}
	if len(body) > 24 && bytes.Contains([]byte(ae.Message), body) {
		t.Fatalf("the error echoes the body: %q", ae.Message)
	}
}

func FuzzDecodeSend(f *testing.F) {
	for _, seed := range []string{
		`{"content":"refund order 91"}`,
		`{"content":"hi","message_id":"m-1","agent":"support"}`,
		`{"message":{"role":"user","content":[{"type":"text","text":"hi"}]}}`,
		`{"message":{"role":"tool","tool_call_id":"c1","content":"r"}}`,
		`{"message":{"role":"user"}}`, `{"message_id":7}`, `{"content":null}`,
		`[]`, `null`, `{`, ``, `{"a":1}{"b":2}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, msg, err := decodeSend(fuzzRequest(body))
		if err != nil {
			checkDecodeErr(t, err, body)
			return
		}
		if len(req.MessageID) > chat.MaxIDLength || len(req.Agent) > maxAgentName {
			t.Fatalf("an id over its bound was accepted: message_id %d, agent %d bytes", len(req.MessageID), len(req.Agent))
		}
		if req.Message == nil && (msg.Role != "user" || msg.Text() != req.Content) {
			t.Fatalf("content %q became %+v", req.Content, msg)
		}
		if msg.Role != "user" {
			t.Fatalf("a %q message was accepted: the REST API sends the user's", msg.Role)
		}
	})
}

func FuzzDecodeSignal(f *testing.F) {
	for _, seed := range []string{
		`{"signal_id":"approval:call_1","payload":{"approval":{"approved":true}}}`,
		`{"invocation_id":"inv-1","payload":{"approval":{"approved":false,"comment":"no"}},"agent":"a"}`,
		`{"signal_id":"approval:call_1","payload":{"approval":{"approved":1}}}`,
		`{"signal_id":"x","payload":[]}`, `{"payload":{}}`, `{"signal_id":5}`,
		`[]`, `null`, `{`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeSignal(fuzzRequest(body))
		if err != nil {
			checkDecodeErr(t, err, body)
			return
		}
		if req.SignalID == "" && req.InvocationID == "" {
			t.Fatal("a signal naming nothing was accepted")
		}
		if len(req.SignalID) > chat.MaxIDLength || len(req.InvocationID) > chat.MaxIDLength || len(req.Agent) > maxAgentName {
			t.Fatal("an id over its bound was accepted")
		}
	})
}

func FuzzDecodeCreateSession(f *testing.F) {
	for _, seed := range []string{`{"session_id":"c1"}`, `{}`, `{"session_id":""}`, `{"session_id":"a b"}`, `{"session_id":[1]}`, `7`, ``} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := decodeCreateSession(fuzzRequest(body))
		if err != nil {
			checkDecodeErr(t, err, body)
			return
		}
		if !validID(id) {
			t.Fatalf("invalid session id %q accepted", id)
		}
	})
}

// cutBody yields a whole JSON value, then fails as a body cut short of
// its Content-Length does when the client closes the connection.
type cutBody struct{ r io.Reader }

func (b *cutBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if errors.Is(err, io.EOF) {
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

func (b *cutBody) Close() error { return nil }

// A body cut short after a whole JSON value is 400, not decoded: the
// request is incomplete. Before, the REST sends ran the turn.
func TestDecodeJSONCutBody(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/sessions/s/messages", nil)
	r.Body = &cutBody{r: strings.NewReader(`{"content":"refund order 4"}`)}
	var v struct {
		Content string `json:"content"`
	}
	err := decodeJSON(r, &v)
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Fatalf("decodeJSON of a cut body: %v, want a 400", err)
	}
	r.Body = io.NopCloser(strings.NewReader(`{"content":"refund order 4"}  `))
	if err := decodeJSON(r, &v); err != nil || v.Content != "refund order 4" {
		t.Fatalf("decodeJSON of a whole body: %v, %+v", err, v)
	}
}
