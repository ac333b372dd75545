package chatcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/runtime"
)

// TestTooLargeError: the error says what exceeded which bound, with the
// package prefix, and matches ErrTooLarge, wrapped or not.
func TestTooLargeError(t *testing.T) {
	for _, tc := range []struct {
		err  *TooLargeError
		want string
	}{
		{&TooLargeError{Op: "GET /v1/sessions/s", What: "the answer", Limit: MaxAnswerBytes, Unit: "bytes"},
			"chatcli: GET /v1/sessions/s: the answer exceeds 8 MiB, the most the client reads"},
		{&TooLargeError{Op: "event stream", What: "an event", Limit: MaxEventBytes, Unit: "bytes"},
			"chatcli: event stream: an event exceeds 4 MiB, the most the client reads"},
		{&TooLargeError{What: "the number of the turn's runs", Limit: MaxTurnRuns, Unit: "runs"},
			"chatcli: the number of the turn's runs exceeds 1000 runs, the most the client reads"},
		{&TooLargeError{What: "an error answer", Limit: MaxErrorBytes, Unit: "bytes"},
			"chatcli: an error answer exceeds 64 KiB, the most the client reads"},
		{&TooLargeError{What: "x", Limit: 1000, Unit: "bytes"}, "chatcli: x exceeds 1000 bytes, the most the client reads"},
		{nil, "chatcli: <nil>"},
	} {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !strings.HasPrefix(ErrTooLarge.Error(), "chatcli: ") {
			t.Errorf("ErrTooLarge lacks the package prefix: %q", ErrTooLarge)
		}
		if tc.err != nil && (!errors.Is(tc.err, ErrTooLarge) || !errors.Is(fmt.Errorf("w: %w", tc.err), ErrTooLarge)) {
			t.Errorf("%v is not ErrTooLarge", tc.err)
		}
	}
	if errors.Is((*TooLargeError)(nil), ErrTooLarge) || errors.Is(&TooLargeError{}, ErrNotFound) {
		t.Error("Is matches what it should not")
	}
}

// TestWatcherQueueBound: the stream's goroutine holds at most
// maxQueuedEventBytes of events for the loop (an event larger than that
// only when none are queued): past it, put waits for the loop to take
// one, or for the end of ctx. Before, it queued up to 1024 events
// whatever their size: up to 1024 times the size of the largest one.
func TestWatcherQueueBound(t *testing.T) {
	w := &watcher{events: make(chan runtime.Event, 1024), room: make(chan struct{}, 1)}
	third := runtime.Event{Data: bytes.Repeat([]byte("x"), maxQueuedEventBytes/3)}
	ctx := context.Background()
	huge := runtime.Event{Data: bytes.Repeat([]byte("x"), 2*maxQueuedEventBytes)}
	if !w.put(ctx, huge) {
		t.Fatal("an event larger than the bound was not let into the empty queue")
	}
	w.took(<-w.events)
	for range 2 {
		if !w.put(ctx, third) {
			t.Fatal("put failed")
		}
	}
	done := make(chan bool, 1)
	go func() { done <- w.put(ctx, third) }()
	select {
	case <-done:
		t.Fatalf("put queued %d bytes, past the bound %d", 3*eventSize(third), maxQueuedEventBytes)
	case <-time.After(100 * time.Millisecond):
	}
	w.took(<-w.events)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("put failed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("put did not go on once the loop took an event")
	}
	cctx, cancel := context.WithCancel(ctx)
	go func() { done <- w.put(cctx, third) }()
	cancel()
	if <-done {
		t.Fatal("put succeeded past the bound after ctx ended")
	}
	w.took(<-w.events)
	w.took(<-w.events)
	if w.queued != 0 {
		t.Fatalf("%d bytes queued after all were taken", w.queued)
	}
}

// TestDecodeList: a JSON array is decoded into at most max elements.
func TestDecodeList(t *testing.T) {
	for _, tc := range []struct {
		in      string
		max     int
		want    []int
		wantErr string
	}{
		{in: "null", max: 1},
		{in: "[]", max: 0, want: nil},
		{in: "[1,2,3]", max: 3, want: []int{1, 2, 3}},
		{in: "[1,2,3]", max: 2, wantErr: "chatcli: the list exceeds 2 items, the most the client reads"},
		{in: `{"a":1}`, max: 2, wantErr: "the list: not a JSON array"},
		{in: `["a"]`, max: 2, wantErr: "the list: json: cannot unmarshal string into Go value of type int"},
	} {
		got, err := decodeList[int]([]byte(tc.in), tc.max, "the list", "items")
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr || errors.Is(err, ErrTooLarge) != strings.Contains(tc.wantErr, "exceeds") {
				t.Errorf("%s: got %v, want %s", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.in, diff)
		}
	}
}

