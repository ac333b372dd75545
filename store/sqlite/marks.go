package sqlite

import (
	"bytes"
	"container/list"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/nanotime"
	"github.com/armature-go/armature/session"
)

// Marks (session.Mark: idempotency keys and the outcomes they produced,
// run records) are written in the transaction of the session write they
// come with, without costing that write a page of its own: every page a
// transaction dirties is a WAL frame at commit, and a turn already
// dirties the tail of session_items. So the marks of an append that adds
// items ride on its last item row (session_items.marks, marked_at), in
// the format of appendMarkBlob. Only writes that add no item (a Save, an
// append that only sets fields) and marks rescued from item rows a write
// deletes go to the session_marks table.
//
// A lookup then needs no index on the mark key: the Store keeps, per
// session, the keys of its live marks (markIndex), valid for one version
// of the session (and one incarnation: its created_at). A lookup probes
// the session's header (as a warm load does) and answers from the index
// when it is current; otherwise it rebuilds the session's entry from one
// read transaction, at a cost in the session's item count (the cost of a
// cold load of the session).

// The formats of a marks blob, its first byte: format 1 stores every
// value; format 2 also lets a value be the previous mark's (a length of
// 0: no mark value is empty, it is JSON), as a turn's marks (a message
// id's and a record key's) usually share their value.
const (
	markBlobFormat1 = 1
	markBlobFormat  = 2
)

// appendMarkBlob appends marks, encoded, to b: the format byte, then per
// mark the key's length (uvarint), the key, the value's length and the
// value — length 0 and no bytes for the previous mark's value.
func appendMarkBlob(b []byte, marks []session.Mark) []byte {
	n := 1
	for _, m := range marks {
		n += 2*binary.MaxVarintLen64 + len(m.Key) + len(m.Value)
	}
	b = slices.Grow(b, n)
	b = append(b, markBlobFormat)
	for i, m := range marks {
		b = binary.AppendUvarint(b, uint64(len(m.Key)))
		b = append(b, m.Key...)
		if i > 0 && bytes.Equal(m.Value, marks[i-1].Value) {
			b = append(b, 0)
			continue
		}
		b = binary.AppendUvarint(b, uint64(len(m.Value)))
		b = append(b, m.Value...)
	}
	return b
}

// errMarkBlob reports a marks blob this code cannot read.
var errMarkBlob = errors.New("malformed marks blob")

// eachMark calls fn with every key and value of a marks blob, until fn
// returns false.
func eachMark(b []byte, fn func(key string, value []byte) bool) error {
	if len(b) == 0 || (b[0] != markBlobFormat && b[0] != markBlobFormat1) {
		return errMarkBlob
	}
	shared := b[0] == markBlobFormat
	b = b[1:]
	var prev []byte
	next := func() ([]byte, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, false
		}
		v := b[k : k+int(n)]
		b = b[k+int(n):]
		return v, true
	}
	for len(b) > 0 {
		key, ok := next()
		if !ok {
			return errMarkBlob
		}
		value, ok := next()
		if !ok {
			return errMarkBlob
		}
		if len(value) == 0 {
			if !shared || prev == nil {
				return errMarkBlob
			}
			value = prev
		}
		prev = value
		if !fn(string(key), value) {
			return nil
		}
	}
	return nil
}

var _ session.MarkLister = (*Store)(nil)

// markStatements are the marks' prepared statements.
type markStatements struct {
	insItem   *sql.Stmt // an item row without marks
	insMarked *sql.Stmt // an item row carrying a write's marks
	insPair   *sql.Stmt // two item rows without marks
	insPairM  *sql.Stmt // two item rows, the second carrying a write's marks
	put       *sql.Stmt // a mark row in session_marks
	rescue    *sql.Stmt // the marked item rows of one field, before they are deleted
	rescueAll *sql.Stmt // the marked item rows of a session, before they are deleted
	headerW   *sql.Stmt // version and created_at, on the writer
	headerR   *sql.Stmt // version and created_at, on a reader
	rows      *sql.Stmt // a session's marked item rows (rebuild)
	table     *sql.Stmt // a session's session_marks rows (rebuild)
	rowValue  *sql.Stmt // the marks of one item row
	tblValueW *sql.Stmt // one session_marks row, on the writer
	tblValueR *sql.Stmt // one session_marks row, on a reader
}

