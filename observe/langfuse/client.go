package langfuse

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armature-go/armature/prompt"
)

// IngestionPath is the Langfuse public ingestion endpoint, relative to the
// host.
const IngestionPath = "/api/public/ingestion"

// DefaultHost is the Langfuse cloud host [ClientConfigFromEnv] falls back
// to when LANGFUSE_HOST is unset.
const DefaultHost = "https://cloud.langfuse.com"

// Client defaults.
const (
	DefaultQueueSize       = 10_000
	DefaultBatchSize       = 100
	DefaultMaxBatchBytes   = 3_000_000 // the API accepts 3.5 MB per request
	DefaultFlushInterval   = time.Second
	DefaultMaxRetries      = 3
	DefaultRetryBackoff    = 500 * time.Millisecond
	DefaultMaxRetryBackoff = 10 * time.Second
	DefaultRequestTimeout  = 10 * time.Second
)

// ClientConfig configures a [Client]. Its String and LogValue methods
// redact the secret key, so logging a config never leaks it.
type ClientConfig struct {
	// Host is the Langfuse base URL (https://cloud.langfuse.com, a
	// regional cloud host or a self-hosted instance, possibly under a
	// path). Required; it must not carry credentials, a query or a
	// fragment.
	Host string
	// PublicKey and SecretKey are the project's API keys, sent as HTTP
	// basic authentication. Required.
	PublicKey, SecretKey string
	// HTTPClient sends the requests; nil means a client with Timeout.
	HTTPClient *http.Client
	// Timeout bounds one request when HTTPClient is nil (default
	// DefaultRequestTimeout).
	Timeout time.Duration
	// QueueSize bounds the events waiting to be sent; Export drops (and
	// counts) events beyond it rather than block (default
	// DefaultQueueSize).
	QueueSize int
	// BatchSize and MaxBatchBytes bound one request (defaults
	// DefaultBatchSize events, DefaultMaxBatchBytes bytes). MaxBatchBytes
	// bounds the whole request body, its envelope included; Export drops
	// (and counts) an event too large to fit a request on its own.
	BatchSize, MaxBatchBytes int
	// FlushInterval is how long an event may wait for its batch to fill
	// (default DefaultFlushInterval).
	FlushInterval time.Duration
	// MaxRetries is how often a batch is retried after a network error,
	// a 429 or a 5xx (default DefaultMaxRetries; negative: never). The
	// wait starts at RetryBackoff and doubles up to MaxRetryBackoff, with
	// jitter; a Retry-After header is honoured up to MaxRetryBackoff.
	MaxRetries                    int
	RetryBackoff, MaxRetryBackoff time.Duration
	// Logger receives the client's warnings (dropped and rejected
	// events, failed requests; never a credential); nil means
	// slog.Default().
	Logger *slog.Logger
}

// ClientConfigFromEnv returns the configuration in Langfuse's
// conventional environment variables: LANGFUSE_PUBLIC_KEY,
// LANGFUSE_SECRET_KEY and LANGFUSE_HOST (or LANGFUSE_BASE_URL; default
// DefaultHost). ok is false unless both keys are set.
func ClientConfigFromEnv() (cfg ClientConfig, ok bool) {
	cfg.PublicKey = strings.TrimSpace(os.Getenv("LANGFUSE_PUBLIC_KEY"))
	cfg.SecretKey = strings.TrimSpace(os.Getenv("LANGFUSE_SECRET_KEY"))
	cfg.Host = strings.TrimSpace(os.Getenv("LANGFUSE_HOST"))
	if cfg.Host == "" {
		cfg.Host = strings.TrimSpace(os.Getenv("LANGFUSE_BASE_URL"))
	}
	if cfg.Host == "" {
		cfg.Host = DefaultHost
	}
	return cfg, cfg.PublicKey != "" && cfg.SecretKey != ""
}

// PromptConfig returns the [prompt.LangfuseConfig] of the same project,
// so one Langfuse configuration serves both the observer and a Langfuse
// prompt backend (observability §8.9 unified configuration).
func (c ClientConfig) PromptConfig() prompt.LangfuseConfig {
	return prompt.LangfuseConfig{BaseURL: c.Host, PublicKey: c.PublicKey, SecretKey: c.SecretKey, HTTPClient: c.HTTPClient}
}

