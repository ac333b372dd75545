package wire_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm/internal/wire"
)

const key = "secret-key-123"

func TestWithTimeout(t *testing.T) {
	parent, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	tests := []struct {
		name     string
		ctx      context.Context
		d        time.Duration
		deadline bool
	}{
		{"default", context.Background(), 0, true},
		{"explicit", context.Background(), time.Minute, true},
		{"negative means none", context.Background(), -1, false},
		{"caller deadline wins", parent, time.Nanosecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := wire.WithTimeout(tt.ctx, tt.d, time.Hour)
			defer cancel()
			_, ok := ctx.Deadline()
			if ok != tt.deadline {
				t.Fatalf("deadline set %v, want %v", ok, tt.deadline)
			}
			if tt.ctx == parent && ctx != parent {
				t.Fatal("a caller deadline was wrapped")
			}
		})
	}
}

func TestNewRequestHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("x-api-key", key)
	h.Set("Fixed", "a")
	c := wire.New(wire.Config{Provider: "p", Header: h, APIKey: key, ExtraHeaders: map[string]string{"fixed": "b", "Accept": "text/plain"}})
	hreq, err := c.NewRequest(context.Background(), http.MethodPost, "http://h/x", []byte(`{}`), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	want := http.Header{"Content-Type": {"application/json"}, "Accept": {"text/plain"}, "X-Api-Key": {key}, "Fixed": {"b"}}
	if diff := cmp.Diff(want, hreq.Header); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
	hreq, err = c.NewRequest(context.Background(), http.MethodGet, "http://h/x", nil, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	if hreq.Body != nil || hreq.Header.Get("Content-Type") != "" {
		t.Errorf("bodiless request has a body or Content-Type")
	}
}

func TestTransportError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/" + key
	ln.Close()
	var logs bytes.Buffer
	c := wire.New(wire.Config{Provider: "p", APIKey: key, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	hreq, err := c.NewRequest(context.Background(), http.MethodGet, url, nil, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(context.Background(), "op", hreq)
	if !errors.Is(err, errcat.ProviderUnavailable) {
		t.Fatalf("refused: %v, want provider_unavailable", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) {
		t.Errorf("refused: %v does not unwrap to a net.Error", err)
	}
	if strings.Contains(err.Error(), key) || strings.Contains(logs.String(), key) {
		t.Errorf("key leaked: %v / %s", err, logs.String())
	}
	if !strings.Contains(logs.String(), "p: transport failure") {
		t.Errorf("no transport failure record: %s", logs.String())
	}
}

func TestCancellation(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer srv.Close()
	errCause := errors.New("turn cancelled")
	tests := []struct {
		name        string
		cancelCause bool
		ctx         func() (context.Context, context.CancelFunc)
		want        error
		cat         errcat.Category
	}{
		{"cancel", false, func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }, context.Canceled, ""},
		{"cancel with cause, ctx.Err", false, withCause(errCause), context.Canceled, ""},
		{"cancel with cause, Cause", true, withCause(errCause), errCause, ""},
		{"deadline", false, func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), time.Millisecond)
		}, context.DeadlineExceeded, errcat.ProviderUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := wire.New(wire.Config{Provider: "p", CancelCause: tt.cancelCause})
			ctx, cancel := tt.ctx()
			time.AfterFunc(10*time.Millisecond, cancel)
			hreq, err := c.NewRequest(ctx, http.MethodGet, srv.URL, nil, "application/json")
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Send(ctx, "op", hreq)
			if !errors.Is(err, tt.want) || errcat.Of(err) != tt.cat {
				t.Fatalf("err %v (category %q), want %v in category %q", err, errcat.Of(err), tt.want, tt.cat)
			}
			if tt.cat == "" && !strings.HasPrefix(err.Error(), "llm: p op: ") {
				t.Errorf("err %q lacks the llm: p op: prefix", err)
			}
		})
	}
}

func withCause(cause error) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancelCause(context.Background())
		return ctx, func() { cancel(cause) }
	}
}

func TestReadErrorBodyBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write(bytes.Repeat([]byte("x"), wire.MaxErrorBody+10))
	}))
	defer srv.Close()
	c := wire.New(wire.Config{Provider: "p"})
	hreq, err := c.NewRequest(context.Background(), http.MethodGet, srv.URL, nil, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Send(context.Background(), "op", hreq)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(wire.ReadErrorBody(resp)); got != wire.MaxErrorBody {
		t.Errorf("read %d bytes, want %d", got, wire.MaxErrorBody)
	}
}
