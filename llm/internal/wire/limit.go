package wire

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// DefaultMaxResponseBytes bounds what one call reads of a reply when the
// mapping's Config.MaxResponseBytes is 0: a non-streamed body, one
// stream event, and the text, reasoning and tool-call arguments a stream
// accumulates.
const DefaultMaxResponseBytes = 16 << 20

// StreamFraming is how many times its bound a stream may read in total:
// every event repeats its JSON framing (ids, model, indexes), which for
// one-token deltas is tens of times the text, so the accumulated reply is
// bounded by the bound itself and the bytes on the wire by this multiple
// of it.
const StreamFraming = 4

// MaxResponseBytes returns the bound a mapping configured with n
// applies: n, or [DefaultMaxResponseBytes] when n is 0.
func MaxResponseBytes(n int64) int64 {
	if n <= 0 {
		return DefaultMaxResponseBytes
	}
	return n
}

// StreamLimit returns the bound of a stream's total bytes for a reply
// bound limit: limit * [StreamFraming], saturating.
func StreamLimit(limit int64) int64 {
	if limit > (1<<63-1)/StreamFraming {
		return 1<<63 - 1
	}
	return limit * StreamFraming
}

// LimitReader returns a reader of r's first n bytes that fails with
// [llm.ErrResponseTooLarge] as soon as r has a byte more. Unlike
// io.LimitReader it tells a body that ends at the bound from one that
// goes on, and it never reads more than one byte past the bound.
func LimitReader(r io.Reader, n int64) io.Reader { return &limitReader{r: r, n: n} }

type limitReader struct {
	r    io.Reader
	n    int64 // bytes left before the bound
	over bool
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.over {
		return 0, llm.ErrResponseTooLarge
	}
	if len(p) == 0 {
		return 0, nil
	}
	if l.n <= 0 {
		// At the bound: one more byte means the reply is too large.
		var b [1]byte
		n, err := l.r.Read(b[:])
		if n > 0 {
			l.over = true
			return 0, llm.ErrResponseTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

// ReadBody reads a successful response's body, at most limit bytes:
// a larger body (a Content-Length over limit, or a byte past it) fails with
// [llm.ErrResponseTooLarge] before or as soon as it is read past the
// bound, and what was read is dropped. Other read errors come back as
// they are. The caller closes the body.
func ReadBody(resp *http.Response, limit int64) ([]byte, error) {
	if resp.ContentLength > limit {
		return nil, llm.ErrResponseTooLarge
	}
	var buf bytes.Buffer
	if resp.ContentLength > 0 {
		buf.Grow(int(resp.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(LimitReader(resp.Body, limit)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// TooLarge is the failure of a call whose reply exceeded limit bytes: a
// *llm.ProviderError in provider_invalid_response wrapping
// [llm.ErrResponseTooLarge]. Its message names only the bound.
func (c *Client) TooLarge(op string, status int, limit int64) *llm.ProviderError {
	return c.Fail(op, errcat.ProviderInvalidResponse, status, "",
		"the reply exceeds the size bound of "+strconv.FormatInt(limit, 10)+" bytes", llm.ErrResponseTooLarge)
}

// Budget bounds what a stream accumulates: the text, reasoning and
// tool-call arguments of its chunks, at most Max bytes in all. The zero
// value is not usable; a Budget is not safe for concurrent use.
type Budget struct {
	// Max is the bound, in bytes.
	Max  int64
	used int64
}

// Add counts c's deltas and fails with [llm.ErrResponseTooLarge] once
// the stream has accumulated more than Max bytes. A chunk carrying the
// assembled Response adds only its own deltas.
func (b *Budget) Add(c *llm.Chunk) error {
	if c == nil {
		return nil
	}
	b.used += int64(len(c.Content) + len(c.Reasoning))
	for _, d := range c.ToolCalls {
		b.used += int64(len(d.Arguments))
	}
	if b.used > b.Max {
		return llm.ErrResponseTooLarge
	}
	return nil
}

// NotEventStream returns the failure of a successful answer to a
// streaming request that is an HTML page (Content-Type text/html or
// application/xhtml+xml: a proxy's or login portal's page, or a base URL
// naming a web site), which no provider streams; nil for anything else.
// Without it such a page reads as an event stream with no event, a
// truncated stream: provider_unavailable, retried in vain. It is
// provider_invalid_response, naming the media type only.
func (c *Client) NotEventStream(op string, resp *http.Response) *llm.ProviderError {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || (mt != "text/html" && mt != "application/xhtml+xml") {
		return nil
	}
	return c.Fail(op, errcat.ProviderInvalidResponse, resp.StatusCode, "",
		"the reply is an HTML page ("+mt+"), not an event stream: is the base URL the API's?", nil)
}