// String renders the config with the secret key redacted.
func (c ClientConfig) String() string {
	return fmt.Sprintf("langfuse.ClientConfig{Host: %q, PublicKey: %q, SecretKey: %s}", c.Host, c.PublicKey, redacted(c.SecretKey))
}

// GoString is String, for %#v.
func (c ClientConfig) GoString() string { return c.String() }

// LogValue renders the config for slog with the secret key redacted.
func (c ClientConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("host", c.Host), slog.String("public_key", c.PublicKey),
		slog.String("secret_key", redacted(c.SecretKey)))
}

func redacted(s string) string {
	if s == "" {
		return `""`
	}
	return "[redacted]"
}

// ErrInvalidClientConfig is matched by the error [NewClient] returns for
// an invalid configuration.
var ErrInvalidClientConfig = errors.New("langfuse: invalid client config")

// ClientStats counts a client's events.
type ClientStats struct {
	// Sent events were accepted by the API.
	Sent int64
	// Dropped events never left the process: the queue was full, the
	// client was shut down, or the event could not be encoded or was
	// larger than a request may be.
	Dropped int64
	// Failed events were in requests the API refused (a 4xx other than
	// 429) or that still failed after the retries.
	Failed int64
	// Rejected events were refused individually in a 207 answer.
	Rejected int64
}

// Client sends ingestion events to the Langfuse public ingestion API
// (POST {Host}/api/public/ingestion, basic authentication with the
// public and secret keys) in batches, from a background goroutine: Export
// never blocks, a bounded queue absorbs bursts (dropping and counting
// what overflows it), batches are retried with exponential backoff on
// network errors, 429 and 5xx, and [Client.Flush] / [Client.Shutdown]
// wait for what was exported. It is an [Exporter] and safe for
// concurrent use.
type Client struct {
	cfg ClientConfig
	// room is the bytes a batch's events may take: MaxBatchBytes less
	// the request envelope (batchHead, batchTail at BatchSize events).
	room   int
	url    string
	auth   string
	http   *http.Client
	logger *slog.Logger

	queue    chan []byte
	flushReq chan chan struct{}
	stop     chan struct{}
	done     chan struct{}
	ctx      context.Context
	cancel   context.CancelFunc
	once     sync.Once
	closed   atomic.Bool
	// enq is read-held by Export while it checks closed and enqueues,
	// and write-held by Shutdown while it closes: once Shutdown holds
	// it, no event can enter the queue behind the loop's final drain
	// (where it would be lost, uncounted).
	enq sync.RWMutex

	sent, dropped, failed, rejected atomic.Int64
}

