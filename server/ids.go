package server

import "github.com/armature-go/armature/internal/uuid"

// newSessionID mints a session id for a client that asked for none.
func newSessionID() string { return uuid.New() }
