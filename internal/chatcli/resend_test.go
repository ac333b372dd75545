package chatcli_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/internal/chatcli"
	"github.com/armature-go/armature/llm"
)

// thinker is a model that thinks for a while before each answer,
// counting its calls.
type thinker struct {
	calls *atomic.Int32
	think time.Duration
}

func (thinker) Ready(context.Context) error { return nil }

func (m thinker) Complete(ctx context.Context, _ *llm.Request) (*llm.Response, error) {
	m.calls.Add(1)
	select {
	case <-time.After(m.think):
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	return &llm.Response{Message: llm.AssistantText("done thinking"), FinishReason: llm.FinishStop}, nil
}

// thinkingServer serves an agent on m, and returns the server and a
// reverse proxy to it.
func thinkingServer(t *testing.T, m thinker) (*httptest.Server, *httputil.ReverseProxy) {
	t.Helper()
	a, err := agent.New(agent.Config{Provider: m})
	if err != nil {
		t.Fatal(err)
	}
	ts := newServer(t, a)
	target, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return ts, httputil.NewSingleHostReverseProxy(target)
}

// TestSendResendsLostAnswers: behind a proxy that gives up on a turn
// before it ends (a gateway timeout, as nginx or a load balancer answers
// a turn longer than its idle timeout; the turn runs on in the server),
// SendMessage sends the message again under its id until the turn's
// outcome comes back: the model ran once. Without an id, or with resends
// off, the gateway's answer is the error.
func TestSendResendsLostAnswers(t *testing.T) {
	var calls atomic.Int32
	_, rp := thinkingServer(t, thinker{&calls, 300 * time.Millisecond})
	var lost atomic.Int32
	rp.Transport = &http.Transport{ResponseHeaderTimeout: 100 * time.Millisecond}
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) {
		lost.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusGatewayTimeout)
		io.WriteString(w, "<html><body><h1>504 Gateway Time-out</h1></body></html>\n")
	}
	proxy := httptest.NewServer(rp)
	t.Cleanup(proxy.Close)
	ctx := context.Background()
	client := func(wait time.Duration) *chatcli.Client {
		c, err := chatcli.NewClient(chatcli.ClientConfig{Server: proxy.URL, ResendWait: wait})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}

	out, err := client(20*time.Millisecond).SendMessage(ctx, "resent", "think it over", "m-1")
	if err != nil || out.Outcome != chatcli.OutcomeCompleted || !out.Replayed || len(out.Replies) != 1 ||
		out.Replies[0].Text() != "done thinking" {
		t.Fatalf("the resent message: %+v, %v", out, err)
	}
	if lost.Load() == 0 || calls.Load() != 1 {
		t.Fatalf("the proxy lost %d answers and the model was called %d times: want some lost and one call", lost.Load(), calls.Load())
	}

	for _, tc := range []struct {
		name, messageID string
		wait            time.Duration
	}{
		{"without a message id", "", 20 * time.Millisecond},
		{"with resends off", "m-2", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := lost.Load()
			_, err := client(tc.wait).SendMessage(ctx, "once-"+tc.messageID, "think", tc.messageID)
			var ae *chatcli.APIError
			if !errors.As(err, &ae) || ae.Status != http.StatusGatewayTimeout || lost.Load() != before+1 {
				t.Fatalf("got %v (%d lost), want the gateway's 504, sent once", err, lost.Load()-before)
			}
		})
	}
}

// TestSendResendsOnCutConnection: a connection cut before the answer (a
// proxy restarting, a network blip) after the server got the message:
// SendMessage sends it again under its id and gets the turn's outcome;
// the model ran once.
func TestSendResendsOnCutConnection(t *testing.T) {
	var calls atomic.Int32
	ts, rp := thinkingServer(t, thinker{&calls, 50 * time.Millisecond})
	var cut atomic.Bool
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !cut.CompareAndSwap(false, true) {
			rp.ServeHTTP(w, r)
			return
		}
		// The message reaches the server; its answer never comes back.
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequest(r.Method, ts.URL+r.URL.Path, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		if resp, err := ts.Client().Do(req); err == nil {
			resp.Body.Close()
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(front.Close)
	c, err := chatcli.NewClient(chatcli.ClientConfig{Server: front.URL, ResendWait: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.SendMessage(context.Background(), "cut", "think", "m-cut")
	if err != nil || out.Outcome != chatcli.OutcomeCompleted || !out.Replayed || !cut.Load() || calls.Load() != 1 {
		t.Fatalf("after a cut connection: %+v, %v (model called %d times)", out, err, calls.Load())
	}
}
