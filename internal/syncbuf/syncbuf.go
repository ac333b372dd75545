// Package syncbuf is a bytes.Buffer safe for a writer and readers in
// other goroutines: the sink tests give a logger, a child process's
// output or a client whose output they read while it runs.
//
//	var out syncbuf.Buffer
//	cmd.Stdout = &out
//	... out.String()
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer guarded by a mutex. The zero value is ready
// to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
