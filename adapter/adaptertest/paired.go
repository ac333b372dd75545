package adaptertest

import (
	"slices"
	"strconv"
	"testing"
	"time"
)

// Paired measures what Armature's runtime adds to an upstream agent's
// turn: each iteration of b runs direct (the upstream alone) and
// viaRuntime (the same agent behind the runtime) once, each on a new
// session id, alternating which goes first, and reports the median
// time of each ("direct-ns/turn", "runtime-ns/turn") and their
// difference ("overhead-ns/turn"). Alternating in one loop exposes both
// sides to the same machine load, which separate benchmarks run minutes
// apart do not.
func Paired(b *testing.B, direct, viaRuntime func(session string)) {
	var d, r []time.Duration
	timed := func(f func(string), id string, into *[]time.Duration) {
		t := time.Now()
		f(id)
		*into = append(*into, time.Since(t))
	}
	i := 0
	for b.Loop() {
		i++
		id := strconv.Itoa(i)
		if i%2 == 0 {
			timed(direct, "d-"+id, &d)
			timed(viaRuntime, "r-"+id, &r)
		} else {
			timed(viaRuntime, "r-"+id, &r)
			timed(direct, "d-"+id, &d)
		}
	}
	md, mr := median(d), median(r)
	b.ReportMetric(md, "direct-ns/turn")
	b.ReportMetric(mr, "runtime-ns/turn")
	b.ReportMetric(mr-md, "overhead-ns/turn")
}

func median(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)/2])
}
