package server

import "testing"

// TestValidIDRefusesDotSegments: "." and ".." are path segments (the
// router cleans /v1/sessions/.. to /v1), so a session so named could be
// created by POST /v1/sessions but never reached; they are refused like
// any malformed id, and ids merely made of dots and more are not.
func TestValidIDRefusesDotSegments(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want bool
	}{
		{".", false},
		{"..", false},
		{"...", true},
		{".a", true},
		{"a..b", true},
		{"s1", true},
		{"", false},
	} {
		if got := validID(tc.id); got != tc.want {
			t.Errorf("validID(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}
