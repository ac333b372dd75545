package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// The SSE writer of the OpenAI-compatible streams (chat completions and
// responses with stream: true).
//
// The turn never writes to the connection: it queues its frames in a
// bounded per-stream buffer (sseMaxQueuedBytes) that a goroutine of the
// handler drains, each write under its own deadline (sseWriteTimeout).
// The drain sends the response's headers as soon as the stream opens,
// so a client always has its 200 before anything can go wrong with the
// stream (a client library retries a request that got no response, and
// a retry without an Idempotency-Key is another turn).
//
// A client that reads slowly cannot stretch the turn, which holds the
// session's lock, by much: a frame that does not fit waits for room
// while the drain makes progress (a write of sseMaxBatchBytes at most
// completes at least every sseStallIdle), and for sseMaxStall in all at
// most. The wait also lets the drain run on a machine whose cores the
// turn keeps busy: a client that reads as fast as it can gets the whole
// stream. Past either bound the stream falls behind: what is queued is
// dropped, and so is every frame until the turn ends, which runs on to
// its end and is recorded. The stream then ends with an error frame
// saying so (stream_dropped) once the write in progress is done, rather
// than with the turn's final frames: the client gets the answer by
// retrying with its Idempotency-Key, or from the run record. Once the turn has ended
// (sseWriter.afterTurn), the final frames wait for room instead, so that
// a client reading at its own pace gets them all, in order: only the
// handler waits then, each write still bounded by its deadline.

const (
	// sseMaxQueuedBytes bounds what a stream holds for its client
	// (beyond the write in progress). A frame is always let into an
	// empty buffer, whatever its size.
	sseMaxQueuedBytes = 1 << 20
	// sseMaxBatchBytes bounds one write: the drain's progress is
	// measured in writes.
	sseMaxBatchBytes = 64 << 10
	// sseStallIdle bounds how long a frame waits for room without the
	// drain completing a write (a client that stopped reading), and
	// sseMaxStall how long, in all, a stream's frames wait for room
	// while the turn runs (a client reading slower than the turn
	// writes).
	sseStallIdle = time.Second
	sseMaxStall  = 5 * time.Second
)

// sseWriter writes a stream's SSE frames (see above). Its methods other
// than the drain's and the keep-alive's are the handler's (one
// goroutine); the headers go out when the first frame is queued, or
// when the keep-alive opens a quiet stream (see keepAlive), and after a
// failed write (a gone client) it writes nothing. The handler calls
// close before it returns.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// waits, once set (afterTurn), makes frames wait for room rather
	// than fall behind.
	waits bool
	// stalled is how long the turn's frames have waited for room.
	stalled time.Duration
	done    chan struct{} // closed when the drain has returned

	mu   sync.Mutex
	cond sync.Cond // on mu: the queue or the state changed
	// opened is set when the headers are written and the drain runs: by
	// the first frame, or by the keep-alive.
	opened bool
	// queue[head:] holds the queued frames, back to back (the drain
	// takes them from head, whole frames at a time).
	queue []byte
	head  int
	// wrote is when the drain last completed a write, queued when a
	// frame (or a keep-alive comment) was last queued.
	wrote, queued time.Time
	// closed: no frame follows; failed: a write failed, nothing more is
	// written; behind: the stream fell behind the turn (frames are
	// dropped until afterTurn).
	closed, failed, behind bool
}

// frameEnd ends every frame.
var frameEnd = []byte("\n\n")

// newSSEWriter returns the writer of the stream answered on w.
func newSSEWriter(w http.ResponseWriter) *sseWriter {
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: sseWriteTimeout, done: make(chan struct{})}
	sw.cond.L = &sw.mu
	return sw
}

// open writes the headers and starts the drain (once), which sends
// them at once.
func (sw *sseWriter) open() {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.openLocked()
}

// openLocked is open with sw.mu held.
func (sw *sseWriter) openLocked() {
	if sw.opened {
		return
	}
	sw.opened = true
	h := sw.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	sw.w.WriteHeader(http.StatusOK)
	go sw.drain()
}

