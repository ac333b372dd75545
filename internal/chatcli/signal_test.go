package chatcli_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/internal/chatcli"
)

// answeredTwice delivers every signal to the server twice: the first
// answer takes effect and its response is lost (as when the connection
// drops), and the client receives the server's answer to the second.
type answeredTwice struct {
	status atomic.Int32 // the status of the last second answer
}

func (a *answeredTwice) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/signals") {
		return http.DefaultTransport.RoundTrip(r)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	first := r.Clone(r.Context())
	first.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := http.DefaultTransport.RoundTrip(first)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	again := r.Clone(r.Context())
	again.Body = io.NopCloser(bytes.NewReader(body))
	resp, err = http.DefaultTransport.RoundTrip(again)
	if err == nil {
		a.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// TestChatAnswerAfterTheDecisionTookEffect: an approval is answered
// again after the first answer took effect (its response lost with a
// dropped connection). The server answers 409
// harness_signal_correlation_failed, and the client says the earlier
// answer took effect, not that a newer message, another client or a
// delete closed the turn (the 404 case).
func TestChatAnswerAfterTheDecisionTookEffect(t *testing.T) {
	ts := newDemoServer(t)
	tr := &answeredTwice{}
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: ts.URL, HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	s := startChat(t, chatcli.Config{Client: c, Session: "shop"})
	s.waitFor("you> ")
	s.send("refund order 7")
	s.waitFor("? [y/N/comment] ")
	s.send("y")
	got := s.waitFor("you> ")
	if st := tr.status.Load(); st != http.StatusConflict {
		t.Fatalf("the server answered the second answer %d, want 409 (the test needs it)", st)
	}
	if !strings.Contains(got, "an earlier answer took effect") || strings.Contains(got, "a newer message, another client or a delete closed it") {
		t.Fatalf("the answer to a decided call:\n%s", got)
	}
	s.quit()
}
