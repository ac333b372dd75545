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
// ids are ignored. It stops when fn returns false or an error, or at EOF.
// A line, or the joined data of an event, longer than maxEvent bytes
// stops it at once with [llm.ErrResponseTooLarge]; the data passed to fn
// is only valid during the call.
func ReadSSE(r io.Reader, maxEvent int64, fn func(data []byte) (bool, error)) error {
	limit := int(min(maxEvent, math.MaxInt32))
	sc := bufio.NewScanner(r)
	// The scanner's buffer holds a line and its line break.
	sc.Buffer(make([]byte, 0, min(sseInitialBuffer, limit+2)), limit+2)
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
	for sc.Scan() {
		line := sc.Bytes()
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
	_, err := flush()
	return err
}
