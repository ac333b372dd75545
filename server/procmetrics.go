package server

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// writeRuntimeMetrics appends the Go runtime and process collectors in the
// names the Prometheus Go client uses (go_*, process_*), so dashboards
// built for any Go service work unchanged. Process figures come from
// /proc and are left out where it is not mounted (not Linux).
func writeRuntimeMetrics(b *strings.Builder) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", name, help, name, name, strconv.FormatFloat(v, 'g', -1, 64))
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s counter\n%s %s\n", name, help, name, name, strconv.FormatFloat(v, 'g', -1, 64))
	}
	gauge("go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	gauge("go_threads", "Number of OS threads created.", float64(threadCount()))
	fmt.Fprintf(b, "# HELP go_info Information about the Go environment.\n# TYPE go_info gauge\ngo_info{version=%q} 1\n", runtime.Version())
	gauge("go_memstats_alloc_bytes", "Number of bytes allocated and still in use.", float64(ms.Alloc))
	counter("go_memstats_alloc_bytes_total", "Total number of bytes allocated, even if freed.", float64(ms.TotalAlloc))
	gauge("go_memstats_sys_bytes", "Number of bytes obtained from system.", float64(ms.Sys))
	counter("go_memstats_mallocs_total", "Total number of mallocs.", float64(ms.Mallocs))
	counter("go_memstats_frees_total", "Total number of frees.", float64(ms.Frees))
	gauge("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.", float64(ms.HeapAlloc))
	gauge("go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system.", float64(ms.HeapSys))
	gauge("go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used.", float64(ms.HeapIdle))
	gauge("go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use.", float64(ms.HeapInuse))
	gauge("go_memstats_heap_released_bytes", "Number of heap bytes released to OS.", float64(ms.HeapReleased))
	gauge("go_memstats_heap_objects", "Number of allocated objects.", float64(ms.HeapObjects))
	gauge("go_memstats_stack_inuse_bytes", "Number of bytes in use by the stack allocator.", float64(ms.StackInuse))
	gauge("go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place.", float64(ms.NextGC))
	gauge("go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC)/1e9)
	fmt.Fprintf(b, "# HELP go_gc_duration_seconds A summary of the pause duration of garbage collection cycles.\n# TYPE go_gc_duration_seconds summary\ngo_gc_duration_seconds_sum %s\ngo_gc_duration_seconds_count %d\n",
		strconv.FormatFloat(float64(ms.PauseTotalNs)/1e9, 'g', -1, 64), ms.NumGC)

	p, ok := readProcStat()
	if !ok {
		return
	}
	counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", p.cpuSeconds)
	gauge("process_resident_memory_bytes", "Resident memory size in bytes.", float64(p.rss))
	gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", float64(p.vsize))
	if p.start > 0 {
		gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", p.start)
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		gauge("process_open_fds", "Number of open file descriptors.", float64(len(fds)))
	}
	if max, ok := maxFDs(); ok {
		gauge("process_max_fds", "Maximum number of open file descriptors.", max)
	}
}

// procStat is what /proc/self/stat says about this process.
type procStat struct {
	cpuSeconds float64
	rss, vsize uint64
	start      float64 // unix seconds; 0 when unknown
}

// clockTicks is USER_HZ, which Linux fixes at 100 for every architecture
// userspace sees.
const clockTicks = 100

// readProcStat parses /proc/self/stat (proc(5)): the fields after the
// command name, which is in parentheses and may itself hold spaces.
func readProcStat() (procStat, bool) {
	raw, err := readSmallFile("/proc/self/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseProcStat(raw, bootTime(), os.Getpagesize())
}

func parseProcStat(raw []byte, boot float64, pageSize int) (procStat, bool) {
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(string(raw[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime 15, starttime 22,
	// vsize 23, rss 24 (in pages).
	if len(f) < 22 {
		return procStat{}, false
	}
	num := func(k int) uint64 { n, _ := strconv.ParseUint(f[k-3], 10, 64); return n }
	p := procStat{
		cpuSeconds: float64(num(14)+num(15)) / clockTicks,
		vsize:      num(23),
		rss:        num(24) * uint64(pageSize),
	}
	if boot > 0 {
		p.start = boot + float64(num(22))/clockTicks
	}
	return p, true
}

// bootTime is the btime line of /proc/stat, in unix seconds.
func bootTime() float64 {
	raw, err := readSmallFile("/proc/stat")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			n, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return n
		}
	}
	return 0
}

// maxFDs is the soft "Max open files" limit of /proc/self/limits.
func maxFDs() (float64, bool) {
	raw, err := readSmallFile("/proc/self/limits")
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				n, err := strconv.ParseFloat(f[0], 64)
				return n, err == nil
			}
		}
	}
	return 0, false
}

// threadCount is the Threads line of /proc/self/status, or the runtime's
// count of Ms it created where /proc is not there.
func threadCount() int {
	raw, err := readSmallFile("/proc/self/status")
	if err == nil {
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil {
					return n
				}
			}
		}
	}
	n, _ := runtime.ThreadCreateProfile(nil)
	return n
}

// readSmallFile reads at most 64 KiB of a /proc file (which report a
// size of zero, so os.ReadFile's sizing does not help).
func readSmallFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
