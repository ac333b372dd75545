//go:build unix

package sqlite

// exclusiveVFS is the SQLite VFS of a Store that owns its file
// (Config.Shared false): "unix-excl" takes one process-wide lock on the
// database file at first use and keeps the WAL index in heap memory, so
// transactions take no file locks of their own and need no shared-memory
// file, while every connection of this process still shares the file.
const exclusiveVFS = "unix-excl"
