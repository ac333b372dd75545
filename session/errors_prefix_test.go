package session_test

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/session"
)

func TestSentinelPrefixes(t *testing.T) {
	for _, err := range []error{session.ErrNotFound, session.ErrNotModified, session.ErrWriteConflict, session.ErrInvalidRequest, session.ErrClosed} {
		if !strings.HasPrefix(err.Error(), "session: ") {
			t.Errorf("sentinel %q lacks the package prefix", err)
		}
	}
}
