package server

import (
	"net/http/httptest"
	"strconv"
	"testing"
	"time"
)

// clientRetries: a retry within the window gets its first attempt's
// key, per tenant, path, session and body; one past the window, a
// request that is not an official SDK's, and a first attempt sent again
// get keys of their own; the entries and their list stay bounded.
func TestClientRetries(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	c := newClientRetries(func() time.Time { return now })
	req := func(attempt int, session, body string) (string, string, string) {
		r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
		if attempt >= 0 {
			r.Header.Set(RetryCountHeader, strconv.Itoa(attempt))
		}
		if session != "" {
			r.Header.Set(SessionHeader, session)
		}
		k1, _, _, _ := c.key(r, "acme", []byte(body))
		k2, _, _, _ := c.key(r, "other", []byte(body))
		return k1, k2, ""
	}
	first, otherTenant, _ := req(0, "s", "b")
	if first == "" || otherTenant == "" || first == otherTenant {
		t.Fatalf("first attempts: %q, %q", first, otherTenant)
	}
	if k, _, _ := req(1, "s", "b"); k != first {
		t.Errorf("a retry: %q, want %q", k, first)
	}
	for _, tc := range []struct {
		name    string
		attempt int
		session string
		body    string
	}{
		{"another session", 1, "t", "b"},
		{"another body", 1, "s", "c"},
		{"no retry header", -1, "s", "b"},
	} {
		if k, _, _ := req(tc.attempt, tc.session, tc.body); k == first {
			t.Errorf("%s: the first attempt's key", tc.name)
		}
	}
	now = now.Add(clientRetryWindow)
	if k, _, _ := req(2, "s", "b"); k == first || k == "" {
		t.Errorf("a retry past the window: %q", k)
	}
	again, _, _ := req(0, "s", "b")
	if k, _, _ := req(1, "s", "b"); k != again {
		t.Errorf("a retry of the request sent again: %q, want %q", k, again)
	}

	// The same request sent over and over keeps one entry, and a short list.
	for range 10_000 {
		req(0, "s", "b")
	}
	if len(c.order) > 2*len(c.m)+64 {
		t.Errorf("%d listings for %d entries", len(c.order), len(c.m))
	}
	// Past the bound, the oldest are forgotten.
	for i := range clientRetryEntries + 10 {
		req(0, "s", strconv.Itoa(i))
	}
	if len(c.m) > clientRetryEntries || len(c.order) > 2*len(c.m)+64 {
		t.Errorf("%d entries, %d listings, over the bound %d", len(c.m), len(c.order), clientRetryEntries)
	}
}
