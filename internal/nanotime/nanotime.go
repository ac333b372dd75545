// Package nanotime converts times to and from the unix nanoseconds the
// SQL stores keep (SQLite, PostgreSQL), clamped to the int64 range: a
// time before 1677 or after 2262 is the range's end, never a wrapped
// value (time.Time.UnixNano wraps outside it).
//
//	n := nanotime.Of(t)     // store
//	t2 := nanotime.Time(n)  // load, in UTC
package nanotime

import (
	"math"
	"time"
)

var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Of returns t in unix nanoseconds, clamped to the int64 range.
func Of(t time.Time) int64 {
	switch {
	case t.Before(minTime):
		return math.MinInt64
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// Time returns the UTC time of n unix nanoseconds.
func Time(n int64) time.Time { return time.Unix(0, n).UTC() }
