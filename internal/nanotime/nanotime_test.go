package nanotime_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/nanotime"
)

func TestOf(t *testing.T) {
	now := time.Date(2026, 11, 29, 8, 0, 0, 123, time.UTC)
	for _, tc := range []struct {
		t    time.Time
		want int64
	}{
		{now, now.UnixNano()},
		{time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1500, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
		{time.Time{}, math.MinInt64},
	} {
		if got := nanotime.Of(tc.t); got != tc.want {
			t.Errorf("Of(%v) = %d, want %d", tc.t, got, tc.want)
		}
	}
	if got := nanotime.Time(nanotime.Of(now)); !got.Equal(now) || got.Location() != time.UTC {
		t.Errorf("round trip: %v", got)
	}
}

func ExampleOf() {
	far := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	fmt.Println(nanotime.Of(far) == math.MaxInt64)
	// Output: true
}