// isOpen reports whether the stream's headers went out: from then on a
// failure is told in the stream, not by the response's status.
func (sw *sseWriter) isOpen() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.opened
}

// keepAlive keeps a quiet stream's connection alive, for the proxies
// and load balancers that drop a connection idle for a while (60 s is
// common) while a turn's model thinks, or its tool runs, longer than
// that: each time interval passes with nothing queued, it opens the
// stream (its headers: from then on the status is 200 and a failure is
// told in the stream) and queues a comment line, ": keep-alive", which
// SSE clients skip. It returns its stop, which the handler calls once
// the turn has ended, before afterTurn: no comment is queued after it
// returns. interval <= 0 keeps nothing alive.
func (sw *sseWriter) keepAlive(interval time.Duration) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	var mu sync.Mutex
	stopped := false
	mu.Lock()
	defer mu.Unlock()
	var t *time.Timer
	t = time.AfterFunc(interval, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(sw.ping(interval))
		}
	})
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// keepAliveFrame is the comment line a quiet stream gets (keepAlive;
// the session event stream's heartbeat too).
const keepAliveFrame = ": keep-alive\n\n"

// ping queues a keep-alive comment when nothing was queued for
// interval, opening the stream first, and returns when to look again.
func (sw *sseWriter) ping(interval time.Duration) time.Duration {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if idle := time.Since(sw.queued); sw.opened && idle < interval {
		return interval - idle
	}
	sw.openLocked()
	if !sw.failed && !sw.behind && !sw.closed && sw.empty() {
		sw.queue = append(sw.queue, keepAliveFrame...)
		sw.cond.Broadcast()
	}
	sw.queued = time.Now()
	return interval
}

// afterTurn marks the end of the turn: the frames that follow wait for
// room in the buffer. It reports whether the stream fell behind the
// turn: its frames were dropped, and the handler ends it with an error
// frame (see above) rather than the turn's final frames.
func (sw *sseWriter) afterTurn() (behind bool) {
	sw.waits = true
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.behind
}

// frame queues one SSE event (event "" is the default message event).
// data holds no newline (JSON holds none): a frame's only blank line
// ends it.
func (sw *sseWriter) frame(event string, data []byte) {
	sw.open()
	n := len(data) + len("data: \n\n")
	if event != "" {
		n += len(event) + len("event: \n")
	}
	sw.mu.Lock()
	defer sw.mu.Unlock()
	sw.queued = time.Now()
	var began time.Time
	for !sw.failed && !sw.fits(n) {
		if sw.waits {
			sw.cond.Wait()
			continue
		}
		if began.IsZero() {
			began = time.Now()
		}
		if sw.behind || !sw.stall(began) {
			break
		}
	}
	switch {
	case sw.failed || (sw.behind && !sw.waits):
		return
	case !sw.fits(n):
		// The client reads slower than the turn produces: the stream
		// falls behind rather than hold the turn back. What is queued
		// goes; the write in progress runs on under its deadline.
		sw.behind = true
		sw.queue, sw.head = sw.queue[:0], 0
		sw.cond.Broadcast()
		return
	}
	if sw.head > 0 && len(sw.queue)+n > cap(sw.queue) {
		// Room at the front: the queued bytes move there rather than
		// the queue grow.
		sw.queue = sw.queue[:copy(sw.queue, sw.queue[sw.head:])]
		sw.head = 0
	}
	if event != "" {
		sw.queue = append(append(append(sw.queue, "event: "...), event...), '\n')
	}
	sw.queue = append(append(append(sw.queue, "data: "...), data...), "\n\n"...)
	sw.cond.Broadcast()
}

