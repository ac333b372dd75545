package chatcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"strconv"
	"strings"

	"github.com/armature-go/armature/runtime"
)

// Stream is one open connection to a session's server-sent event stream
// (GET /v1/sessions/{id}/events). It is read by one goroutine.
type Stream struct {
	body io.ReadCloser
	// LastID is the id of the last event read (or the Last-Event-ID the
	// stream was opened with, or the id of an event skipped as larger
	// than [MaxEventBytes]): the position to reconnect from.
	LastID int64
	// Unknown is set when the server ended the stream because it does
	// not know LastID as an event of the session (its error event
	// last_event_id_unknown: the events were deleted with the session,
	// or removed by retention, or the id is another session's): the
	// stream must be opened again from the start.
	Unknown bool
}

// Subscribe opens the session's event stream, replaying the stored
// events after event id after (0: all of them), then following live ones.
// It returns once the server has accepted the subscription, so a turn
// sent afterwards is streamed to it.
func (c *Client) Subscribe(ctx context.Context, id string, after int64) (*Stream, error) {
	path, err := sessionPath(id)
	if err != nil {
		return nil, err
	}
	req, err := c.newRequest(ctx, http.MethodGet, path+"/events", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chatcli: event stream: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, responseError(resp)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("chatcli: event stream: unexpected content type %q", ct)
	}
	return &Stream{body: resp.Body, LastID: after}, nil
}

// Close ends the stream; a pending read returns an error.
func (s *Stream) Close() error { return s.body.Close() }

// Events yields the stream's events as they arrive until the connection
// ends (io.EOF is reported as an error too: a server's stream does not
// end on its own but on shutdown or a dropped connection). Frames that
// are not runtime events (comments, keep-alives) are skipped. An event
// larger than [MaxEventBytes] ends the stream with a [*TooLargeError],
// unread; when its id came before the part past the bound, LastID moves
// to it, so that the stream reopened from LastID skips it.
func (s *Stream) Events() iter.Seq2[runtime.Event, error] {
	return func(yield func(runtime.Event, error) bool) {
		fr := newFrameReader(s.body, MaxEventBytes)
		for {
			f, err := fr.next()
			if err != nil {
				var tl *TooLargeError
				if errors.As(err, &tl) {
					if id, perr := strconv.ParseInt(f.id, 10, 64); perr == nil && id > s.LastID {
						s.LastID = id
					}
					yield(runtime.Event{}, err)
					return
				}
				yield(runtime.Event{}, fmt.Errorf("chatcli: event stream: %w", err))
				return
			}
			if f.event == "error" {
				// The server's error event (not a runtime event), just
				// before it ends the stream.
				var e struct {
					Code string `json:"code"`
				}
				if json.Unmarshal(f.data, &e) == nil && e.Code == "last_event_id_unknown" {
					s.Unknown = true
				}
				continue
			}
			var ev runtime.Event
			if err := json.Unmarshal(f.data, &ev); err != nil {
				if !yield(runtime.Event{}, fmt.Errorf("chatcli: event stream: bad frame: %w", err)) {
					return
				}
				continue
			}
			if ev.ID == 0 {
				ev.ID, _ = strconv.ParseInt(f.id, 10, 64)
			}
			if ev.ID > s.LastID {
				s.LastID = ev.ID
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// frame is one server-sent event: its id, event and data fields (data
// lines joined with newlines).
type frame struct {
	id, event string
	data      []byte
}

// frameReader reads server-sent events, each of at most max bytes on the
// wire: all its lines (comments, fields, line ends) from the end of the
// previous event to the blank line ending it. It holds at most max bytes
// of an event, however long the server makes its lines or its events.
type frameReader struct {
	br  *bufio.Reader
	max int
	// n counts the bytes of the event being read.
	n    int
	line []byte
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{br: bufio.NewReaderSize(r, 64<<10), max: max}
}

// next returns the next event with data, skipping comments and events
// without data. An event past the bound is a [*TooLargeError], with the
// frame read so far (its id, when one came before).
func (fr *frameReader) next() (frame, error) {
	var f frame
	for {
		line, err := fr.readLine()
		if err != nil {
			return f, err
		}
		switch {
		case len(line) == 0:
			fr.n = 0
			if len(f.data) > 0 {
				return f, nil
			}
			f = frame{data: f.data[:0]}
		case line[0] == ':':
			// a comment: keep-alive
		case bytes.HasPrefix(line, []byte("data:")):
			if len(f.data) > 0 {
				f.data = append(f.data, '\n')
			}
			v := line[len("data:"):]
			f.data = append(f.data, bytes.TrimPrefix(v, []byte(" "))...)
		case bytes.HasPrefix(line, []byte("id:")):
			f.id = strings.TrimSpace(string(line[len("id:"):]))
		case bytes.HasPrefix(line, []byte("event:")):
			f.event = strings.TrimSpace(string(line[len("event:"):]))
		}
	}
}

// readLine reads a line without its line end ("\n" or "\r\n"); the
// line is valid until the next call. It fails with a [*TooLargeError]
// once the event's bytes exceed the bound, holding none past it.
func (fr *frameReader) readLine() ([]byte, error) {
	fr.line = fr.line[:0]
	for {
		chunk, err := fr.br.ReadSlice('\n')
		fr.n += len(chunk)
		if fr.n > fr.max {
			return nil, &TooLargeError{Op: "event stream", What: "an event", Limit: int64(fr.max), Unit: "bytes"}
		}
		fr.line = append(fr.line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		if err != nil {
			return nil, err
		}
		line := bytes.TrimSuffix(fr.line, []byte("\n"))
		return bytes.TrimRight(line, "\r"), nil
	}
}

// adapterEvent is the payload of a runtime.adapter.event:
// {"event": {"phase", ...}}.
type adapterEvent struct {
	Event struct {
		Phase  string          `json:"phase"`
		Text   string          `json:"text"`
		ToolID string          `json:"toolId"`
		Name   string          `json:"name"`
		Args   json.RawMessage `json:"args"`
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	} `json:"event"`
}

// phaseOf decodes an adapter event's payload; ok is false for other
// events.
func phaseOf(ev runtime.Event) (adapterEvent, bool) {
	var a adapterEvent
	if ev.Type != runtime.EventAdapterEvent || json.Unmarshal(ev.Data, &a) != nil {
		return a, false
	}
	return a, true
}

// terminal reports whether ev ends its run.
func terminal(ev runtime.Event) bool {
	switch ev.Type {
	case runtime.EventRequestCompleted, runtime.EventRequestFailed, runtime.EventRequestCancelled, runtime.EventRequestSuspended:
		return true
	}
	return false
}