func (s *Store) prepareMarks(p func(*sql.DB, string) *sql.Stmt) markStatements {
	w, r := s.writer, s.reader
	const (
		header = `SELECT version, created_at FROM sessions WHERE id = ?`
		value  = `SELECT created_at, value FROM session_marks WHERE session_id = ? AND key = ?`
	)
	return markStatements{
		// Two statements: binding two NULLs costs an unmarked row (most
		// of them) more than a second prepared statement does.
		insItem:   p(w, `INSERT INTO session_items (session_id, field, seq, value) VALUES (?, ?, ?, ?)`),
		insMarked: p(w, `INSERT INTO session_items (session_id, field, seq, value, marks, marked_at) VALUES (?, ?, ?, ?, ?, ?)`),
		// A chat turn appends two items (the message and the reply): one
		// statement for both saves a round through database/sql.
		insPair:  p(w, `INSERT INTO session_items (session_id, field, seq, value) VALUES (?, ?, ?, ?), (?, ?, ?, ?)`),
		insPairM: p(w, `INSERT INTO session_items (session_id, field, seq, value, marks, marked_at) VALUES (?, ?, ?, ?, NULL, NULL), (?, ?, ?, ?, ?, ?)`),
		// A mark given again keeps its newest value.
		put: p(w, `INSERT INTO session_marks (session_id, key, created_at, value) VALUES (?, ?, ?, ?)
			ON CONFLICT (session_id, key) DO UPDATE SET created_at = excluded.created_at, value = excluded.value
			WHERE excluded.created_at >= session_marks.created_at`),
		rescue:    p(w, `SELECT marked_at, marks FROM session_items WHERE session_id = ? AND field = ? AND marks IS NOT NULL`),
		rescueAll: p(w, `SELECT marked_at, marks FROM session_items WHERE session_id = ? AND marks IS NOT NULL`),
		headerW:   p(w, header),
		headerR:   p(r, header),
		rows:      p(r, `SELECT rowid, marked_at, marks FROM session_items WHERE session_id = ? AND marks IS NOT NULL`),
		table:     p(r, `SELECT key, created_at FROM session_marks WHERE session_id = ?`),
		rowValue:  p(r, `SELECT marks FROM session_items WHERE rowid = ? AND session_id = ?`),
		tblValueW: p(w, value),
		tblValueR: p(r, value),
	}
}

// itemWriter inserts a write's item rows two at a time, holding back
// the last ones so that the last can carry the write's marks.
type itemWriter struct {
	tx   *sql.Tx
	id   string
	n    int // rows held
	rows [2]itemRow
	// the tx-bound statements, bound when first used
	one, pair *sql.Stmt
}

// itemRow is an item row waiting to be inserted.
type itemRow struct {
	field string
	seq   int64
	value []byte
}

// add queues an item row, inserting the two held before it.
func (w *itemWriter) add(ctx context.Context, s *Store, field string, seq int64, value []byte) error {
	if w.n == 2 {
		if w.pair == nil {
			w.pair = w.tx.StmtContext(ctx, s.mst.insPair)
		}
		a, b := &w.rows[0], &w.rows[1]
		if _, err := w.pair.ExecContext(ctx, w.id, a.field, a.seq, a.value, w.id, b.field, b.seq, b.value); err != nil {
			return err
		}
		w.n = 0
	}
	w.rows[w.n] = itemRow{field: field, seq: seq, value: value}
	w.n++
	return nil
}

// finish inserts the held rows, the last with marks when there are any,
// and returns its rowid (0 when nothing was held or it carries no
// marks). Without a held row, the marks go to session_marks.
func (w *itemWriter) finish(ctx context.Context, s *Store, marks []session.Mark, now int64) (int64, error) {
	a, b := &w.rows[0], &w.rows[1]
	var (
		res sql.Result
		err error
	)
	switch {
	case w.n == 0:
		return 0, s.putMarkRowsTx(ctx, w.tx, w.id, marks, now)
	case w.n == 1 && len(marks) == 0:
		if w.one == nil {
			w.one = w.tx.StmtContext(ctx, s.mst.insItem)
		}
		_, err = w.one.ExecContext(ctx, w.id, a.field, a.seq, a.value)
	case w.n == 1:
		res, err = w.tx.StmtContext(ctx, s.mst.insMarked).ExecContext(ctx, w.id, a.field, a.seq, a.value, appendMarkBlob(nil, marks), now)
	case len(marks) == 0:
		if w.pair == nil {
			w.pair = w.tx.StmtContext(ctx, s.mst.insPair)
		}
		_, err = w.pair.ExecContext(ctx, w.id, a.field, a.seq, a.value, w.id, b.field, b.seq, b.value)
	default:
		res, err = w.tx.StmtContext(ctx, s.mst.insPairM).ExecContext(ctx, w.id, a.field, a.seq, a.value,
			w.id, b.field, b.seq, b.value, appendMarkBlob(nil, marks), now)
	}
	w.n = 0
	if err != nil || res == nil {
		return 0, err
	}
	return res.LastInsertId()
}

