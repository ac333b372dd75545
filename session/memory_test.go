package session_test

import (
	"testing"

	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/session/sessiontest"
)

func TestMemoryStore(t *testing.T) {
	sessiontest.Run(t, func(t *testing.T) session.Store {
		return session.NewMemoryStore(session.MemoryConfig{})
	})
}
