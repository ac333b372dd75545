package server

import (
	"regexp"
	"strings"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses, as proc(5) allows.
	const line = "4242 (armature (x) y) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 50 0 0 20 0 12 0 1000 123456789 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0"
	tests := []struct {
		name string
		raw  string
		boot float64
		want procStat
		ok   bool
	}{
		{"full", line, 1_700_000_000, procStat{cpuSeconds: 3, vsize: 123456789, rss: 2048 * 4096, start: 1_700_000_010}, true},
		{"no boot time", line, 0, procStat{cpuSeconds: 3, vsize: 123456789, rss: 2048 * 4096}, true},
		{"truncated", "4242 (armature) S 1 2 3", 0, procStat{}, false},
		{"no command", "garbage", 0, procStat{}, false},
		{"empty", "", 0, procStat{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseProcStat([]byte(tc.raw), tc.boot, 4096)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("parseProcStat = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestRuntimeMetrics checks that the Go and process collectors are there
// and that every line is valid text exposition format.
func TestRuntimeMetrics(t *testing.T) {
	var b strings.Builder
	writeRuntimeMetrics(&b)
	out := b.String()
	for _, name := range []string{"go_goroutines ", "go_memstats_heap_alloc_bytes ", "go_gc_duration_seconds_count ",
		"process_resident_memory_bytes ", "process_open_fds ", "process_start_time_seconds ", "process_cpu_seconds_total "} {
		if !strings.Contains(out, "\n"+name) {
			t.Errorf("missing %s in:\n%s", name, out)
		}
	}
	sample := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-z_]+="[^"]*"\})? [0-9.e+-]+$`)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			continue
		}
		if !sample.MatchString(line) {
			t.Errorf("not a valid sample line: %q", line)
		}
	}
	if strings.Contains(out, "\nprocess_resident_memory_bytes 0\n") {
		t.Error("resident memory reads as zero")
	}
}