// putMarkRowsTx records marks as session_marks rows.
func (s *Store) putMarkRowsTx(ctx context.Context, tx *sql.Tx, id string, marks []session.Mark, at int64) error {
	if len(marks) == 0 {
		return nil
	}
	put := tx.StmtContext(ctx, s.mst.put)
	for _, m := range marks {
		if _, err := put.ExecContext(ctx, id, m.Key, at, []byte(m.Value)); err != nil {
			return err
		}
	}
	return nil
}

// rescueMarksTx copies the marks carried by item rows about to be
// deleted (a field's, or with field "" all the session's) to
// session_marks, so that replacing a list never forgets what its turns
// recorded. It reports whether it copied any.
func (s *Store) rescueMarksTx(ctx context.Context, tx *sql.Tx, id, field string) (moved bool, err error) {
	var rows *sql.Rows
	if field == "" {
		rows, err = tx.StmtContext(ctx, s.mst.rescueAll).QueryContext(ctx, id)
	} else {
		rows, err = tx.StmtContext(ctx, s.mst.rescue).QueryContext(ctx, id, field)
	}
	if err != nil {
		return false, err
	}
	type rescued struct {
		at    int64
		marks []session.Mark
	}
	var found []rescued
	for rows.Next() {
		var at int64
		var blob []byte
		if err := rows.Scan(&at, &blob); err != nil {
			rows.Close()
			return false, err
		}
		r := rescued{at: at}
		if err := eachMark(blob, func(k string, v []byte) bool {
			r.marks = append(r.marks, session.Mark{Key: k, Value: append(json.RawMessage(nil), v...)})
			return true
		}); err != nil {
			rows.Close()
			return false, corrupt("rescue marks", id, errcat.SessionSaveFailed, "%v", err)
		}
		found = append(found, r)
	}
	if err := rows.Close(); err != nil {
		return false, err
	}
	if err := rows.Err(); err != nil {
		return false, err
	}
	for _, r := range found {
		if err := s.putMarkRowsTx(ctx, tx, id, r.marks, r.at); err != nil {
			return false, err
		}
	}
	return len(found) > 0, nil
}

// markRef locates a live mark: the item row carrying it, or 0 for a
// session_marks row; at is when it was written (unix nanoseconds).
type markRef struct {
	row int64
	at  int64
}

// markEntry is the index of one session's marks at one version of one
// incarnation of the session.
type markEntry struct {
	id      string
	version int64
	created int64
	keys    map[string]markRef
	size    int // key bytes, for the index's bound
}

// markIndex bounds the entries it keeps, least recently used first out.
type markIndex struct {
	mu       sync.Mutex
	maxBytes int
	bytes    int
	lru      list.List // of *markEntry, most recently used in front
	byID     map[string]*list.Element
}

// markIndexBytes bounds the key bytes a Store's mark index keeps (with a
// per-key overhead); a session whose entry was evicted rebuilds it on
// its next lookup.
const (
	markIndexBytes    = 16 << 20
	markEntryOverhead = 64
)

func (x *markIndex) init() {
	x.maxBytes = markIndexBytes
	x.byID = map[string]*list.Element{}
}

// lookup returns the entry's reference for key, and whether the entry
// of id is current at (version, created).
func (x *markIndex) lookup(id, key string, version, created int64) (markRef, bool, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.byID[id]
	if !ok {
		return markRef{}, false, false
	}
	e := el.Value.(*markEntry)
	if e.version != version || e.created != created {
		return markRef{}, false, false
	}
	x.lru.MoveToFront(el)
	ref, found := e.keys[key]
	return ref, found, true
}

// with calls fn with the entry of id, under the index's lock, when it
// is current at (version, created), and reports whether it was.
func (x *markIndex) with(id string, version, created int64, fn func(*markEntry)) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.byID[id]
	if !ok {
		return false
	}
	e := el.Value.(*markEntry)
	if e.version != version || e.created != created {
		return false
	}
	x.lru.MoveToFront(el)
	fn(e)
	return true
}

