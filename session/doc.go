// Package session is the SessionStore contract of the OpenArmature
// sessions capability: named state records that persist across
// invocations under a caller-supplied session id.
//
// A [Store] loads, saves, deletes and lists [Record]s. A record holds the
// session's state as one JSON value per field, the schema version it was
// written under (for migration, see package migrate), and a version
// counter that every write increments. Writes can be conditional on the
// version (optimistic concurrency): a mismatch fails with
// [ErrWriteConflict], category session_write_conflict.
//
// Two optional capabilities keep a chat turn's cost independent of the
// conversation's length: a conditional Load (LoadRequest.IfVersionNot)
// lets a caller that holds a decoded copy confirm it is current without
// reading the history, and an [Appender] persists a turn as the items it
// appended plus a version bump. A cold load can be bounded too: a
// LoadRequest.Tail ([ListTail]) asks for only the last items of list
// fields, and Record.Skipped reports how many it left out (the SQLite
// and Postgres stores read the tail by a range of the list's item
// numbers, at a cost independent of the history). A record with items
// left out is partial: appends to it work as to the whole, but it must
// never be saved whole over the stored record. A [Pager] reads a page of
// one list field anywhere in it ([PageRequest]: the items before an
// index) with the record's header, at a cost that follows the page: how
// a client reads a long conversation backwards.
//
// [MemoryStore] is the in-memory reference backend; the embedded SQLite
// and Postgres backends live in their own packages. Every backend passes
// the exported conformance suite in package sessiontest:
//
//	func TestStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T) session.Store {
//			return session.NewMemoryStore(session.MemoryConfig{})
//		})
//	}
//
// Stores are safe for concurrent use and never alias the records they
// return with the records they hold.
package session
