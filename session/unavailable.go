package session

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
)

// ErrUnavailable is wrapped by a store's error when the store could not
// be reached (Unavailable reports it): a store that rewrites its
// driver's errors (to take a password out of them, say) keeps the fact
// with it.
var ErrUnavailable = errors.New("session: the store is unavailable")

// Unavailable reports whether err, a store's failure, says the store
// could not be reached rather than that the session is bad: ErrUnavailable, a network
// error (a refused, reset or lost connection), the store's own timeout
// (context.DeadlineExceeded when the caller's context had not ended), a
// connection cut mid-answer, or a database error of SQLSTATE class 08
// (connection exception), 53 (insufficient resources: too many
// connections, a full disk) or 57P01–57P03 (the server shutting down or
// starting), as drivers report them (an error with a SQLState method,
// as pgx's). The chat harness and the graph engine classify a load that
// failed so as session_store_unavailable (retryable: the session is
// intact) rather than session_load_failed.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	var st interface{ SQLState() string }
	if errors.As(err, &st) {
		code := st.SQLState()
		return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") ||
			code == "57P01" || code == "57P02" || code == "57P03"
	}
	return false
}
