package chatcli

import (
	"bufio"
	"context"
	"encoding/json"
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
	// stream was opened with): the position to reconnect from.
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
// are not runtime events (comments, keep-alives) are skipped.
func (s *Stream) Events() iter.Seq2[runtime.Event, error] {
	return func(yield func(runtime.Event, error) bool) {
		br := bufio.NewReaderSize(s.body, 64<<10)
		var data strings.Builder
		var id, event string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				yield(runtime.Event{}, fmt.Errorf("chatcli: event stream: %w", err))
				return
			}
			line = strings.TrimRight(line, "\r\n")
			switch {
			case line == "":
				if data.Len() == 0 {
					id, event = "", ""
					continue
				}
				if event == "error" {
					// The server's error event (not a runtime event), just
					// before it ends the stream.
					var e struct {
						Code string `json:"code"`
					}
					if json.Unmarshal([]byte(data.String()), &e) == nil && e.Code == "last_event_id_unknown" {
						s.Unknown = true
					}
					data.Reset()
					id, event = "", ""
					continue
				}
				var ev runtime.Event
				if err := json.Unmarshal([]byte(data.String()), &ev); err != nil {
					if !yield(runtime.Event{}, fmt.Errorf("chatcli: event stream: bad frame: %w", err)) {
						return
					}
				} else {
					if ev.ID == 0 {
						ev.ID, _ = strconv.ParseInt(id, 10, 64)
					}
					if ev.ID > s.LastID {
						s.LastID = ev.ID
					}
					if !yield(ev, nil) {
						return
					}
				}
				data.Reset()
				id, event = "", ""
			case strings.HasPrefix(line, ":"):
				// a comment: keep-alive
			case strings.HasPrefix(line, "data:"):
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			case strings.HasPrefix(line, "id:"):
				id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			}
		}
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
