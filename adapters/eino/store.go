package eino

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/cloudwego/eino/adk"
)

// CheckPointStore is Eino's checkpoint store contract, with the optional
// deletion Eino detects (adk.CheckPointDeleter): the adapter deletes a
// checkpoint once its run is resumed.
type CheckPointStore = adk.CheckPointStore

// MemoryStore is an in-memory Eino checkpoint store. It is safe for
// concurrent use.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

var (
	_ adk.CheckPointStore   = (*MemoryStore)(nil)
	_ adk.CheckPointDeleter = (*MemoryStore)(nil)
	_ adk.CheckPointStore   = (*FileStore)(nil)
	_ adk.CheckPointDeleter = (*FileStore)(nil)
)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string][]byte{}} }

// Get implements adk.CheckPointStore.
func (s *MemoryStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.m[id]
	return b, ok, nil
}

// Set implements adk.CheckPointStore.
func (s *MemoryStore) Set(_ context.Context, id string, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[id] = append([]byte(nil), b...)
	return nil
}

// Delete implements adk.CheckPointDeleter.
func (s *MemoryStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

// Len returns the number of checkpoints held.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// FileStore is a durable Eino checkpoint store: one file per checkpoint
// in Dir (named by the hex of its id), written to a temporary file,
// synced and renamed into place, so a checkpoint is either whole or
// absent after a crash. It is safe for concurrent use, by several
// processes too (the last Set of an id wins).
type FileStore struct {
	// Dir is the directory; NewFileStore creates it.
	Dir string
}

// NewFileStore returns a store in dir, creating the directory.
func NewFileStore(dir string) (*FileStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("eino: checkpoint directory: %w", err)
	}
	return &FileStore{Dir: dir}, nil
}

func (s *FileStore) path(id string) string {
	return filepath.Join(s.Dir, hex.EncodeToString([]byte(id))+".ckpt")
}

// Get implements adk.CheckPointStore.
func (s *FileStore) Get(_ context.Context, id string) ([]byte, bool, error) {
	b, err := os.ReadFile(s.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("eino: read checkpoint %q: %w", id, err)
	}
	return b, true, nil
}

// Set implements adk.CheckPointStore.
func (s *FileStore) Set(_ context.Context, id string, b []byte) error {
	f, err := os.CreateTemp(s.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("eino: write checkpoint %q: %w", id, err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.path(id))
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("eino: write checkpoint %q: %w", id, err)
	}
	if d, err := os.Open(s.Dir); err == nil {
		_ = d.Sync() // the rename's directory entry
		_ = d.Close()
	}
	return nil
}

// Delete implements adk.CheckPointDeleter.
func (s *FileStore) Delete(_ context.Context, id string) error {
	if err := os.Remove(s.path(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("eino: delete checkpoint %q: %w", id, err)
	}
	return nil
}
