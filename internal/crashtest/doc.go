// Package crashtest checks that durable state survives a process being
// killed at any moment: a child process runs chat turns — some of which
// suspend for approval and are resumed — against one store, and is
// killed with SIGKILL at random points, many times. After every kill the
// parent reopens the store and checks that every session is a whole
// number of turns (the state before or after the interrupted turn, never
// a torn one) and that no paused-invocation record exists without the
// session state it was suspended with.
//
// The store is a SQLite file (TestKillDuringTurns) or a PostgreSQL schema
// (TestKillDuringTurnsPostgres, on the local server or
// $ARMATURE_POSTGRES_URL): there the child's connections die with it,
// in or out of a transaction. ARMATURE_CRASHTEST_KILLS sets the number of
// kills (25) and ARMATURE_CRASHTEST_SEED the seed of the kill times.
package crashtest
