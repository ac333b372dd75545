package wire_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/internal/wire"
)

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestReadBody(t *testing.T) {
	const limit = 1000
	tests := []struct {
		name          string
		size          int
		contentLength int64 // -1: unknown (chunked)
		wantErr       error
		maxRead       int64 // bytes the body may be read
	}{
		{"empty", 0, 0, nil, 0},
		{"under", limit - 1, limit - 1, nil, limit},
		{"at the bound", limit, limit, nil, limit + 1},
		{"at the bound, chunked", limit, -1, nil, limit + 1},
		{"one over, chunked", limit + 1, -1, llm.ErrResponseTooLarge, limit + 1},
		{"far over, chunked", 50 * limit, -1, llm.ErrResponseTooLarge, limit + 1},
		{"over by Content-Length: nothing read", 50 * limit, 50 * limit, llm.ErrResponseTooLarge, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingReader{r: iotest.HalfReader(bytes.NewReader(bytes.Repeat([]byte("x"), tt.size)))}
			resp := &http.Response{Body: io.NopCloser(body), ContentLength: tt.contentLength}
			data, err := wire.ReadBody(resp, limit)
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if err == nil && len(data) != tt.size {
				t.Errorf("read %d bytes, want %d", len(data), tt.size)
			}
			if err != nil && data != nil {
				t.Errorf("a failed read returned %d bytes", len(data))
			}
			if body.n > tt.maxRead {
				t.Errorf("read %d bytes of the body, want at most %d", body.n, tt.maxRead)
			}
		})
	}
}

func TestReadSSEBounds(t *testing.T) {
	const limit = 100
	big := strings.Repeat("x", limit+1)
	tests := []struct {
		name    string
		stream  string
		want    []string
		wantErr error
	}{
		{"a line at the bound", "data: " + big[:limit-6] + "\n\n", []string{big[:limit-6]}, nil},
		{"a line at the bound, CRLF", "data: " + big[:limit-6] + "\r\n\r\n", []string{big[:limit-6]}, nil},
		{"a line one over", "data: " + big[:limit-5] + "\n\n", nil, llm.ErrResponseTooLarge},
		{"one enormous line", "data: " + strings.Repeat("y", 50*limit) + "\n\n", nil, llm.ErrResponseTooLarge},
		{"one enormous line, no line break", "data: " + strings.Repeat("y", 50*limit), nil, llm.ErrResponseTooLarge},
		{"an event of many lines", strings.Repeat("data: "+big[:40]+"\n", 3) + "\n", nil, llm.ErrResponseTooLarge},
		{"events before the big one are delivered", "data: a\n\ndata: " + big + big + "\n\n", []string{"a"}, llm.ErrResponseTooLarge},
		{"many small events", strings.Repeat("data: "+big[:limit-6]+"\n\n", 20), func() []string {
			var w []string
			for range 20 {
				w = append(w, big[:limit-6])
			}
			return w
		}(), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := wire.ReadSSE(strings.NewReader(tt.stream), limit, func(d []byte) (bool, error) {
				got = append(got, string(d))
				return true, nil
			})
			if !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Fatalf("err %v, want %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("%d events, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("event %d: %d bytes, want %d", i, len(got[i]), len(tt.want[i]))
				}
			}
		})
	}
}

func TestLimitReaderStops(t *testing.T) {
	src := &countingReader{r: strings.NewReader(strings.Repeat("z", 1<<20))}
	n, err := io.Copy(io.Discard, wire.LimitReader(src, 4096))
	if !errors.Is(err, llm.ErrResponseTooLarge) || n != 4096 {
		t.Fatalf("copied %d, err %v; want 4096 and ErrResponseTooLarge", n, err)
	}
	if src.n > 4097 {
		t.Errorf("read %d bytes of the source, want at most 4097", src.n)
	}
	if _, err := wire.LimitReader(src, 0).Read(make([]byte, 8)); !errors.Is(err, llm.ErrResponseTooLarge) {
		t.Errorf("a zero bound on a non-empty source: %v", err)
	}
}

func TestBudget(t *testing.T) {
	b := wire.Budget{Max: 10}
	steps := []struct {
		c    *llm.Chunk
		fail bool
	}{
		{&llm.Chunk{Content: "abcd"}, false},
		{&llm.Chunk{Reasoning: "ef"}, false},
		{nil, false},
		{&llm.Chunk{ToolCalls: []llm.ToolCallDelta{{Arguments: "ghij"}}}, false}, // exactly 10
		{&llm.Chunk{Content: "k"}, true},
	}
	for i, s := range steps {
		if err := b.Add(s.c); (err != nil) != s.fail || (err != nil && !errors.Is(err, llm.ErrResponseTooLarge)) {
			t.Fatalf("step %d: err %v, want failure %v", i, err, s.fail)
		}
	}
}

func TestTooLarge(t *testing.T) {
	c := wire.New(wire.Config{Provider: "p", APIKey: key})
	err := c.TooLarge("stream", 200, 1<<20)
	if errcat.Of(err) != errcat.ProviderInvalidResponse || !errors.Is(err, llm.ErrResponseTooLarge) {
		t.Fatalf("%v: category %q, want provider_invalid_response wrapping ErrResponseTooLarge", err, errcat.Of(err))
	}
	if want := "llm: p stream: provider_invalid_response (HTTP 200): the reply exceeds the size bound of 1048576 bytes"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("message %q, want prefix %q", err.Error(), want)
	}
}

func TestMaxResponseBytes(t *testing.T) {
	if got := wire.MaxResponseBytes(0); got != wire.DefaultMaxResponseBytes {
		t.Errorf("0 → %d, want the default", got)
	}
	if got := wire.MaxResponseBytes(1 << 30); got != 1<<30 {
		t.Errorf("1 GiB → %d", got)
	}
	if got := wire.StreamLimit(1 << 62); got != 1<<63-1 {
		t.Errorf("StreamLimit does not saturate: %d", got)
	}
}

// TestRetryAfterBounds: a Retry-After in seconds is honoured up to a
// day, and a longer one (however large) is clamped to a day; anything
// else (Inf, NaN, an exponent, negative, zero, unreadable) is absent
// (0). Before, a value past the range of time.Duration overflowed into a
// negative wait; then a wait over a day was dropped as absent, and the
// server answered its client to retry after 1s.
func TestRetryAfterBounds(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"7", 7 * time.Second},
		{"1.5", 1500 * time.Millisecond},
		{"86400", 24 * time.Hour},
		{"86401", 24 * time.Hour},
		{"99999999999999999999", 24 * time.Hour},
		{"1e300", 0},
		{"Inf", 0},
		{"NaN", 0},
		{"-3", 0},
		{"0", 0},
		{"soon", 0},
		{"", 0},
	} {
		if got := wire.RetryAfter(tc.v); got != tc.want {
			t.Errorf("RetryAfter(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
