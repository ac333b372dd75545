package wire

import (
	"bufio"
	"bytes"
	"io"
)

// MaxEventSize caps one Server-Sent Events line.
const MaxEventSize = 8 << 20

// ReadSSE reads Server-Sent Events from r and calls fn with the data of
// each event (multi-line data joined by "\n"); comments, event names and
// ids are ignored. It stops when fn returns false or an error, or at EOF.
func ReadSSE(r io.Reader, fn func(data []byte) (bool, error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxEventSize)
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
			data = append(data, '\n')
		}
		data = append(data, value...)
		have = true
	}
	if err := sc.Err(); err != nil {
		return err
	}
	_, err := flush()
	return err
}
