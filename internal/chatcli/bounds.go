package chatcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// The bounds on what the client reads of a server. The user may point
// the client at any URL, and a server that is broken or hostile must
// not make it grow its memory without bound: each thing the client
// reads or holds from a server has a bound, generous for armature serve,
// and past it the client stops reading with a [*TooLargeError]
// (errors.Is [ErrTooLarge]). Decoding JSON into Go values takes up to
// about 15 times the bytes decoded (measured on answers made of empty
// objects and arrays), which the byte bounds allow for.
const (
	// MaxAnswerBytes bounds a JSON answer other than a session's
	// history: a turn's outcome (with its replies), a created session,
	// a page of sessions or runs, a cancel. 8 MiB is eight times the
	// text the server itself keeps live of a turn (1 MiB, "more than
	// any model writes in one reply"). A turn whose answer exceeds it
	// is reported (the turn ran; /history shows it when its history
	// fits [MaxHistoryBytes]) and the client goes on.
	MaxAnswerBytes = 8 << 20
	// MaxHistoryBytes bounds a session's history as GET
	// /v1/sessions/{id} answers it, and MaxHistoryMessages the messages
	// in it. A session whose history exceeds them can still be
	// continued, switched to and written in; /history reports the
	// error.
	MaxHistoryBytes    = 16 << 20
	MaxHistoryMessages = 100_000
	// MaxSessions bounds the sessions /sessions lists (all pages), and
	// maxSessionPages the pages it reads: the server pages by 100, and a
	// server that hands out page tokens without end is stopped.
	MaxSessions     = 10_000
	maxSessionPages = 1_000
	// MaxRuns bounds a page of a session's runs (the server's most is
	// 1000), read to cancel a turn.
	MaxRuns = 1_000
	// MaxErrorBytes bounds what the client reads of an error answer;
	// the message it shows is cut there.
	MaxErrorBytes = 64 << 10
	// MaxEventBytes bounds one server-sent event of the session's event
	// stream, on the wire: every line from the end of the previous event
	// to the blank line ending this one. A turn's last event carries its
	// outcome, hence the room. An event past it ends the connection; the
	// client reconnects after it when it knows its id (given before its
	// data, as armature serve does) and says it skipped it; otherwise
	// it retries, and after [maxTooLargeRetries] tries without
	// progress stops following the stream (turns still print when they
	// end).
	MaxEventBytes = 4 << 20
	// MaxTurnBytes bounds what the client holds of one turn as the
	// stream delivers it: the assistant text streamed (kept to
	// reconcile with the turn's answer, which [MaxAnswerBytes] bounds
	// too) and the ids of the turn's runs; MaxTurnRuns bounds those
	// runs. Past either, the client stops waiting for the turn (it says
	// so; the turn may still run on the server) and goes back to the
	// prompt; another client's turn stops showing.
	MaxTurnBytes = MaxAnswerBytes
	MaxTurnRuns  = 1_000
	// maxQueuedEventBytes bounds the events the stream's goroutine
	// holds for the chat loop (beyond the one it reads); an event is
	// always let into an empty queue. Past it the goroutine waits, and
	// the server's stream with it.
	maxQueuedEventBytes = 2 * MaxEventBytes
	// maxTooLargeRetries is how many times in a row the event stream is
	// opened again at the same position after an event too large for
	// the client before it stops following the stream.
	maxTooLargeRetries = 3
)

// boundedReader reads r up to n bytes; reading more fails with a
// [*TooLargeError] (and leaves the rest unread).
type boundedReader struct {
	r   io.Reader
	n   int64
	err *TooLargeError
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, b.err
	}
	if int64(len(p)) > b.n+1 {
		p = p[:b.n+1]
	}
	k, err := b.r.Read(p)
	b.n -= int64(k)
	if b.n < 0 {
		return k - 1, b.err
	}
	return k, err
}

// decodeList decodes the JSON array data (or null) into at most max
// elements; a longer one is a [*TooLargeError] naming what and unit.
// Decoding element by element holds no more than max of them. Its other
// errors name what, without the package prefix (see withOp).
func decodeList[T any](data []byte, max int, what, unit string) ([]T, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if tok == nil {
		return nil, nil
	}
	if tok != json.Delim('[') {
		return nil, fmt.Errorf("%s: not a JSON array", what)
	}
	var out []T
	for dec.More() {
		if len(out) >= max {
			return nil, &TooLargeError{What: what, Limit: int64(max), Unit: unit}
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}
