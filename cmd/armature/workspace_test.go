package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseTokens(t *testing.T) {
	got, err := parseTokens(" s3cret-token-0001:acme , other-secret-0002:globex")
	if err != nil || len(got) != 2 || got[0].Tenant != "acme" || got[1].Secret != "other-secret-0002" {
		t.Fatalf("parseTokens = %+v, %v", got, err)
	}
	for _, bad := range []string{"nocolon", ":tenant", "secret:"} {
		if _, err := parseTokens(bad); err == nil {
			t.Errorf("parseTokens(%q) succeeded", bad)
		}
	}
}

func TestWorkspace(t *testing.T) {
	dir := t.TempDir()
	write := func(body string) string {
		p := filepath.Join(dir, "ws.yaml")
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ws, err := loadWorkspace("")
	if err != nil || len(ws.Agents) != 1 || ws.Agents[0].Provider != "demo" {
		t.Fatalf("default workspace = %+v, %v", ws, err)
	}
	ws, err = loadWorkspace(write(`
default_agent: support
task_hints: {refunds: support}
agents:
  - id: support
    provider: demo
    tools: [lookup_order, issue_refund]
    approval: [issue_refund]
`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := ws.Agents[0].build(t.Context())
	if err != nil || a == nil {
		t.Fatalf("build = %v", err)
	}
	for _, tc := range []struct{ body, want string }{
		{"agents: []", "no agents"},
		{"agents: [{id: x, provider: nope}]", "unknown provider"},
		{"agents: [{id: x, tools: [rm_rf]}]", "unknown tool"},
		{"agents: [{id: x, tools: [lookup_order], approval: [issue_refund]}]", "not among the agent's tools"},
		{"agents: {", "workspace"},
	} {
		ws, err := loadWorkspace(write(tc.body))
		if err == nil {
			_, err = ws.Agents[0].build(t.Context())
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1073741824", 1 << 30, true},
		{"512MiB", 512 << 20, true},
		{"1GiB", 1 << 30, true},
		{" 64 KB ", 64 << 10, true},
		{"2GB", 2 << 30, true},
		{"0", 0, true},
		{"10B", 10, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5GiB", 0, false},
		{"lots", 0, false},
		{"9223372036854775807GiB", 0, false},
	}
	for _, tc := range tests {
		got, err := parseBytes(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestServeRetentionFlags(t *testing.T) {
	t.Setenv("ARMATURE_RUN_MAX_BYTES", "2GiB")
	t.Setenv("ARMATURE_SESSION_CACHE_BYTES", "")
	c, err := parseServe([]string{"--run-retention", "72h", "--session-cache-bytes", "64MiB"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.runRetention != 72*time.Hour || c.runMaxBytes != 2<<30 || c.cacheBytes != 64<<20 {
		t.Fatalf("retention %v, run cap %d, cache %d", c.runRetention, c.runMaxBytes, c.cacheBytes)
	}
	if _, err := parseServe([]string{"--run-max-bytes", "a lot"}, io.Discard); err == nil {
		t.Fatal("an invalid size was accepted")
	}
}
