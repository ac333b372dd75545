package mapping

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/retrieval"
)

// errVector is the cause of a vector that is neither an array of numbers
// nor a base64 string of little-endian float32 values.
var errVector = errors.New("an embedding is neither an array of numbers nor a base64 float32 string")

// Vector decodes one embedding by its wire shape (§8.3): a JSON array
// whose every element is a number is the vector verbatim; a JSON string
// is base64 of little-endian IEEE-754 float32 values; anything else, an
// invalid base64 string or one whose length is not a multiple of 4 bytes
// fails.
func Vector(raw json.RawMessage) ([]float64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, errVector
	}
	switch raw[0] {
	case '[':
		return floatArray(raw)
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, errVector
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(b)%4 != 0 {
			return nil, errVector
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v, nil
	}
	return nil, errVector
}

// floatArray parses a JSON array of numbers without reflection: the hot
// path of every embedding response.
func floatArray(raw []byte) ([]float64, error) {
	i := 1
	skip := func() {
		for i < len(raw) && (raw[i] == ' ' || raw[i] == '\n' || raw[i] == '\t' || raw[i] == '\r') {
			i++
		}
	}
	v := make([]float64, 0, len(raw)/10)
	skip()
	if i < len(raw) && raw[i] == ']' {
		i++
		skip()
		if i != len(raw) {
			return nil, errVector
		}
		return v, nil
	}
	for {
		skip()
		start := i
		for i < len(raw) && (raw[i] == '-' || raw[i] == '+' || raw[i] == '.' || raw[i] == 'e' || raw[i] == 'E' || (raw[i] >= '0' && raw[i] <= '9')) {
			i++
		}
		if start == i || !numberSyntax(raw[start:i]) {
			return nil, errVector
		}
		f, err := strconv.ParseFloat(string(raw[start:i]), 64)
		if err != nil {
			return nil, errVector
		}
		v = append(v, f)
		skip()
		if i >= len(raw) {
			return nil, errVector
		}
		switch raw[i] {
		case ',':
			i++
		case ']':
			i++
			skip()
			if i != len(raw) {
				return nil, errVector
			}
			return v, nil
		default:
			return nil, errVector
		}
	}
}

// numberSyntax rejects what ParseFloat accepts beyond JSON numbers
// among the scanned bytes ("+1", ".5", "1.", "-"): a JSON number starts
// with a digit or "-" and a digit, and ends with a digit.
func numberSyntax(b []byte) bool {
	digit := func(c byte) bool { return c >= '0' && c <= '9' }
	if b[0] == '-' {
		b = b[1:]
	}
	return len(b) > 0 && digit(b[0]) && digit(b[len(b)-1])
}

// Indexed is one {index, embedding} entry of an OpenAI-shaped "data"
// list.
type Indexed struct {
	Index     json.RawMessage `json:"index"`
	Embedding json.RawMessage `json:"embedding"`

	vec     []float64 // the embedding, when the scanner decoded it
	decoded bool
}

// vector returns the entry's embedding: the scanner's, or Embedding
// decoded.
func (e Indexed) vector() ([]float64, error) {
	if e.decoded {
		return e.vec, nil
	}
	return Vector(e.Embedding)
}

// IndexedVectors orders an OpenAI-shaped data list by each entry's index
// and decodes its vectors: n entries, indices 0..n-1 each exactly once.
func (d Decoder) IndexedVectors(op string, data []Indexed, n int) ([][]float64, error) {
	if len(data) != n {
		return nil, d.Invalid(op, "%d embeddings for %d inputs", len(data), n)
	}
	out := make([][]float64, n)
	for _, e := range data {
		i, ok := counter(e.Index)
		if !ok || i >= n {
			return nil, d.Invalid(op, "an embedding index %s is not in [0, %d)", string(e.Index), n)
		}
		if out[i] != nil {
			return nil, d.Invalid(op, "embedding index %d appears twice", i)
		}
		v, err := e.vector()
		if err != nil {
			return nil, d.InvalidCause(op, "embedding "+strconv.Itoa(i)+": "+err.Error(), err)
		}
		out[i] = v
	}
	return out, nil
}

// counter is [llm.ParseCounter] without the allocation of its result:
// a non-negative JSON integer.
func counter(raw json.RawMessage) (int, bool) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(string(raw))
	return n, err == nil && n >= 0
}

