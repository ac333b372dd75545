package mapping

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds the nesting the scanner follows; deeper documents
// leave the fast path (encoding/json allows 10 000 levels).
const maxDepth = 512

// Scanner is the fast path of the embedding decoders: a single-pass
// reader of a JSON document that decodes embedding arrays straight into
// []float64 (one allocation per vector) instead of going through
// encoding/json and json.RawMessage copies.
//
// It handles a strict subset of what encoding/json accepts, and its
// methods return false as soon as the input leaves it: an escaped or
// case-folded member name, a duplicate known member, a value of an
// unexpected type, an escaped string where text is read, a vector that
// does not decode, deep nesting, any syntax error. On false the caller
// decodes the whole document again with encoding/json, so a decoder's
// results and errors are encoding/json's on every input; the scanner
// only has to be right when it says true. A Scanner is not safe for
// concurrent use.
type Scanner struct {
	data  []byte
	i     int
	depth int
	buf   []float64 // scratch for the vector being parsed
}

// NewScanner returns a scanner at the start of data.
func NewScanner(data []byte) *Scanner { return &Scanner{data: data} }

// Member is a known member of an object read by [Scanner.Object]: its
// exact name and the reader of its value, which must consume the value
// and report whether it could.
type Member struct {
	Key   string
	Value func(*Scanner) bool
}

func (s *Scanner) ws() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, 0 at the end.
func (s *Scanner) peek() byte {
	s.ws()
	if s.i < len(s.data) {
		return s.data[s.i]
	}
	return 0
}

// End reports whether only white space remains.
func (s *Scanner) End() bool {
	s.ws()
	return s.i == len(s.data)
}

// Null consumes a null literal if one is next and reports whether it
// did.
func (s *Scanner) Null() bool {
	if s.peek() == 'n' && bytes.HasPrefix(s.data[s.i:], []byte("null")) {
		s.i += 4
		return true
	}
	return false
}

