package server

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// The SSE writer of the OpenAI-compatible streams (chat completions and
// responses with stream: true).
//
// The turn never writes to the connection: it queues its frames in a
// bounded per-stream buffer (sseMaxQueuedBytes, sseMaxQueuedFrames)
// that a goroutine of the handler drains, each write under its own
// deadline (sseWriteTimeout). A client that reads slowly therefore
// cannot stretch the turn, which holds the session's lock: while the
// turn runs, a frame that would overflow the buffer fails the stream
// instead of waiting (what is queued is dropped, the write in progress
// is cut short and the connection is closed once the handler returns),
// and the turn runs on to its end and is recorded; the client gets its
// answer by retrying with its Idempotency-Key, or from the run record.
// Once the turn has ended (sseWriter.afterTurn), the final frames wait
// for room instead, so that a client reading at its own pace gets them
// all, in order: only the handler waits then, each write still bounded
// by its deadline.

const (
	// sseMaxQueuedBytes and sseMaxQueuedFrames bound what a stream
	// holds for its client (beyond the write in progress); a frame
	// that does not fit while the turn runs fails the stream. A frame
	// is always let into an empty buffer, whatever its size.
	sseMaxQueuedBytes  = 1 << 20
	sseMaxQueuedFrames = 4096
	// sseMaxBatchBytes bounds one write (several queued frames are
	// written and flushed together, each write under sseWriteTimeout).
	sseMaxBatchBytes = 64 << 10
)

// sseWriter writes a stream's SSE frames (see above). Its methods other
// than the drain's are the handler's (one goroutine); the headers go out
// with the first frame, and after a failed write (a gone or too slow
// client) it writes nothing. The handler calls close before it returns.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// started is set by the first frame: the headers are written and
	// the drain runs.
	started bool
	// waits, once set (afterTurn), makes frames wait for room rather
	// than fail the stream.
	waits bool
	done  chan struct{} // closed when the drain has returned

	mu    sync.Mutex
	cond  sync.Cond // on mu: the queue or the state changed
	queue [][]byte
	bytes int // queued bytes
	// closed: no frame follows; failed: a write failed or the buffer
	// overflowed (overflowed then), nothing more is written.
	closed, failed, overflowed bool
}

// newSSEWriter returns the writer of the stream answered on w.
func newSSEWriter(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w), timeout: sseWriteTimeout}
}

// start writes the headers and starts the drain (once).
func (sw *sseWriter) start() {
	if sw.started {
		return
	}
	sw.started = true
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
	sw.cond.L = &sw.mu
	sw.done = make(chan struct{})
	go sw.drain()
}

// afterTurn marks the end of the turn: the frames that follow wait for
// room in the buffer rather than fail the stream.
func (sw *sseWriter) afterTurn() { sw.waits = true }

// frame queues one SSE event (event "" is the default message event).
func (sw *sseWriter) frame(event string, data []byte) {
	sw.start()
	b := make([]byte, 0, len(event)+len(data)+16)
	if event != "" {
		b = append(append(append(b, "event: "...), event...), '\n')
	}
	b = append(append(append(b, "data: "...), data...), "\n\n"...)
	sw.mu.Lock()
	defer sw.mu.Unlock()
	for sw.waits && !sw.failed && !sw.fits(len(b)) {
		sw.cond.Wait()
	}
	switch {
	case sw.failed:
		return
	case !sw.fits(len(b)):
		// The client reads slower than the turn produces: the stream
		// fails rather than hold the turn back. The deadline cuts the
		// write in progress short (under mu, so that the drain sets no
		// later one), and the connection is closed when the handler
		// returns (its writes failed).
		sw.failed, sw.overflowed = true, true
		sw.queue, sw.bytes = nil, 0
		_ = sw.rc.SetWriteDeadline(time.Now())
		sw.cond.Broadcast()
		return
	}
	sw.queue = append(sw.queue, b)
	sw.bytes += len(b)
	sw.cond.Broadcast()
}

// fits reports whether a frame of n bytes fits in the queue (any frame
// fits in an empty one). sw.mu is held.
func (sw *sseWriter) fits(n int) bool {
	return len(sw.queue) == 0 || (sw.bytes+n <= sseMaxQueuedBytes && len(sw.queue) < sseMaxQueuedFrames)
}

func (sw *sseWriter) json(event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	sw.frame(event, b)
}

// close ends the stream: it waits until the queued frames are written
// (or a write fails) and reports whether the stream failed because the
// client read too slowly. It is a no-op on a stream that never started.
func (sw *sseWriter) close() (overflowed bool) {
	if !sw.started {
		return false
	}
	sw.mu.Lock()
	sw.closed = true
	sw.cond.Broadcast()
	sw.mu.Unlock()
	<-sw.done
	return sw.overflowed
}

// drain writes the queued frames to the client until the stream is
// closed and written, or fails. Frames queued together are written and
// flushed together (up to sseMaxBatchBytes), under a fresh deadline.
func (sw *sseWriter) drain() {
	defer close(sw.done)
	var buf []byte
	for {
		sw.mu.Lock()
		for len(sw.queue) == 0 && !sw.closed && !sw.failed {
			sw.cond.Wait()
		}
		if sw.failed || len(sw.queue) == 0 {
			sw.mu.Unlock()
			return
		}
		buf = buf[:0]
		n := 0
		for n < len(sw.queue) && (n == 0 || len(buf)+len(sw.queue[n]) <= sseMaxBatchBytes) {
			buf = append(buf, sw.queue[n]...)
			sw.queue[n] = nil
			n++
		}
		sw.queue = sw.queue[n:]
		sw.bytes -= len(buf)
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
		sw.cond.Broadcast() // room for waiting frames
		sw.mu.Unlock()
		_, err := sw.w.Write(buf)
		if err == nil {
			err = sw.rc.Flush()
		}
		if err != nil {
			sw.mu.Lock()
			sw.failed = true
			sw.queue, sw.bytes = nil, 0
			sw.cond.Broadcast()
			sw.mu.Unlock()
			return
		}
		if cap(buf) > 2*sseMaxBatchBytes {
			buf = nil // a huge single frame's buffer is not kept
		}
	}
}