// stall waits for room (a change of the queue) unless the drain has
// completed no write for sseStallIdle since the frame began waiting
// (began), or the stream's frames waited sseMaxStall in all; it reports
// whether it waited. sw.mu is held.
func (sw *sseWriter) stall(began time.Time) bool {
	now := time.Now()
	last := sw.wrote
	if last.Before(began) {
		last = began
	}
	wait := min(sseStallIdle-now.Sub(last), sseMaxStall-sw.stalled)
	if wait <= 0 {
		return false
	}
	t := time.AfterFunc(wait, func() {
		sw.mu.Lock()
		sw.cond.Broadcast()
		sw.mu.Unlock()
	})
	sw.cond.Wait()
	t.Stop()
	sw.stalled += time.Since(now)
	return true
}

// fits reports whether a frame of n bytes fits in the queue (any frame
// fits in an empty one). sw.mu is held.
func (sw *sseWriter) fits(n int) bool {
	return sw.empty() || len(sw.queue)-sw.head+n <= sseMaxQueuedBytes
}

// empty reports whether nothing is queued. sw.mu is held.
func (sw *sseWriter) empty() bool { return sw.head == len(sw.queue) }

// batch is the end of the next write: the queued frames from head up
// to sseMaxBatchBytes, or the first frame when it is longer. A write
// ends at a frame's end, so that a stream that falls behind (its queue
// dropped) or ends still has whole frames on the wire. A frame ends with
// its only blank line: its data is JSON, which holds no newline. sw.mu
// is held.
func (sw *sseWriter) batch() int {
	q := sw.queue[sw.head:]
	if i := bytes.LastIndex(q[:min(len(q), sseMaxBatchBytes)], frameEnd); i >= 0 {
		return sw.head + i + len(frameEnd)
	}
	if i := bytes.Index(q, frameEnd); i >= 0 {
		return sw.head + i + len(frameEnd)
	}
	return len(sw.queue)
}

func (sw *sseWriter) json(event string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	sw.frame(event, b)
}

// close ends the stream: it waits until the queued frames are written
// (or a write fails) and reports whether the stream fell behind the
// turn. It is a no-op on a stream that never opened.
func (sw *sseWriter) close() (behind bool) {
	sw.mu.Lock()
	if !sw.opened {
		sw.mu.Unlock()
		return false
	}
	sw.closed = true
	sw.cond.Broadcast()
	sw.mu.Unlock()
	<-sw.done
	return sw.behind
}

// drain sends the headers, then writes the queued frames to the client
// until the stream is closed and written, or fails. It writes what is
// queued in writes of sseMaxBatchBytes at most, each flushed and under a
// fresh deadline.
func (sw *sseWriter) drain() {
	defer close(sw.done)
	_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
	if err := sw.rc.Flush(); err != nil {
		sw.fail()
		return
	}
	buf := make([]byte, 0, sseMaxBatchBytes)
	for {
		sw.mu.Lock()
		for sw.empty() && !sw.closed && !sw.failed {
			sw.cond.Wait()
		}
		if sw.failed || sw.empty() {
			sw.mu.Unlock()
			return
		}
		end := sw.batch()
		buf = append(buf[:0], sw.queue[sw.head:end]...)
		sw.head = end
		if sw.empty() {
			sw.queue, sw.head = sw.queue[:0], 0
			if cap(sw.queue) > 2*sseMaxQueuedBytes {
				sw.queue = nil // a huge single frame's buffer is not kept
			}
		}
		_ = sw.rc.SetWriteDeadline(time.Now().Add(sw.timeout))
		sw.cond.Broadcast() // room for waiting frames
		sw.mu.Unlock()
		_, err := sw.w.Write(buf)
		if err == nil {
			err = sw.rc.Flush()
		}
		if err != nil {
			sw.fail()
			return
		}
		if cap(buf) > 4*sseMaxBatchBytes {
			buf = nil // a huge single frame's buffer is not kept
		}
		sw.mu.Lock()
		sw.wrote = time.Now()
		sw.cond.Broadcast() // progress, for a frame waiting for room
		sw.mu.Unlock()
	}
}

// fail marks the stream failed: nothing more is written.
func (sw *sseWriter) fail() {
	sw.mu.Lock()
	sw.failed = true
	sw.queue, sw.head = nil, 0
	sw.cond.Broadcast()
	sw.mu.Unlock()
}
