package eino

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cloudwego/eino/adk"
)

// CheckPointStore is Eino's checkpoint store contract, with the optional
// deletion Eino detects (adk.CheckPointDeleter): the adapter deletes a
// checkpoint once its run is resumed.
type CheckPointStore = adk.CheckPointStore

// GroupDeleter is a CheckPointStore that deletes the checkpoints of a
// group at once: those whose id, up to its last slash, is group (the
// adapter names a turn's checkpoint "tenant/session/run id", so the
// group "tenant/session" is one session's). The adapter deletes a
// deleted session's checkpoints so (Adapter.DeleteSession); the
// adapter's stores all implement it.
type GroupDeleter interface {
	CheckPointStore
	// DeleteGroup deletes the group's checkpoints; a group with none
	// is no error.
	DeleteGroup(ctx context.Context, group string) error
}

// inGroup reports whether checkpoint id belongs to group (see
// GroupDeleter).
func inGroup(id, group string) bool {
	i := strings.LastIndexByte(id, '/')
	return i >= 0 && id[:i] == group
}

// MemoryStore is an in-memory Eino checkpoint store. It is safe for
// concurrent use.
type MemoryStore struct {
	mu sync.Mutex
	m  map[string][]byte
}

var (
	_ GroupDeleter          = (*MemoryStore)(nil)
	_ adk.CheckPointDeleter = (*MemoryStore)(nil)
	_ GroupDeleter          = (*FileStore)(nil)
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

// DeleteGroup implements GroupDeleter.
func (s *MemoryStore) DeleteGroup(_ context.Context, group string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.m {
		if inGroup(id, group) {
			delete(s.m, id)
		}
	}
	return nil
}

// Len returns the number of checkpoints held.
func (s *MemoryStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

// FileStore is a durable Eino checkpoint store: one file per checkpoint
// in Dir (named by the hex of its id, or by hashes for an id too long
// for that), written to a temporary file,
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

// maxHexName bounds the length of a file name that is the hex of its
// checkpoint's id: NAME_MAX (255 bytes) with the ".ckpt" suffix.
const maxHexName = 255 - len(".ckpt")

// path is the file of checkpoint id: the hex of the id, or, for an id
// whose hex would exceed a file name's 255 bytes (a turn's id joins
// tenant and session ids of up to 128 bytes each with the run id), "g",
// the SHA-256 of the id's group (see GroupDeleter), "-" and the SHA-256
// of the id, so that DeleteGroup finds it by its group ("n" and the
// SHA-256 of the id for an id in no group). A hex name never starts with
// "g" or "n".
func (s *FileStore) path(id string) string {
	if 2*len(id) <= maxHexName {
		return filepath.Join(s.Dir, hex.EncodeToString([]byte(id))+".ckpt")
	}
	sum := sha256.Sum256([]byte(id))
	prefix := "n" // an id without a slash is in no group
	if i := strings.LastIndexByte(id, '/'); i >= 0 {
		prefix = hashedGroupPrefix(id[:i])
	}
	return filepath.Join(s.Dir, prefix+hex.EncodeToString(sum[:])+".ckpt")
}

// hashedGroupPrefix is the start of the names of the hashed files (see
// path) of group's checkpoints.
func hashedGroupPrefix(group string) string {
	sum := sha256.Sum256([]byte(group))
	return "g" + hex.EncodeToString(sum[:]) + "-"
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

// DeleteGroup implements GroupDeleter: a file's name is the hex of its
// checkpoint's id, so the group's files are among those whose name
// starts with the hex of the group and a slash, or, for a long id, it
// starts with the hash of the group (see path).
func (s *FileStore) DeleteGroup(ctx context.Context, group string) error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return fmt.Errorf("eino: delete the checkpoints of %q: %w", group, err)
	}
	prefix := hex.EncodeToString([]byte(group + "/"))
	hashed := hashedGroupPrefix(group)
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".ckpt")
		if ok && strings.HasPrefix(name, hashed) {
			if err := os.Remove(filepath.Join(s.Dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("eino: delete the checkpoints of %q: %w", group, err)
			}
			continue
		}
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		id, err := hex.DecodeString(name)
		if err != nil || !inGroup(string(id), group) {
			continue
		}
		if err := s.Delete(ctx, string(id)); err != nil {
			return err
		}
	}
	return nil
}