// NewClient validates cfg and starts a client.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: Host %q is not an http(s) URL", ErrInvalidClientConfig, cfg.Host)
	}
	if u.User != nil {
		return nil, fmt.Errorf("%w: Host must not carry credentials; use PublicKey and SecretKey", ErrInvalidClientConfig)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		// The ingestion path is appended to Host's path: a query or
		// fragment would swallow it.
		return nil, fmt.Errorf("%w: Host %q must not carry a query or fragment", ErrInvalidClientConfig, cfg.Host)
	}
	if cfg.PublicKey == "" || cfg.SecretKey == "" {
		return nil, fmt.Errorf("%w: PublicKey and SecretKey are required", ErrInvalidClientConfig)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultRequestTimeout
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = DefaultBatchSize
	}
	if cfg.MaxBatchBytes <= 0 {
		cfg.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = DefaultRetryBackoff
	}
	if cfg.MaxRetryBackoff <= 0 {
		cfg.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	room := cfg.MaxBatchBytes - len(batchHead) - len(fmt.Sprintf(batchTail, cfg.BatchSize, ImplementationName, DefaultImplementationVersion))
	if room <= 0 {
		return nil, fmt.Errorf("%w: MaxBatchBytes %d leaves no room for events in a request", ErrInvalidClientConfig, cfg.MaxBatchBytes)
	}
	// Host's escaping (a %2F in a proxy route) is kept: the ingestion
	// path is appended to the escaped path too.
	escaped := strings.TrimRight(u.EscapedPath(), "/") + IngestionPath
	if p, err := url.PathUnescape(escaped); err == nil {
		u.Path, u.RawPath = p, escaped
	} else {
		u.Path, u.RawPath = strings.TrimRight(u.Path, "/")+IngestionPath, ""
	}
	c := &Client{
		cfg: cfg, room: room, url: u.String(),
		auth:   "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.PublicKey+":"+cfg.SecretKey)),
		http:   cfg.HTTPClient,
		logger: cfg.Logger,
		queue:  make(chan []byte, cfg.QueueSize), flushReq: make(chan chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: cfg.Timeout}
	}
	if c.logger == nil {
		c.logger = slog.Default()
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	go c.loop()
	return c, nil
}

// Export queues events for sending. It never blocks: events that do not
// fit the queue, or arrive after Shutdown, are dropped and counted.
func (c *Client) Export(events []Event) {
	c.enq.RLock()
	defer c.enq.RUnlock()
	for _, ev := range events {
		if c.closed.Load() {
			c.drop(1, "client shut down")
			continue
		}
		b, err := json.Marshal(ev)
		if err != nil {
			c.drop(1, "event not encodable")
			continue
		}
		if len(b) > c.room {
			c.drop(1, "event larger than a request may be")
			continue
		}
		select {
		case c.queue <- b:
		default:
			c.drop(1, "queue full")
		}
	}
}

// drop counts dropped events, warning on the first and every thousandth.
func (c *Client) drop(n int64, why string) {
	total := c.dropped.Add(n)
	if total == n || total/1000 != (total-n)/1000 {
		c.logger.Warn("langfuse: dropped events", "reason", why, "dropped_total", total)
	}
}

// Stats returns the client's counters.
func (c *Client) Stats() ClientStats {
	return ClientStats{Sent: c.sent.Load(), Dropped: c.dropped.Load(), Failed: c.failed.Load(), Rejected: c.rejected.Load()}
}

// Flush waits until every event exported before the call has been sent
// (or has failed), or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	ack := make(chan struct{})
	select {
	case c.flushReq <- ack:
	case <-c.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Shutdown sends what is queued and stops the client; later exports are
// dropped. If ctx ends first, pending requests are abandoned and ctx's
// error is returned. It is idempotent.
func (c *Client) Shutdown(ctx context.Context) error {
	c.once.Do(func() {
		c.enq.Lock()
		c.closed.Store(true)
		c.enq.Unlock()
		close(c.stop)
	})
	select {
	case <-c.done:
		return nil
	case <-ctx.Done():
		c.cancel()
		<-c.done
		return ctx.Err()
	}
}

func (c *Client) loop() {
	defer close(c.done)
	defer c.cancel()
	var batch [][]byte
	size := 0
	tick := time.NewTicker(c.cfg.FlushInterval)
	defer tick.Stop()
	send := func() {
		if len(batch) > 0 {
			c.send(batch)
			batch, size = nil, 0
		}
	}
	add := func(b []byte) {
		// size counts each event and the comma before it (none before
		// the first); room reserves the envelope.
		if len(batch) >= c.cfg.BatchSize || (len(batch) > 0 && size+1+len(b) > c.room) {
			send()
		}
		if len(batch) > 0 {
			size++
		}
		batch = append(batch, b)
		size += len(b)
	}
	drain := func() {
		for {
			select {
			case b := <-c.queue:
				add(b)
			default:
				return
			}
		}
	}
	for {
		select {
		case b := <-c.queue:
			add(b)
			if len(batch) >= c.cfg.BatchSize {
				send()
			}
		case <-tick.C:
			send()
		case ack := <-c.flushReq:
			drain()
			send()
			close(ack)
		case <-c.stop:
			drain()
			send()
			return
		}
	}
}

// ingestionResponse is the API's answer (200 or 207).
type ingestionResponse struct {
	Successes []struct {
		ID     string `json:"id"`
		Status int    `json:"status"`
	} `json:"successes"`
	Errors []struct {
		ID      string `json:"id"`
		Status  int    `json:"status"`
		Message string `json:"message"`
		Error   any    `json:"error"`
	} `json:"errors"`
}

// The request envelope around a batch's comma-separated events.
const (
	batchHead = `{"batch":[`
	batchTail = `],"metadata":{"batch_size":%d,"sdk_name":%q,"sdk_version":%q}}`
)

// send posts one batch, retrying transient failures.
func (c *Client) send(batch [][]byte) {
	var body bytes.Buffer
	body.WriteString(batchHead)
	for i, b := range batch {
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(b)
	}
	fmt.Fprintf(&body, batchTail, len(batch), ImplementationName, DefaultImplementationVersion)
	n := int64(len(batch))
	for attempt := 0; ; attempt++ {
		status, retryAfter, answer, err := c.post(body.Bytes())
		switch {
		case err == nil && status >= 200 && status < 300:
			var r ingestionResponse
			rejected := int64(0)
			if json.Unmarshal(answer, &r) == nil && len(r.Errors) > 0 {
				rejected = min(int64(len(r.Errors)), n)
				e := r.Errors[0]
				c.logger.Warn("langfuse: events rejected by the ingestion API", "rejected", rejected,
					"first_status", e.Status, "first_message", Truncate(e.Message, 200))
			}
			c.rejected.Add(rejected)
			c.sent.Add(n - rejected)
			return
		case err == nil && status != http.StatusTooManyRequests && status < 500:
			c.failed.Add(n)
			msg := "langfuse: ingestion request refused"
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				msg = "langfuse: ingestion request not authorized (check the public and secret keys)"
			}
			c.logger.Warn(msg, "status", status, "events", n)
			return
		}
		if attempt >= c.cfg.MaxRetries || c.ctx.Err() != nil {
			c.failed.Add(n)
			args := []any{"attempts", attempt + 1, "events", n}
			if err != nil {
				args = append(args, "error", err.Error())
			} else {
				args = append(args, "status", status)
			}
			c.logger.Warn("langfuse: ingestion request failed", args...)
			return
		}
		wait := c.backoff(attempt, retryAfter)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-c.ctx.Done():
			t.Stop()
		}
	}
}