// Object reads an object whose known members are members: each known
// name must appear at most once and exactly as spelled (a name equal to
// one under case folding, which encoding/json would match, leaves the
// fast path); other members are validated and skipped.
func (s *Scanner) Object(members ...Member) bool {
	if s.peek() != '{' || s.depth >= maxDepth {
		return false
	}
	if len(members) > 64 {
		return false
	}
	s.i++
	s.depth++
	var seen uint64
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		key, ok := s.text()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		known := -1
		for j, m := range members {
			if bytes.EqualFold(key, []byte(m.Key)) {
				if string(key) != m.Key || seen&(1<<j) != 0 {
					return false
				}
				known, seen = j, seen|1<<j
				break
			}
		}
		if known >= 0 {
			if !members[known].Value(s) {
				return false
			}
		} else if _, ok := s.Raw(); !ok {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// OptionalObject reads a null, which leaves the target nil as
// encoding/json does with a pointer, or calls create (which allocates
// the target) and reads an object of members.
func (s *Scanner) OptionalObject(create func(), members ...Member) bool {
	if s.Null() {
		return true
	}
	create()
	return s.Object(members...)
}

// Array reads an array (not null), calling elem for each element.
func (s *Scanner) Array(elem func(*Scanner) bool) bool {
	if s.peek() != '[' || s.depth >= maxDepth {
		return false
	}
	s.i++
	s.depth++
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !elem(s) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// text reads a string without escapes and returns its bytes, unquoted;
// an escape, a control character or invalid UTF-8 leaves the fast path.
func (s *Scanner) text() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			s.i = j + 1
			if !utf8.Valid(s.data[start:j]) {
				return nil, false
			}
			return s.data[start:j], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// String reads a string (as [Scanner.text]) into dst, or a null, which
// leaves dst as it is (encoding/json's behaviour).
func (s *Scanner) String(dst *string) bool {
	if s.Null() {
		return true
	}
	b, ok := s.text()
	*dst = string(b)
	return ok
}

// Raw validates and skips any JSON value and returns its bytes, as a
// json.RawMessage member would hold them (aliasing the document).
func (s *Scanner) Raw() (json.RawMessage, bool) {
	c := s.peek()
	start := s.i
	var ok bool
	switch {
	case c == '{':
		ok = s.Object()
	case c == '[':
		ok = s.Array(func(s *Scanner) bool { _, ok := s.Raw(); return ok })
	case c == '"':
		ok = s.skipString()
	case c == '-' || (c >= '0' && c <= '9'):
		_, ok = s.number()
	case c == 't':
		ok = s.literal("true")
	case c == 'f':
		ok = s.literal("false")
	case c == 'n':
		ok = s.literal("null")
	}
	if !ok {
		return nil, false
	}
	return s.data[start:s.i], true
}

// RawTo reads any value into dst (see [Scanner.Raw]).
func (s *Scanner) RawTo(dst *json.RawMessage) bool {
	v, ok := s.Raw()
	*dst = v
	return ok
}

func (s *Scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// skipString validates a string with any escapes (JSON's: \" \\ \/ \b
// \f \n \r \t \uXXXX) and no raw control characters.
func (s *Scanner) skipString() bool {
	for j := s.i + 1; j < len(s.data); j++ {
		switch c := s.data[j]; {
		case c == '"':
			s.i = j + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			j++
			if j >= len(s.data) {
				return false
			}
			switch s.data[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(s.data) {
					return false
				}
				for _, h := range s.data[j+1 : j+5] {
					if !isHex(h) {
						return false
					}
				}
				j += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// pow10 holds the powers of ten a float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
	1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// number reads a JSON number (-? (0 | [1-9][0-9]*) (.[0-9]+)?
// ([eE][+-]?[0-9]+)?) and returns its value, which is exactly
// strconv.ParseFloat's: when the decimal mantissa fits in 53 bits and
// the power of ten is within ±22, one correctly rounded operation on
// exact operands gives it (Clinger's fast path); otherwise ParseFloat
// does. A number out of float64's range leaves the fast path.
func (s *Scanner) number() (float64, bool) {
	b, start := s.data, s.i
	j := start
	neg := j < len(b) && b[j] == '-'
	if neg {
		j++
	}
	var mant uint64
	digits, exp := 0, 0 // significant digits in mant, decimal exponent
	exact := true       // false: a significant digit did not fit in mant
	// digits reads a run of digits into mant and returns how many.
	run := func() int {
		k := j
		for ; j < len(b) && b[j]-'0' <= 9; j++ {
			if d := uint64(b[j] - '0'); digits < 19 {
				if mant != 0 || d != 0 {
					mant, digits = mant*10+d, digits+1
				}
			} else {
				exact = false
			}
		}
		return j - k
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && b[j] >= '1' && b[j] <= '9':
		run()
	default:
		return 0, false
	}
	if j < len(b) && b[j] == '.' {
		j++
		n := run()
		if n == 0 {
			return 0, false
		}
		exp -= n
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		eneg := false
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			eneg = b[j] == '-'
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, false
		}
		e := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			if e < 10000 {
				e = e*10 + int(b[j]-'0')
			}
			j++
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	s.i = j
	if exact && mant < 1<<53 && exp >= -22 && exp <= 22 {
		f := float64(mant)
		if exp < 0 {
			f /= pow10[-exp]
		} else {
			f *= pow10[exp]
		}
		if neg {
			f = -f
		}
		return f, true
	}
	f, err := strconv.ParseFloat(string(b[start:j]), 64)
	return f, err == nil
}

// Vector reads one embedding into dst: an array of numbers, or a
// base64 string (without escapes) of little-endian float32 values. An
// empty array gives an empty, non-nil vector. Anything else, a number
// out of range or an invalid base64 string leaves the fast path, where
// [Vector] reports it.
func (s *Scanner) Vector(dst *[]float64) bool {
	switch s.peek() {
	case '"':
		b, ok := s.text()
		if !ok {
			return false
		}
		raw := make([]byte, base64.StdEncoding.DecodedLen(len(b)))
		n, err := base64.StdEncoding.Decode(raw, b)
		if err != nil || n%4 != 0 {
			return false
		}
		v := make([]float64, n/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		*dst = v
		return true
	case '[':
	default:
		return false
	}
	s.i++
	s.buf = s.buf[:0]
	if s.peek() != ']' {
		for {
			s.ws()
			f, ok := s.number()
			if !ok {
				return false
			}
			s.buf = append(s.buf, f)
			c := s.peek()
			if c == ']' {
				break
			}
			if c != ',' {
				return false
			}
			s.i++
		}
	}
	s.i++
	v := make([]float64, len(s.buf))
	copy(v, s.buf)
	*dst = v
	return true
}

// Vectors reads an array of embeddings (not null) into dst.
func (s *Scanner) Vectors(dst *[][]float64) bool {
	out := [][]float64{}
	ok := s.Array(func(s *Scanner) bool {
		var v []float64
		if !s.Vector(&v) {
			return false
		}
		out = append(out, v)
		return true
	})
	*dst = out
	return ok
}

// IndexedList reads an OpenAI-shaped data list (not null) of {index,
// embedding} objects into dst, each embedding decoded.
func (s *Scanner) IndexedList(dst *[]Indexed) bool {
	out := []Indexed{}
	ok := s.Array(func(s *Scanner) bool {
		var e Indexed
		if !s.Object(
			Member{"index", func(s *Scanner) bool { return s.RawTo(&e.Index) }},
			Member{"embedding", func(s *Scanner) bool { e.decoded = true; return s.Vector(&e.vec) }},
		) {
			return false
		}
		out = append(out, e)
		return true
	})
	*dst = out
	return ok
}
