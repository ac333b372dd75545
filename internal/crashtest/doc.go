// Package crashtest checks that durable state survives a process being
// killed at any moment: a child process runs chat turns — some of which
// suspend for approval and are resumed — against one SQLite file, and is
// killed with SIGKILL at random points, many times. After every kill the
// parent reopens the file and checks that every session is a whole number
// of turns (the state before or after the interrupted turn, never a torn
// one) and that no paused-invocation record exists without the session
// state it was suspended with.
package crashtest