// backoff is the wait before retry attempt+1: RetryBackoff doubled per
// attempt with jitter, at least a Retry-After, at most MaxRetryBackoff.
func (c *Client) backoff(attempt int, retryAfter time.Duration) time.Duration {
	d := c.cfg.RetryBackoff << min(attempt, 20)
	if d <= 0 || d > c.cfg.MaxRetryBackoff {
		d = c.cfg.MaxRetryBackoff
	}
	d = d/2 + rand.N(d/2+1)
	if retryAfter > d {
		d = retryAfter
	}
	return min(d, c.cfg.MaxRetryBackoff)
}

// post sends one request; it returns the status, the Retry-After delay
// and the answer body.
func (c *Client) post(body []byte) (int, time.Duration, []byte, error) {
	req, err := http.NewRequestWithContext(c.ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("User-Agent", ImplementationName+"-langfuse/"+DefaultImplementationVersion)
	req.Header.Set("X-Langfuse-Sdk-Name", ImplementationName)
	req.Header.Set("X-Langfuse-Sdk-Version", DefaultImplementationVersion)
	req.Header.Set("X-Langfuse-Public-Key", c.cfg.PublicKey)
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, nil, scrub(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, retryAfter(resp.Header.Get("Retry-After")), answer, nil
}

// scrub reduces a transport error to its cause, without the request
// (whose URL is the only identifying part: credentials travel in a
// header and never appear in an error).
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %s: %w", ue.Op, IngestionPath, ue.Err)
	}
	return err
}

// retryAfter parses a Retry-After header (seconds or an HTTP date).
func retryAfter(h string) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil {
		if d := time.Until(t); d > 0 {
			return d
		}
	}
	return 0
}