// Vectors decodes a list of vectors in input order (TEI's bare array,
// Cohere's embeddings.float).
func (d Decoder) Vectors(op string, raw []json.RawMessage, n int) ([][]float64, error) {
	if len(raw) != n {
		return nil, d.Invalid(op, "%d embeddings for %d inputs", len(raw), n)
	}
	out := make([][]float64, n)
	for i, r := range raw {
		v, err := Vector(r)
		if err != nil {
			return nil, d.InvalidCause(op, "embedding "+strconv.Itoa(i)+": "+err.Error(), err)
		}
		out[i] = v
	}
	return out, nil
}

// DecodedVectors checks the count of vectors the scanner decoded in
// input order: [Decoder.Vectors] for a list that decoded.
func (d Decoder) DecodedVectors(op string, vecs [][]float64, n int) ([][]float64, error) {
	if len(vecs) != n {
		return nil, d.Invalid(op, "%d embeddings for %d inputs", len(vecs), n)
	}
	return vecs, nil
}

// Embedding checks the §4 invariants of resp (one vector per input, the
// same dimensionality for all) and sets resp.Dimensions.
func (d Decoder) Embedding(op string, resp *retrieval.EmbeddingResponse, n int) error {
	if len(resp.Vectors) != n {
		return d.Invalid(op, "%d vectors for %d inputs", len(resp.Vectors), n)
	}
	if n == 0 {
		return nil
	}
	dims := len(resp.Vectors[0])
	for i, v := range resp.Vectors {
		if len(v) != dims {
			return d.Invalid(op, "vector %d has %d dimensions, vector 0 has %d", i, len(v), dims)
		}
	}
	if dims == 0 {
		return d.Invalid(op, "the vectors are empty")
	}
	resp.Dimensions = dims
	return nil
}

// ID reads a response identifier: a non-empty JSON string, else ""
// (absent, malformed or empty: not reported, §7).
func ID(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// Document reads a rerank result's document echo (§6): a string is the
// text (an empty one too), an object its string-valued "text" member or
// nil, absent or null nil; a number, boolean or array is malformed.
func Document(raw json.RawMessage) (*string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return &s, nil
	case '{':
		var o struct {
			Text json.RawMessage `json:"text"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, err
		}
		if len(o.Text) > 0 && o.Text[0] == '"' {
			var s string
			if err := json.Unmarshal(o.Text, &s); err == nil {
				return &s, nil
			}
		}
		return nil, nil
	}
	return nil, errors.New("a document echo is neither a string nor an object")
}

// Scored is one wire rerank result before validation.
type Scored struct {
	Index    json.RawMessage
	Score    json.RawMessage
	Document json.RawMessage
}

// Results validates wire rerank results against the per-result §6
// invariants (a valid index, a numeric score, a string or object echo):
// each index must address one of n documents, and base is added to it
// (TEI's chunk-relative indices). [Decoder.Finish] then checks and sorts
// the whole call's results.
func (d Decoder) Results(op string, wire []Scored, base, n int) ([]retrieval.ScoredDocument, error) {
	out := make([]retrieval.ScoredDocument, 0, len(wire))
	for _, w := range wire {
		i := llm.ParseCounter(w.Index)
		if i == nil || *i >= n {
			return nil, d.Invalid(op, "a result index %s is not in [0, %d)", string(w.Index), n)
		}
		var score float64
		if err := json.Unmarshal(w.Score, &score); err != nil || len(w.Score) == 0 || w.Score[0] == '"' {
			return nil, d.Invalid(op, "result %d has no numeric score", *i)
		}
		doc, err := Document(w.Document)
		if err != nil {
			return nil, d.Invalid(op, "result %d: %v", *i, err)
		}
		out = append(out, retrieval.ScoredDocument{Index: base + *i, RelevanceScore: score, Document: doc})
	}
	return out, nil
}

// Finish checks the whole-call §6 invariants of results for n documents
// (no index twice, at most topK when topK > 0) and sorts them by score,
// descending (a stable sort: equal scores keep the provider's order).
func (d Decoder) Finish(op string, results []retrieval.ScoredDocument, n, topK int) ([]retrieval.ScoredDocument, error) {
	seen := make([]bool, n)
	for _, r := range results {
		if seen[r.Index] {
			return nil, d.Invalid(op, "result index %d appears twice", r.Index)
		}
		seen[r.Index] = true
	}
	if topK > 0 && len(results) > topK {
		return nil, d.Invalid(op, "%d results for top_k %d", len(results), topK)
	}
	slices.SortStableFunc(results, func(a, b retrieval.ScoredDocument) int { return cmp.Compare(b.RelevanceScore, a.RelevanceScore) })
	return results, nil
}
