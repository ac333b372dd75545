package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"

	"github.com/armature-go/armature/llm"
)

// sseInitialBuffer is the line buffer ReadSSE starts with; it grows up
// to the event bound.
const sseInitialBuffer = 64 << 10

// ReadSSE reads Server-Sent Events from r and calls fn with the data of
// each event (multi-line data joined by "\n"); comments, event names and
// ids are ignored. Lines end with LF, CRLF or a lone CR, as the SSE
// format allows, and a leading byte order mark is skipped. It stops when fn returns false or an error, or at EOF.
// At EOF, an event whose last line has no line end (the stream was cut
// inside it) is dropped, not dispatched: the caller sees a stream that
// ended early rather than half an event; a last event whose lines are
// whole is dispatched without its blank line. A line, or the joined data
// of an event, longer than maxEvent bytes stops it at once with
// [llm.ErrResponseTooLarge]; the data passed to fn is only valid during
// the call.
func ReadSSE(r io.Reader, maxEvent int64, fn func(data []byte) (bool, error)) error {
	limit := int(min(maxEvent, math.MaxInt32))
	sc := bufio.NewScanner(r)
	// The scanner's buffer holds a line and its line break.
	sc.Buffer(make([]byte, 0, min(sseInitialBuffer, limit+2)), limit+2)
	cut := false // the last line read had no line end
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, line, ok := sseLine(data, atEOF)
		if !ok {
			return 0, nil, nil
		}
		if adv == len(data) && atEOF && len(data) > 0 && data[len(data)-1] != '\n' && data[len(data)-1] != '\r' {
			cut = true
		}
		return adv, line, nil
	})
	var data []byte
	have := false
	flush := func() (bool, error) {
		if !have {
			return true, nil
		}
		d := data
		data, have = data[:0], false
		return fn(d)
	}
	first := true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			// A byte order mark may start the stream; it is not part of
			// the first field's name.
			line, first = bytes.TrimPrefix(line, []byte("\ufeff")), false
		}
		if len(line) > limit {
			return llm.ErrResponseTooLarge
		}
		if len(line) == 0 {
			if cont, err := flush(); err != nil || !cont {
				return err
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
		if string(field) != "data" {
			continue
		}
		if have {
			if len(data)+1+len(value) > limit {
				return llm.ErrResponseTooLarge
			}
			data = append(data, '\n')
		}
		data = append(data, value...)
		have = true
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return llm.ErrResponseTooLarge
		}
		return err
	}
	if cut {
		return nil // the stream ended inside its last line
	}
	_, err := flush()
	return err
}

// sseLine splits data at its first line end (LF, CRLF or CR): the bytes
// to advance, the line without its end, and ok; ok is false when more
// data is needed (no line end yet, or a CR that may start a CRLF). At
// EOF the rest is the last line, without a line end.
func sseLine(data []byte, atEOF bool) (int, []byte, bool) {
	if atEOF && len(data) == 0 {
		return 0, nil, true // done: a nil token ends the scan
	}
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF {
			return len(data), data, true
		}
		return 0, nil, false
	case data[i] == '\n':
		return i + 1, data[:i], true
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], true
		}
		return i + 1, data[:i], true
	case atEOF:
		return i + 1, data[:i], true
	}
	return 0, nil, false // a CR last: wait for what follows
}
