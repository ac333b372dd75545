package langfuse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
)

func spanEvent(i int) langfuse.Event {
	t := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return langfuse.Event{ID: fmt.Sprintf("ev-%d", i), Type: langfuse.SpanCreate, Timestamp: t,
		Body: &langfuse.ObservationBody{ID: fmt.Sprintf("obs-%d", i), TraceID: "0123456789abcdef0123456789abcdef", Name: "n", StartTime: &t}}
}

func events(n int) []langfuse.Event {
	out := make([]langfuse.Event, n)
	for i := range out {
		out[i] = spanEvent(i)
	}
	return out
}

func newClient(t *testing.T, cfg langfuse.ClientConfig) *langfuse.Client {
	t.Helper()
	c, err := langfuse.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown(context.Background()) })
	return c
}

func flush(t *testing.T, c *langfuse.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestClientSendsBatchesWithAuth(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	cfg := srv.ClientConfig()
	cfg.BatchSize = 10
	cfg.FlushInterval = time.Hour // only the batch size and Flush send
	c := newClient(t, cfg)
	c.Export(events(25))
	flush(t, c)
	if p := srv.Problems(); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	if got := len(srv.Events()); got != 25 {
		t.Fatalf("server accepted %d events, want 25", got)
	}
	if n := srv.Requests(); n != 3 {
		t.Errorf("%d requests, want 3 (batches of 10, 10, 5)", n)
	}
	if s := c.Stats(); s.Sent != 25 || s.Dropped+s.Failed+s.Rejected != 0 {
		t.Errorf("stats %+v", s)
	}
}

func TestClientWrongKeyIsRefusedNotRetried(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	logs := &syncbuf.Buffer{}
	cfg := srv.ClientConfig()
	cfg.SecretKey = "sk-lf-WRONG-secret"
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	c := newClient(t, cfg)
	c.Export(events(3))
	flush(t, c)
	if n := srv.Requests(); n != 1 {
		t.Errorf("%d requests, want 1 (401 is not retried)", n)
	}
	if s := c.Stats(); s.Failed != 3 || s.Sent != 0 {
		t.Errorf("stats %+v", s)
	}
	if out := logs.String(); !strings.Contains(out, "not authorized") || strings.Contains(out, "sk-lf-WRONG-secret") {
		t.Errorf("log %q: want the authorization warning without the secret", out)
	}
}

func TestClientRetriesTransientFailures(t *testing.T) {
	for _, status := range []int{http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := langfusetest.NewServer()
			defer srv.Close()
			srv.FailNext(2, status, "")
			c := newClient(t, srv.ClientConfig())
			c.Export(events(4))
			flush(t, c)
			if n := srv.Requests(); n != 3 {
				t.Errorf("%d requests, want 3 (two failures, then success)", n)
			}
			if s := c.Stats(); s.Sent != 4 || s.Failed != 0 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestClientGivesUpAfterMaxRetries(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	srv.FailNext(10, http.StatusBadGateway, "")
	cfg := srv.ClientConfig()
	cfg.MaxRetries = 2
	c := newClient(t, cfg)
	c.Export(events(2))
	flush(t, c)
	if n := srv.Requests(); n != 3 {
		t.Errorf("%d requests, want 3 (one attempt, two retries)", n)
	}
	if s := c.Stats(); s.Failed != 2 {
		t.Errorf("stats %+v", s)
	}
}

func TestClientHonoursRetryAfterUpToTheCap(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	srv.FailNext(1, http.StatusTooManyRequests, "1")
	cfg := srv.ClientConfig()
	cfg.MaxRetryBackoff = 300 * time.Millisecond
	c := newClient(t, cfg)
	start := time.Now()
	c.Export(events(1))
	flush(t, c)
	if d := time.Since(start); d < 250*time.Millisecond || d > 3*time.Second {
		t.Errorf("retry after %v: want Retry-After (1s) capped at 300ms", d)
	}
	if s := c.Stats(); s.Sent != 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestClientCountsRejectedEvents(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	c := newClient(t, srv.ClientConfig())
	bad := spanEvent(1)
	bad.Body.(*langfuse.ObservationBody).TraceID = "" // refused individually
	c.Export([]langfuse.Event{spanEvent(0), bad, spanEvent(2)})
	flush(t, c)
	if s := c.Stats(); s.Sent != 2 || s.Rejected != 1 {
		t.Errorf("stats %+v", s)
	}
}

// blockingServer answers nothing until released.
func blockingServer(t *testing.T) (*httptest.Server, chan struct{}, *atomic.Int64) {
	release := make(chan struct{})
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusMultiStatus)
		_, _ = w.Write([]byte(`{"successes":[],"errors":[]}`))
	}))
	t.Cleanup(srv.Close)
	return srv, release, &got
}

