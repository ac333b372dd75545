package session_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/armature-go/armature/session"
)

// sqlStateError is a driver's error carrying a SQLSTATE, as pgx's is.
type sqlStateError string

func (e sqlStateError) Error() string    { return "ERROR: SQLSTATE " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a refused connection", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, true},
		{"wrapped reset", fmt.Errorf("read: %w", syscall.ECONNRESET), true},
		{"the store's timeout", fmt.Errorf("query: %w", context.DeadlineExceeded), true},
		{"cut mid-answer", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"connection exception", fmt.Errorf("load: %w", sqlStateError("08006")), true},
		{"too many connections", sqlStateError("53300"), true},
		{"admin shutdown", sqlStateError("57P01"), true},
		{"undefined table", sqlStateError("42P01"), false},
		{"a bad record", errors.New("session: corrupt record"), false},
		{"not found", session.ErrNotFound, false},
	}
	for _, tc := range tests {
		if got := session.Unavailable(tc.err); got != tc.want {
			t.Errorf("%s: Unavailable(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
