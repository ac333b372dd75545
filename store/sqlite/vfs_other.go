//go:build !unix

package sqlite

// exclusiveVFS is empty where SQLite has no "unix-excl" VFS: a Store then
// always uses the default VFS and its per-transaction locks, as with
// Config.Shared.
const exclusiveVFS = ""
