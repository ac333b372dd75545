package langfuse

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Payload caps (observability §5.5.5).
const (
	// DefaultPayloadMaxBytes is the per-field payload cap when
	// Config.PayloadMaxBytes is 0.
	DefaultPayloadMaxBytes = 64 << 10
	// MinPayloadMaxBytes is the smallest cap [New] accepts.
	MinPayloadMaxBytes = 256
)

const truncationMarkerFormat = "…[truncated, %d bytes total]"

// Truncate applies the observability §5.5.5 truncation contract: a value
// longer than limit bytes keeps its longest prefix ending on a UTF-8
// code-point boundary that leaves room for the marker
// "…[truncated, M bytes total]" (M the original length), followed by the
// marker. Shorter values are returned unchanged. It is the contract the
// OTel observer applies to its payload attributes, so both backends see
// the same truncated values.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	marker := fmt.Sprintf(truncationMarkerFormat, len(s))
	n := max(limit-len(marker), 0)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + marker
}

// canonicalJSON encodes v with sorted object keys and no insignificant
// whitespace (observability §5.5.1); v is first normalized through JSON
// so structs and maps encode alike.
func canonicalJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return strconv.Quote(fmt.Sprint(v))
	}
	var generic any
	if json.Unmarshal(b, &generic) != nil {
		return string(b)
	}
	out, err := json.Marshal(generic)
	if err != nil {
		return string(b)
	}
	return string(out)
}

// structured renders a structured payload field (observability §8.7): the
// value's canonical JSON, capped; within the cap it is the JSON value
// itself, beyond it the truncated string with its marker (unparseable
// JSON is the truncation signal).
func structured(v any, limit int) any {
	s := canonicalJSON(v)
	if t := Truncate(s, limit); t != s {
		return t
	}
	return json.RawMessage(s)
}

// text renders a string payload field, capped.
func text(s string, limit int) string { return Truncate(s, limit) }