// FuzzDecodeList: decodeList decodes what json.Unmarshal does, up to
// max elements, and reports ErrTooLarge past them.
func FuzzDecodeList(f *testing.F) {
	f.Add([]byte(`[1,"a",{"b":[null]},[]]`), uint8(2))
	f.Add([]byte(`null`), uint8(0))
	f.Add([]byte(`{"a":1}`), uint8(3))
	f.Fuzz(func(t *testing.T, in []byte, max uint8) {
		if !json.Valid(in) {
			return
		}
		var want []any
		wantErr := json.Unmarshal(in, &want)
		got, err := decodeList[any](in, int(max), "the list", "items")
		switch {
		case wantErr != nil:
			if err == nil {
				t.Fatalf("%q: decoded %v, json.Unmarshal: %v", in, got, wantErr)
			}
		case len(want) > int(max):
			if !errors.Is(err, ErrTooLarge) || got != nil {
				t.Fatalf("%q (%d elements, max %d): got %v, %v", in, len(want), max, got, err)
			}
		case err != nil:
			t.Fatalf("%q: %v", in, err)
		default:
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("%q (-json.Unmarshal +decodeList):\n%s", in, diff)
			}
		}
	})
}

// refFrames reads the events of in as the event stream's reader did
// before it had a bound (lines split at "\n" and trimmed of "\r"), with
// the bound checked after each line: the events with data; then, at the
// end of in, the error (io.EOF, or tooLarge when the bytes of an event
// exceed max) and the event read so far.
func refFrames(in []byte, max int) (frames []frame, tooLarge bool, last frame) {
	n := 0
	var data strings.Builder
	var id, event string
	for len(in) > 0 {
		i := bytes.IndexByte(in, '\n')
		if i < 0 {
			return frames, n+len(in) > max, frame{id: id, event: event}
		}
		line := strings.TrimRight(string(in[:i]), "\r\n")
		in = in[i+1:]
		if n += i + 1; n > max {
			return frames, true, frame{id: id, event: event}
		}
		switch {
		case line == "":
			n = 0
			if data.Len() > 0 {
				frames = append(frames, frame{id: id, event: event, data: []byte(data.String())})
			}
			data.Reset()
			id, event = "", ""
		case strings.HasPrefix(line, ":"):
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
	return frames, false, frame{id: id, event: event}
}

// FuzzFrameReader: the event stream's reader reads the events the
// reader before the bound did, as long as each is within the bound
// (whatever the read sizes and line lengths), and stops at the first
// that is not, with a *TooLargeError and the id read so far; it never
// holds an event's data past the bound.
func FuzzFrameReader(f *testing.F) {
	f.Add([]byte("id: 1\nevent: x\ndata: {\"a\":1}\n\n: keep-alive\n\ndata: a\r\ndata:b\n\n"), uint16(64), false)
	f.Add([]byte("id: 7\ndata: "+strings.Repeat("x", 100)+"\n\n"), uint16(40), true)
	f.Add([]byte("data: x\ndata: y\ndata: z\n"), uint16(12), false)
	f.Add([]byte(": "+strings.Repeat("c", 50)), uint16(16), true)
	f.Fuzz(func(t *testing.T, in []byte, max uint16, oneByte bool) {
		var r io.Reader = bytes.NewReader(in)
		if oneByte {
			r = iotest.OneByteReader(r)
		}
		fr := &frameReader{br: bufio.NewReaderSize(r, 16), max: int(max)}
		wantFrames, wantTooLarge, wantLast := refFrames(in, int(max))
		var got []frame
		for {
			fm, err := fr.next()
			if err == nil {
				if len(fm.data) > int(max) {
					t.Fatalf("an event of %d bytes of data, past the bound %d", len(fm.data), max)
				}
				got = append(got, frame{id: fm.id, event: fm.event, data: bytes.Clone(fm.data)})
				continue
			}
			if errors.Is(err, ErrTooLarge) != wantTooLarge || (!wantTooLarge && err != io.EOF) {
				t.Fatalf("%q (max %d): ended with %v, want too large %v", in, max, err, wantTooLarge)
			}
			if wantTooLarge && fm.id != wantLast.id {
				t.Fatalf("%q (max %d): the event past the bound has id %q, want %q", in, max, fm.id, wantLast.id)
			}
			break
		}
		if diff := cmp.Diff(wantFrames, got, cmp.AllowUnexported(frame{})); diff != "" {
			t.Fatalf("%q (max %d) (-before +now):\n%s", in, max, diff)
		}
	})
}
