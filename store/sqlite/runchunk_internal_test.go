package sqlite

import (
	"bytes"
	"errors"
	"math"
	"testing"
)

// chunkEvent is a decoded event of a chunk, as test data.
type chunkEvent struct {
	typ  string
	at   int64
	data []byte
}

// decodeAll decodes every event of chunk b holding n events.
func decodeAll(b []byte, n int64) ([]chunkEvent, error) {
	r, err := newChunkReader(b, n)
	if err != nil {
		return nil, err
	}
	var out []chunkEvent
	for {
		typ, at, data, ok, err := r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			return out, nil
		}
		out = append(out, chunkEvent{string(typ), at, data})
	}
}

// encodeAll encodes evs as a chunk.
func encodeAll(evs []chunkEvent) []byte {
	b := []byte{chunkVersion}
	var prev int64
	for _, e := range evs {
		b = appendChunkEvent(b, prev, e.typ, e.at, e.data)
		prev = e.at
	}
	return b
}

func sameEvents(a, b []chunkEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].typ != b[i].typ || a[i].at != b[i].at || !bytes.Equal(a[i].data, b[i].data) ||
			(a[i].data == nil) != (len(a[i].data) == 0) {
			return false
		}
	}
	return true
}

// FuzzEventChunk: events round-trip through a chunk exactly (types,
// times anywhere in the int64 range, data, empty data as nil); arbitrary
// bytes decode without panicking, to events or to errChunk (ErrCorrupt
// for a caller), and what decodes re-encodes to the same events; every
// proper prefix of a chunk, and the chunk with a byte after it, is
// malformed.
func FuzzEventChunk(f *testing.F) {
	f.Add([]byte{chunkVersion, 1, 'x', 2, 0}, int64(1), "request.started", []byte(`{"a":1}`), int64(1e18), int64(-5))
	f.Add([]byte{chunkVersion, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0, 0}, int64(1), "", []byte(nil),
		int64(math.MinInt64), int64(math.MaxInt64))
	f.Add([]byte{}, int64(0), "adapter.output_delta", []byte("{}"), int64(0), int64(0))
	f.Add([]byte{2, 0, 0, 0}, int64(-1), "\xff", []byte{0}, int64(math.MaxInt64), int64(math.MinInt64))
	f.Fuzz(func(t *testing.T, raw []byte, n int64, typ string, data []byte, t1, t2 int64) {
		// Arbitrary bytes.
		if got, err := decodeAll(raw, n); err != nil {
			if !errors.Is(err, errChunk) {
				t.Fatalf("decode error %v", err)
			}
		} else {
			if int64(len(got)) != n {
				t.Fatalf("decoded %d events of %d", len(got), n)
			}
			again, err := decodeAll(encodeAll(got), n)
			if err != nil || !sameEvents(got, again) {
				t.Fatalf("re-encoded %+v decodes to %+v, %v", got, again, err)
			}
		}
		// A round trip.
		if len(data) == 0 {
			data = nil
		}
		evs := []chunkEvent{{typ, t1, data}, {typ + "2", t2, nil}, {"", t1, data}}
		for k := 1; k <= len(evs); k++ {
			b := encodeAll(evs[:k])
			got, err := decodeAll(b, int64(k))
			if err != nil || !sameEvents(got, evs[:k]) {
				t.Fatalf("round trip of %+v = %+v, %v", evs[:k], got, err)
			}
			// Every prefix (of short chunks: the check is quadratic), else
			// some.
			step := max(1, len(b)/256)
			for cut := 0; cut < len(b); cut += step {
				if _, err := decodeAll(b[:cut], int64(k)); !errors.Is(err, errChunk) {
					t.Fatalf("prefix %d of %d decoded: %v", cut, len(b), err)
				}
			}
			if _, err := decodeAll(append(b, 0), int64(k)); !errors.Is(err, errChunk) {
				t.Fatalf("trailing byte decoded: %v", err)
			}
			if _, err := decodeAll(b, int64(k+1)); !errors.Is(err, errChunk) {
				t.Fatalf("%d events decoded as %d: %v", k, k+1, err)
			}
		}
	})
}

// eventType reads the runtime's common types without allocating, and
// any other type as it is.
func TestEventType(t *testing.T) {
	for _, typ := range []string{"runtime.adapter.event", "runtime.request.completed", "x.custom", ""} {
		if got := eventType([]byte(typ)); got != typ {
			t.Errorf("eventType(%q) = %q", typ, got)
		}
	}
	b := []byte("runtime.adapter.event")
	if n := testing.AllocsPerRun(100, func() { _ = eventType(b) }); n != 0 {
		t.Errorf("eventType of a runtime type: %v allocations", n)
	}
}