func TestClientExportNeverBlocks(t *testing.T) {
	srv, release, _ := blockingServer(t)
	defer close(release)
	c := newClient(t, langfuse.ClientConfig{Host: srv.URL, PublicKey: "pk", SecretKey: "sk", QueueSize: 5, BatchSize: 1,
		FlushInterval: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	done := make(chan struct{})
	go func() {
		for i := range 100 {
			c.Export([]langfuse.Event{spanEvent(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Export blocked behind a stalled API")
	}
	if s := c.Stats(); s.Dropped == 0 {
		t.Errorf("stats %+v: want drops once the bounded queue is full", s)
	}
}

func TestClientShutdown(t *testing.T) {
	srv := langfusetest.NewServer()
	defer srv.Close()
	cfg := srv.ClientConfig()
	cfg.FlushInterval = time.Hour
	c, err := langfuse.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Export(events(3))
	if err := c.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.Events()); got != 3 {
		t.Errorf("shutdown sent %d events, want the 3 queued", got)
	}
	c.Export(events(1))
	if err := c.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	if s := c.Stats(); s.Dropped != 1 {
		t.Errorf("stats %+v: an export after shutdown is dropped", s)
	}
	if err := c.Flush(context.Background()); err != nil {
		t.Errorf("Flush after Shutdown: %v", err)
	}
}

func TestClientShutdownDeadlineAbandonsRequests(t *testing.T) {
	srv, release, got := blockingServer(t)
	defer close(release)
	c, err := langfuse.NewClient(langfuse.ClientConfig{Host: srv.URL, PublicKey: "pk", SecretKey: "sk",
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	c.Export(events(1))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := c.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown = %v, want the deadline", err)
	}
	if got.Load() != 1 {
		t.Errorf("%d requests", got.Load())
	}
}

func TestClientConfigValidationAndRedaction(t *testing.T) {
	for _, cfg := range []langfuse.ClientConfig{
		{Host: "ftp://x", PublicKey: "pk", SecretKey: "sk"},
		{Host: "https://pk:sk@cloud.langfuse.com", PublicKey: "pk", SecretKey: "sk"},
		{Host: "https://cloud.langfuse.com", PublicKey: "pk"},
	} {
		if _, err := langfuse.NewClient(cfg); !errors.Is(err, langfuse.ErrInvalidClientConfig) {
			t.Errorf("NewClient(%v) = %v", cfg, err)
		}
	}
	cfg := langfuse.ClientConfig{Host: "https://cloud.langfuse.com", PublicKey: "pk-lf-1", SecretKey: "sk-lf-very-secret"}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "langfuse", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logs.String()} {
		if strings.Contains(s, "sk-lf-very-secret") || !strings.Contains(s, "pk-lf-1") {
			t.Errorf("rendering %q leaks the secret or lost the public key", s)
		}
	}
	if pc := cfg.PromptConfig(); pc.BaseURL != cfg.Host || pc.SecretKey != cfg.SecretKey {
		t.Errorf("PromptConfig %+v", pc)
	}
}

func TestClientConfigFromEnv(t *testing.T) {
	t.Setenv("LANGFUSE_PUBLIC_KEY", "pk-env")
	t.Setenv("LANGFUSE_SECRET_KEY", "sk-env")
	t.Setenv("LANGFUSE_HOST", "")
	t.Setenv("LANGFUSE_BASE_URL", "https://eu.example")
	cfg, ok := langfuse.ClientConfigFromEnv()
	if !ok || cfg.Host != "https://eu.example" || cfg.PublicKey != "pk-env" || cfg.SecretKey != "sk-env" {
		t.Errorf("%v %v", cfg, ok)
	}
	t.Setenv("LANGFUSE_BASE_URL", "")
	if cfg, _ := langfuse.ClientConfigFromEnv(); cfg.Host != langfuse.DefaultHost {
		t.Errorf("default host %q", cfg.Host)
	}
	t.Setenv("LANGFUSE_SECRET_KEY", "")
	if _, ok := langfuse.ClientConfigFromEnv(); ok {
		t.Error("ok without a secret key")
	}
}

// TestClientShutdownAccountsForEveryEvent: events exported while the
// client shuts down are sent or counted as dropped, none lost: an Export
// that checked the client open could enqueue behind the loop's final
// drain, where the event was neither sent nor counted.
func TestClientShutdownAccountsForEveryEvent(t *testing.T) {
	for round := range 10 {
		srv := langfusetest.NewServer()
		cfg := srv.ClientConfig()
		cfg.BatchSize = 7
		cfg.FlushInterval = time.Hour
		c, err := langfuse.NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var exported atomic.Int64
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 200 {
					select {
					case <-stop:
						return
					default:
					}
					c.Export(events(3))
					exported.Add(3)
				}
			})
		}
		time.Sleep(time.Millisecond)
		if err := c.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		close(stop)
		wg.Wait()
		s := c.Stats()
		if got := s.Sent + s.Dropped + s.Failed + s.Rejected; got != exported.Load() {
			t.Fatalf("round %d: %d exported, %d accounted for (%+v)", round, exported.Load(), got, s)
		}
		srv.Close()
	}
}
