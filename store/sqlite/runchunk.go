package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"

	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/runtime"
)

// Event chunks (schema migration 9): the events one write adds to one
// run are stored as one run_event_chunks row whose data column holds
// their types, times and payloads in the format below; the identity
// fields are columns of the row (tenant, run_id, session_id) or of the
// run (agent_id, parent_id), and event i of a chunk has id first_id+i
// and seq first_seq+i.
//
// Format, version 1:
//
//	version   byte 1
//	n times:  uvarint len(type), type bytes,
//	          varint time - previous time (unix nanoseconds; the first is relative to 0),
//	          uvarint len(data), data bytes (none: the event has no data)
//
// The row's n column counts the events; the data must hold exactly n
// and nothing after them.

// chunkVersion is the first byte of a chunk in the format above.
const chunkVersion = 1

// errChunk is what a malformed chunk decodes to; callers wrap it in
// ErrCorrupt with the chunk's id.
var errChunk = errors.New("malformed event chunk")

// appendChunk appends the chunk encoding evs (their Type, Time and Data)
// to dst, and returns it with the size the chunk's events add to the
// run-size estimate beyond their fixed overhead: the sum of their types'
// and data's lengths.
func appendChunk(dst []byte, evs []runtime.Event) ([]byte, int64) {
	dst = append(dst, chunkVersion)
	var prev, size int64
	for _, e := range evs {
		at := nanotime.Of(e.Time)
		dst = appendChunkEvent(dst, prev, e.Type, at, e.Data)
		prev = at
		size += int64(len(e.Type) + len(e.Data))
	}
	return dst, size
}

// appendChunkEvent appends one event of a chunk after its version byte
// or the previous event, whose time was prev.
func appendChunkEvent(dst []byte, prev int64, typ string, at int64, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(typ)))
	dst = append(dst, typ...)
	dst = binary.AppendVarint(dst, at-prev) // wraps like the decoder's sum
	dst = binary.AppendUvarint(dst, uint64(len(data)))
	return append(dst, data...)
}

// chunkLen is an upper bound on the encoded length of evs' chunk.
func chunkLen(evs []runtime.Event) int {
	n := 1
	for _, e := range evs {
		n += 3*binary.MaxVarintLen64 + len(e.Type) + len(e.Data)
	}
	return n
}

// chunkReader decodes a chunk's events one at a time, without
// allocating: what it returns are slices of the chunk.
type chunkReader struct {
	b    []byte
	prev int64
	left int64
}

// newChunkReader checks the chunk's header; n is the row's event count.
func newChunkReader(b []byte, n int64) (chunkReader, error) {
	// Every event takes at least three bytes.
	if len(b) == 0 || b[0] != chunkVersion || n < 1 || n > int64(len(b)-1)/3 {
		return chunkReader{}, errChunk
	}
	return chunkReader{b: b[1:], left: n}, nil
}

// next decodes the next event: its type, time (unix nanoseconds) and
// data (nil when empty). With no event left, it checks that nothing
// follows the last one and returns ok false.
func (r *chunkReader) next() (typ []byte, at int64, data []byte, ok bool, err error) {
	if r.left == 0 {
		if len(r.b) != 0 {
			return nil, 0, nil, false, errChunk
		}
		return nil, 0, nil, false, nil
	}
	if typ, err = r.bytes(); err != nil {
		return nil, 0, nil, false, err
	}
	d, k := binary.Varint(r.b)
	if k <= 0 {
		return nil, 0, nil, false, errChunk
	}
	r.b = r.b[k:]
	// The encoder's at-prev may wrap (times far apart at both ends of
	// the int64 range); so does this sum, back to at.
	r.prev += d
	if data, err = r.bytes(); err != nil {
		return nil, 0, nil, false, err
	}
	if len(data) == 0 {
		data = nil
	}
	r.left--
	return typ, r.prev, data, true, nil
}

// bytes decodes a length-prefixed byte string, capped to its length.
func (r *chunkReader) bytes() ([]byte, error) {
	l, k := binary.Uvarint(r.b)
	if k <= 0 || l > uint64(len(r.b)-k) {
		return nil, errChunk
	}
	b := r.b[k : k+int(l) : k+int(l)]
	r.b = r.b[k+int(l):]
	return b, nil
}

// commonEventTypes are the runtime's event types a turn mostly records.
var commonEventTypes = [...]string{runtime.EventRequestStarted, runtime.EventAdapterEvent, runtime.EventRequestCompleted,
	runtime.EventRequestFailed, runtime.EventRequestCancelled, runtime.EventRequestSuspended}

// eventType returns the type b names: one of commonEventTypes without
// allocating, another type copied.
func eventType(b []byte) string {
	for _, t := range commonEventTypes {
		if string(b) == t { // compared in place
			return t
		}
	}
	return string(b)
}

// copyChunkMax caps the events of a chunk that migration 9 builds from
// run_events rows.
const copyChunkMax = 256

// copyRunEvents moves the run_events rows into run_event_chunks
// (migration 9), keeping every event's id, seq, type, time and data as
// stored: events of one run whose ids and seqs both follow on (a write's
// events) share a chunk.
func copyRunEvents(ctx context.Context, tx *sql.Tx) error {
	ins, err := tx.PrepareContext(ctx, runInsChunkSQL)
	if err != nil {
		return err
	}
	defer ins.Close()
	rows, err := tx.QueryContext(ctx, `SELECT id, tenant, run_id, seq, session_id, type, time, data
		FROM run_events ORDER BY id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		c                    struct{ firstID, firstSeq, lastID, lastSeq, prev, n, size int64 }
		tenant, run, session string
		buf                  []byte
	)
	flush := func() error {
		if c.n == 0 {
			return nil
		}
		_, err := ins.ExecContext(ctx, c.firstID, tenant, run, session, c.firstSeq, c.n, c.size, buf)
		c.n, c.size, c.prev, buf = 0, 0, 0, buf[:0]
		return err
	}
	for rows.Next() {
		var (
			id, seq, at     int64
			t, r, sess, typ string
			data            []byte
		)
		if err := rows.Scan(&id, &t, &r, &seq, &sess, &typ, &at, &data); err != nil {
			return err
		}
		if c.n == 0 || c.n == copyChunkMax || t != tenant || r != run || sess != session ||
			id != c.lastID+1 || seq != c.lastSeq+1 {
			if err := flush(); err != nil {
				return err
			}
			c.firstID, c.firstSeq, tenant, run, session = id, seq, t, r, sess
			buf = append(buf, chunkVersion)
		}
		buf = appendChunkEvent(buf, c.prev, typ, at, data)
		c.prev, c.lastID, c.lastSeq = at, id, seq
		c.n++
		c.size += int64(len(typ) + len(data))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return flush()
}
