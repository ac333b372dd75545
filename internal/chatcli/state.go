package chatcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
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

// Save writes the whole state to path: atomically (a temporary file
// renamed over it), under the state file's lock (see [SaveServerState]),
// creating its directory; the file is readable by its owner only. It
// replaces what other clients sharing the file wrote meanwhile: a client
// saves its own server's entry with [SaveServerState].
func (s *State) Save(path string) error {
	unlock, err := lockState(path)
	if err != nil {
		return err
	}
	defer unlock()
	return s.write(path)
}

// SaveServerState sets the entry of server in the state file at path to
// ss and leaves the other entries as the file has them now, so that
// clients of several servers can share one file: under the file's lock
// (path + ".lock", created exclusively), it reads the file again and
// writes it back atomically with ss in it. A lock its holder left behind
// (a client that died holding it) is taken over once it is older than a
// few seconds; a lock held longer than that fails the save. The entries
// named replaces (other than server) are removed: the same server under
// a key it no longer goes by.
func SaveServerState(path, server string, ss ServerState, replaces ...string) error {
	unlock, err := lockState(path)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := LoadState(path)
	if err != nil {
		return err
	}
	for _, k := range replaces {
		if k != server {
			delete(st.Servers, k)
		}
	}
	st.Servers[server] = ss
	return st.write(path)
}

// Lock timing: a save holds the lock for one small read and write, so a
// lock older than staleLock was left by a client that died holding it.
const (
	lockPoll  = 10 * time.Millisecond
	staleLock = 5 * time.Second
	lockWait  = 2 * staleLock
)

// lockState takes the lock of the state file at path, creating its
// directory, and returns its release.
func lockState(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("chatcli: state file: %w", err)
	}
	lock := path + ".lock"
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			f.Close()
			return func() { os.Remove(lock) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("chatcli: state file: %w", err)
		}
		if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) > staleLock {
			os.Remove(lock) // left behind: take it over
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("chatcli: state file: %s is locked (remove it if no client is running)", lock)
		}
		time.Sleep(lockPoll)
	}
}

// write writes the state to path atomically: a temporary file in its
// directory, renamed over it. The caller holds the lock.
func (s *State) write(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
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