// lookupAt is lookup for a caller that knows the version but not the
// incarnation: the entry is current when it is at version.
func (x *markIndex) lookupAt(id, key string, version int64) (markRef, bool, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.byID[id]
	if !ok || version <= 0 {
		return markRef{}, false, false
	}
	e := el.Value.(*markEntry)
	if e.version != version {
		return markRef{}, false, false
	}
	x.lru.MoveToFront(el)
	ref, found := e.keys[key]
	return ref, found, true
}

// put installs e, replacing the entry of its session.
func (x *markIndex) put(e *markEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.removeLocked(e.id)
	if e.size > x.maxBytes {
		return
	}
	x.byID[e.id] = x.lru.PushFront(e)
	x.bytes += e.size
	for x.bytes > x.maxBytes {
		x.removeLocked(x.lru.Back().Value.(*markEntry).id)
	}
}

// committed records a committed write of id from version from: the
// entry, if it was current, advances with the write's marks; otherwise
// it is dropped.
func (x *markIndex) committed(id string, from int64, marks []session.Mark, row, at int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	el, ok := x.byID[id]
	if !ok {
		return
	}
	e := el.Value.(*markEntry)
	if e.version != from {
		x.removeLocked(id)
		return
	}
	e.version++
	for _, m := range marks {
		if _, dup := e.keys[m.Key]; !dup {
			n := len(m.Key) + markEntryOverhead
			e.size += n
			x.bytes += n
		}
		e.keys[m.Key] = markRef{row: row, at: at}
	}
	for x.bytes > x.maxBytes && x.lru.Len() > 0 {
		x.removeLocked(x.lru.Back().Value.(*markEntry).id)
	}
}

// drop forgets the entry of id.
func (x *markIndex) drop(id string) {
	x.mu.Lock()
	x.removeLocked(id)
	x.mu.Unlock()
}

func (x *markIndex) removeLocked(id string) {
	if el, ok := x.byID[id]; ok {
		x.bytes -= el.Value.(*markEntry).size
		x.lru.Remove(el)
		delete(x.byID, id)
	}
}

// LoadMark returns the value of a mark recorded with a write of the
// session, or an error wrapping session.ErrNotFound when there is none
// (never written, older than Config.MarkRetention, or deleted with its
// session). On a session whose marks the Store indexes (every session
// it wrote or looked up lately), it costs a header probe.
func (s *Store) LoadMark(ctx context.Context, sessionID, key string) (json.RawMessage, error) {
	const op = "load mark"
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := session.ValidateMarkKey(key); err != nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, sessionID, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, sessionID, session.ErrClosed)
	}
	notFound := func(why string) error { return &markNotFound{id: sessionID, key: key, why: why} }
	version, created, err := s.probeHeader(ctx, sessionID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, notFound("")
	case err != nil:
		return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
	}
	ref, found, current := s.marks.lookup(sessionID, key, version, created)
	if !current {
		ref, found, err = s.indexMarks(ctx, sessionID, key)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, notFound("")
		case err != nil:
			return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
		}
	}
	return s.markAnswer(ctx, sessionID, key, ref, found)
}

// markAnswer reads the value of a mark the index located (found), or
// answers that there is none (not found, or expired).
func (s *Store) markAnswer(ctx context.Context, sessionID, key string, ref markRef, found bool) (json.RawMessage, error) {
	if !found {
		return nil, &markNotFound{id: sessionID, key: key}
	}
	if nanotime.Of(s.now())-ref.at > int64(s.retention) {
		return nil, &markNotFound{id: sessionID, key: key, why: " (expired)"}
	}
	v, err := s.markValue(ctx, sessionID, key, ref)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, &markNotFound{id: sessionID, key: key}
	case err != nil:
		return nil, s.fail(ctx, "load mark", sessionID, errcat.SessionLoadFailed, err)
	}
	return v, nil
}

// LoadMarkAt is LoadMark for a caller that believes version current
// (session.VersionedMarker): when this Store's index holds the session's
// marks at exactly that version, it answers from the index without
// reading the session's header; otherwise it is LoadMark.
func (s *Store) LoadMarkAt(ctx context.Context, sessionID, key string, version int64) (json.RawMessage, error) {
	const op = "load mark"
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := session.ValidateMarkKey(key); err != nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, sessionID, err)
	}
	ref, found, current := s.marks.lookupAt(sessionID, key, version)
	if !current || s.closed.Load() {
		return s.LoadMark(ctx, sessionID, key)
	}
	return s.markAnswer(ctx, sessionID, key, ref, found)
}

