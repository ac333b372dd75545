package cli

import (
	"io"
	"math"
	"strings"
	"testing"
)

// TestServeSizesSessionLocksFromMaxTurns: on PostgreSQL, the replica's
// session locker holds a lock for every turn --max-turns lets run at
// once, with a margin (--max-session-locks, ARMATURE_MAX_SESSION_LOCKS,
// sets it). It was 64 whatever --max-turns said (256 by default), and
// the 65th turn, any tenant's, waited without bound.
func TestServeSizesSessionLocksFromMaxTurns(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want int32
	}{
		{nil, "", defaultMaxTurns + lockSpare},
		{[]string{"--max-turns", "1000"}, "", 1000 + lockSpare},
		{[]string{"--max-turns", "1000", "--max-session-locks", "50"}, "", 50},
		{nil, "300", 300},
		{[]string{"--max-session-locks", "0"}, "", defaultMaxTurns + lockSpare},
		{[]string{"--max-turns", "9223372036854775807"}, "", math.MaxInt32},
	} {
		t.Setenv("ARMATURE_MAX_SESSION_LOCKS", tc.env)
		c, err := parseServe(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("parseServe(%q): %v", tc.args, err)
		}
		if got := c.lockerConfig().MaxHeld; got != tc.want {
			t.Errorf("parseServe(%q) with ARMATURE_MAX_SESSION_LOCKS=%q: MaxHeld %d, want %d", tc.args, tc.env, got, tc.want)
		}
	}
	t.Setenv("ARMATURE_MAX_SESSION_LOCKS", "")
	if _, err := parseServe([]string{"--max-session-locks", "-1"}, io.Discard); err == nil || !strings.Contains(err.Error(), "max-session-locks") {
		t.Errorf("--max-session-locks -1: %v, want an error naming the flag", err)
	}
	if _, err := parseServe([]string{"--max-session-locks", "many"}, io.Discard); err == nil {
		t.Error("--max-session-locks many was accepted")
	}
}
