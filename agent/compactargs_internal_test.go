package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestCompactArgsCutsWholeCharacters: long arguments are cut at a
// character's start, never inside one (the approval request showed a
// replacement character where a multi-byte character was cut).
func TestCompactArgsCutsWholeCharacters(t *testing.T) {
	for pad := range 4 {
		raw := json.RawMessage(`{"note":"` + strings.Repeat("a", pad) + strings.Repeat("é€😀", 80) + `"}`)
		got := compactArgs(raw)
		if !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || len(got) > maxCompactArgs+len("…") {
			t.Fatalf("pad %d: %q (%d bytes, valid %t)", pad, got, len(got), utf8.ValidString(got))
		}
	}
	if got := compactArgs(json.RawMessage(`{"order":"7"}`)); got != `{"order":"7"}` {
		t.Fatalf("short arguments: %q", got)
	}
}