// markNotFound is LoadMark's answer for a mark it does not hold: the
// common answer (every first transmission asks), so it costs one
// allocation and is formatted only when printed.
type markNotFound struct{ id, key, why string }

func (e *markNotFound) Error() string {
	return fmt.Sprintf("sqlite: load mark %q %q: %v%s", e.id, e.key, session.ErrNotFound, e.why)
}

// Unwrap makes the error match session.ErrNotFound.
func (e *markNotFound) Unwrap() error { return session.ErrNotFound }

// probeHeader reads a session's version and created_at, on the idle
// writer's warm page cache when it can (as the version probe of a warm
// load does), else on a reader.
func (s *Store) probeHeader(ctx context.Context, id string) (version, created int64, err error) {
	stmt, release := s.warm(s.mst.headerR, s.mst.headerW)
	defer release()
	err = stmt.QueryRowContext(ctx, id).Scan(&version, &created)
	return version, created, err
}

// warm returns onWriter, claiming the writer, when the writer is idle (a
// read on its warm page cache is cheapest), else onReader; release
// gives the writer back.
func (s *Store) warm(onReader, onWriter *sql.Stmt) (stmt *sql.Stmt, release func()) {
	q := &s.wq
	q.mu.Lock()
	idle := q.claimIdleLocked()
	q.mu.Unlock()
	if !idle {
		return onReader, func() {}
	}
	return onWriter, q.release
}

// indexMarks builds the mark index entry of a session from one read
// transaction, installs it, and returns the reference of its mark key
// (found false when the session has none).
func (s *Store) indexMarks(ctx context.Context, id, key string) (markRef, bool, error) {
	e, err := s.readMarkEntry(ctx, id)
	if err != nil {
		return markRef{}, false, err
	}
	// The key is read before the entry is shared: once installed, a
	// committed write of the session updates its keys under the index's
	// lock.
	ref, found := e.keys[key]
	s.marks.put(e)
	return ref, found, nil
}

// readMarkEntry reads the mark index entry of a session from one read
// transaction (sql.ErrNoRows when the session does not exist).
func (s *Store) readMarkEntry(ctx context.Context, id string) (*markEntry, error) {
	tx, err := s.reader.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	e := &markEntry{id: id, keys: map[string]markRef{}}
	if err := tx.StmtContext(ctx, s.mst.headerR).QueryRowContext(ctx, id).Scan(&e.version, &e.created); err != nil {
		return nil, err
	}
	// Whichever of two marks of one key was written last wins, as in
	// session_marks.
	add := func(key string, ref markRef) {
		if old, ok := e.keys[key]; ok && old.at > ref.at {
			return
		}
		if _, ok := e.keys[key]; !ok {
			e.size += len(key) + markEntryOverhead
		}
		e.keys[key] = ref
	}
	rows, err := tx.StmtContext(ctx, s.mst.rows).QueryContext(ctx, id)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var ref markRef
		var blob []byte
		if err := rows.Scan(&ref.row, &ref.at, &blob); err != nil {
			rows.Close()
			return nil, err
		}
		if err := eachMark(blob, func(k string, _ []byte) bool { add(k, ref); return true }); err != nil {
			rows.Close()
			return nil, corrupt("load mark", id, errcat.SessionLoadFailed, "item row %d: %v", ref.row, err)
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = tx.StmtContext(ctx, s.mst.table).QueryContext(ctx, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var key string
		var at int64
		if err := rows.Scan(&key, &at); err != nil {
			return nil, err
		}
		add(key, markRef{at: at})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return e, nil
}

// MarkKeys returns the keys of the session's live marks beginning with
// prefix, the most recently written first, at most limit
// (session.MarkLister). It answers
// from the Store's index of the session's marks when it is current (a
// header probe), and otherwise reads the session's marks as a lookup
// does on a cold index.
func (s *Store) MarkKeys(ctx context.Context, sessionID, prefix string, limit int) ([]string, error) {
	const op = "list mark keys"
	if err := session.ValidateID(sessionID); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := session.ValidateMarkPrefix(prefix, limit); err != nil {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, sessionID, err)
	}
	if s.closed.Load() {
		return nil, fmt.Errorf("sqlite: %s %q: %w", op, sessionID, session.ErrClosed)
	}
	version, created, err := s.probeHeader(ctx, sessionID)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
	}
	cutoff := nanotime.Of(s.now()) - int64(s.retention)
	var found []session.WrittenKey
	collect := func(e *markEntry) {
		for k, ref := range e.keys {
			if strings.HasPrefix(k, prefix) && ref.at >= cutoff {
				found = append(found, session.WrittenKey{Key: k, At: ref.at})
			}
		}
	}
	if !s.marks.with(sessionID, version, created, collect) {
		e, err := s.readMarkEntry(ctx, sessionID)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, nil
		case err != nil:
			return nil, s.fail(ctx, op, sessionID, errcat.SessionLoadFailed, err)
		}
		collect(e)
		s.marks.put(e)
	}
	return session.NewestKeys(found, limit), nil
}

