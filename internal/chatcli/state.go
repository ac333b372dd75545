package chatcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// State is what the client remembers between runs, per server: the
// session it was in and how far it read that session's event stream.
// History itself lives on the server.
type State struct {
	Servers map[string]ServerState `json:"servers"`
}

// ServerState is the state kept for one server.
type ServerState struct {
	// Session is the last session used.
	Session string `json:"session"`
	// LastEventID is the last event of Session's stream the client read.
	LastEventID int64 `json:"last_event_id,omitempty"`
	// Pending is the signal a suspended turn of Session awaited, as of
	// LastEventID, and PendingRun the run that suspended.
	Pending    *Signal `json:"pending,omitempty"`
	PendingRun string  `json:"pending_run,omitempty"`
}

// DefaultStatePath returns the default state file,
// os.UserConfigDir()/armature/chat.json.
func DefaultStatePath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("chatcli: state file: %w", err)
	}
	return filepath.Join(dir, "armature", "chat.json"), nil
}

// LoadState reads the state file at path; a missing file is an empty
// state.
func LoadState(path string) (*State, error) {
	st := &State{Servers: map[string]ServerState{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("chatcli: state file: %w", err)
	}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("chatcli: state file %s: %w", path, err)
	}
	if st.Servers == nil {
		st.Servers = map[string]ServerState{}
	}
	return st, nil
}

// Save writes the state to path atomically (a temporary file renamed
// over it), creating its directory; the file is readable by its owner
// only.
func (s *State) Save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".chat-*.json")
	if err != nil {
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("chatcli: state file: %w", err)
	}
	return nil
}
