package cli

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestServeDebug(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if _, stop, err := serveDebug(addr, log); err == nil {
			stop()
			t.Errorf("serveDebug(%q): served the unauthenticated profiler off loopback", addr)
		}
	}
	// Served: the index answers on the listener it reports.
	ln, stop, err := serveDebug("127.0.0.1:0", log)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := http.Get("http://" + ln + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("GET /debug/pprof/: %d %.200s", resp.StatusCode, body)
	}
}

func TestParseLogLevel(t *testing.T) {
	for _, tc := range []struct {
		name, env string
		args      []string
		want      slog.Level
		wantErr   bool
	}{
		{name: "default", want: slog.LevelInfo},
		{name: "flag", args: []string{"--log-level", "warn"}, want: slog.LevelWarn},
		{name: "env", env: "debug", want: slog.LevelDebug},
		{name: "flag over env", env: "debug", args: []string{"--log-level=error"}, want: slog.LevelError},
		{name: "bad flag", args: []string{"--log-level", "loud"}, wantErr: true},
		{name: "bad env", env: "loud", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("ARMATURE_LOG_LEVEL", tc.env)
			c, err := parseServe(tc.args, io.Discard)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("parseServe(%q) accepted a bad level", tc.args)
				}
				return
			}
			if err != nil || c.logLevel != tc.want {
				t.Fatalf("parseServe(%q) = %v, %v; want %v", tc.args, c.logLevel, err, tc.want)
			}
		})
	}
}
