package server

import "testing"

// TestSharesCountTenants: the default per-tenant shares count tenants,
// not tokens: a tenant rotating its key (two tokens) keeps all of every
// limit on a single-tenant server; two tenants get a quarter each.
// Before, two tokens of one tenant cut it to a quarter.
func TestSharesCountTenants(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tokens []Token
		want   int
	}{
		{"no tokens", nil, 8},
		{"one tenant, two tokens", []Token{{Secret: "a", Tenant: "acme"}, {Secret: "b", Tenant: "acme"}}, 8},
		{"two tenants", []Token{{Secret: "a", Tenant: "acme"}, {Secret: "b", Tenant: "globex"}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Tokens: tc.tokens, MaxTurns: 8, MaxQueuedTurns: 8, MaxSSEStreams: 8}
			c.setDefaults()
			if c.MaxTurnsPerTenant != tc.want || c.MaxQueuedTurnsPerTenant != tc.want || c.MaxSSEStreamsPerTenant != tc.want {
				t.Fatalf("shares %d/%d/%d, want %d", c.MaxTurnsPerTenant, c.MaxQueuedTurnsPerTenant, c.MaxSSEStreamsPerTenant, tc.want)
			}
		})
	}
}