// markValue reads the value of a mark the index located.
func (s *Store) markValue(ctx context.Context, id, key string, ref markRef) (json.RawMessage, error) {
	if ref.row == 0 {
		stmt, release := s.warm(s.mst.tblValueR, s.mst.tblValueW)
		defer release()
		var at int64
		var v []byte
		if err := stmt.QueryRowContext(ctx, id, key).Scan(&at, &v); err != nil {
			return nil, err
		}
		return v, nil
	}
	var blob []byte
	if err := s.mst.rowValue.QueryRowContext(ctx, ref.row, id).Scan(&blob); err != nil {
		return nil, err
	}
	if blob == nil { // swept since it was indexed
		return nil, sql.ErrNoRows
	}
	var v json.RawMessage
	if err := eachMark(blob, func(k string, val []byte) bool {
		if k == key {
			v = append(json.RawMessage(nil), val...)
			return false
		}
		return true
	}); err != nil {
		return nil, corrupt("load mark", id, errcat.SessionLoadFailed, "item row %d: %v", ref.row, err)
	}
	if v == nil {
		return nil, sql.ErrNoRows
	}
	return v, nil
}

// markSweepInterval spaces the sweeps of expired marks; the first runs
// markSweepDelay after Open, off the start-up path. A sweep clears item
// rows markSweepBatch rowids per write, so turns queue behind it for
// little time.
const (
	markSweepInterval = time.Hour
	markSweepDelay    = time.Minute
	markSweepBatch    = 4096
)

// startSweeper deletes expired marks every markSweepInterval, until
// Close, and then lets SQLite gather the statistics its query planner
// lacks (optimize): a server that runs for long, and is never closed
// cleanly, would otherwise plan with none.
func (s *Store) startSweeper() {
	ctx, cancel := context.WithCancel(context.Background())
	s.sweepStop, s.sweepDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.sweepDone)
		defer cancel()
		t := time.NewTimer(markSweepDelay)
		defer t.Stop()
		go func() {
			select {
			case <-s.sweepStop:
				cancel()
			case <-ctx.Done():
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if err := s.sweepMarks(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, session.ErrClosed) {
				s.log.Warn("sqlite: sweeping expired marks failed", "path", s.path, "err", err)
			}
			if err := s.optimize(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("sqlite: optimize failed", "path", s.path, "err", err)
			}
			t.Reset(markSweepInterval)
		}
	}()
}

// sweepMarks deletes the marks older than the retention period: the
// session_marks rows, then the marks of item rows, a batch of rowids per
// write.
func (s *Store) sweepMarks(ctx context.Context) error {
	cutoff := nanotime.Of(s.now()) - int64(s.retention)
	if err := s.write(ctx, "sweep marks", "", "", func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM session_marks WHERE created_at < ?`, cutoff)
		return err
	}); err != nil {
		return err
	}
	var last int64
	if err := s.reader.QueryRowContext(ctx, `SELECT coalesce(max(rowid), 0) FROM session_items`).Scan(&last); err != nil {
		return err
	}
	for lo := int64(0); lo < last; lo += markSweepBatch {
		if err := s.write(ctx, "sweep marks", "", "", func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE session_items SET marks = NULL, marked_at = NULL
				WHERE rowid > ? AND rowid <= ? AND marked_at < ?`, lo, lo+markSweepBatch, cutoff)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// optimizeAnalysisLimit bounds the rows ANALYZE reads of each index when
// optimize gathers statistics, so that it holds the writer briefly
// whatever the database's size (SQLite's recommendation for optimize).
const optimizeAnalysisLimit = 1000

// optimize runs "PRAGMA optimize" on the writer's connection, with its
// analysis bounded: statistics for the tables whose indexes gained them
// since, as SQLite recommends every few hours of a long-lived
// connection.
func (s *Store) optimize(ctx context.Context) error {
	conn, err := s.writer.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA analysis_limit = %d", optimizeAnalysisLimit)); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "PRAGMA optimize")
	return err
}
