// Package jsonvalid reports whether bytes are one valid JSON value,
// exactly as encoding/json.Valid does, several times faster: every
// record a turn writes (its session state, its run's output and events)
// is checked on its way into a store, so the check is on the hot path.
//
//	if !jsonvalid.Valid(raw) {
//		return errors.New("not JSON")
//	}
package jsonvalid

// MaxDepth is encoding/json's limit on nesting: a value nested deeper
// is not valid.
const MaxDepth = 10000

// Valid reports whether data is one JSON value (RFC 8259), with only
// white space around it: what encoding/json.Valid reports, including
// its nesting limit of 10000 and its acceptance of any byte from 0x20
// in a string (it does not check UTF-8).
func Valid(data []byte) bool {
	// stack holds, per open container, whether it is an object.
	var small [64]bool
	stack := small[:0]
	i := skipSpace(data, 0)
	for {
		// A value starts at i.
		if i >= len(data) {
			return false
		}
		switch c := data[i]; {
		case c == '{':
			if len(stack) == MaxDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == '}' {
				i++
				break
			}
			stack = append(stack, true)
			if i = key(data, i); i < 0 {
				return false
			}
			continue
		case c == '[':
			if len(stack) == MaxDepth {
				return false
			}
			i = skipSpace(data, i+1)
			if i < len(data) && data[i] == ']' {
				i++
				break
			}
			stack = append(stack, false)
			continue
		case c == '"':
			if i = str(data, i); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			if i = number(data, i); i < 0 {
				return false
			}
		case c == 't':
			if i = literal(data, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = literal(data, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = literal(data, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// A value ended at i: close what it ends, or go on to the next.
		for {
			i = skipSpace(data, i)
			if len(stack) == 0 {
				return i == len(data)
			}
			if i >= len(data) {
				return false
			}
			object := stack[len(stack)-1]
			c := data[i]
			if c == ',' {
				i = skipSpace(data, i+1)
				if object {
					if i = key(data, i); i < 0 {
						return false
					}
				}
				break
			}
			if object && c == '}' || !object && c == ']' {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			return false
		}
	}
}

// key reads an object's key and its colon from i, and returns where
// its value starts (after white space), or -1.
func key(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	if i = str(data, i); i < 0 {
		return -1
	}
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != ':' {
		return -1
	}
	return skipSpace(data, i+1)
}

// SkipSpace returns the index of the first byte from i that is not JSON
// white space (len(data) when there is none).
func SkipSpace(data []byte, i int) int { return skipSpace(data, i) }

// String returns the index after the JSON string that starts at data[i]
// (a quote), or -1 when none does or it is not a valid string.
func String(data []byte, i int) int {
	if i >= len(data) || data[i] != '"' {
		return -1
	}
	return str(data, i)
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// str reads the string starting at data[i] == '"' and returns the index
// after its closing quote, or -1.
func str(data []byte, i int) int {
	i++
	for i < len(data) {
		c := data[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(data) {
				return -1
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+4 >= len(data) {
					return -1
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return -1
					}
				}
				i += 5
			default:
				return -1
			}
		default:
			i++
		}
	}
	return -1
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number reads the number starting at i and returns the index after it,
// or -1.
func number(data []byte, i int) int {
	if data[i] == '-' {
		i++
	}
	switch {
	case i >= len(data):
		return -1
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		i = digits(data, i+1)
	default:
		return -1
	}
	if i < len(data) && data[i] == '.' {
		if i+1 >= len(data) || !isDigit(data[i+1]) {
			return -1
		}
		i = digits(data, i+1)
	}
	if i < len(data) && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < len(data) && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= len(data) || !isDigit(data[i]) {
			return -1
		}
		i = digits(data, i)
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(data []byte, i int) int {
	for i < len(data) && isDigit(data[i]) {
		i++
	}
	return i
}

// literal reads the literal lit at i and returns the index after it, or
// -1.
func literal(data []byte, i int, lit string) int {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
