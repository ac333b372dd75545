// Package bytesize parses a size in bytes as Armature's flags and
// workspace files write it: a number of bytes, optionally with a binary
// suffix.
//
//	n, err := bytesize.Parse("32MiB") // 33554432
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Parse parses "1073741824", "512MiB", "1GiB", "64KB" (KB, MB, GB and
// TB are binary too), "12B". The size must not be negative or overflow
// an int64.
func Parse(v string) (int64, error) {
	v = strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"TB", 1 << 40}, {"B", 1}} {
		if num, ok := strings.CutSuffix(v, u.suffix); ok {
			v, mult = strings.TrimSpace(num), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("invalid size %q: want bytes, optionally with a KiB, MiB or GiB suffix", v)
	}
	return n * mult, nil
}
