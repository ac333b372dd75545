// Package checkpoint is the store contract for the records that let an
// invocation continue later: checkpoint records (pipeline-utilities §10)
// and paused-invocation records of suspended invocations (suspension §2).
// Both kinds share one [Store], told apart by [Kind] (§10.15).
//
// The engine serializes its payload itself ([Record].Data is JSON); a
// store keeps it opaque and indexes the metadata: the invocation,
// correlation, session and signal ids. [Store.Take] loads and deletes a
// record atomically, so that two workers resuming one paused invocation
// cannot both run it.
//
// [MemoryStore] is the in-memory reference backend: records vanish with
// the process. The embedded SQLite store persists them durably.
//
//	store := checkpoint.NewMemoryStore(nil)
//	g, err := b.Compile(graph.WithCheckpointStore(store))
package checkpoint
