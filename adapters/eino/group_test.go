package eino_test

import (
	"context"
	"slices"
	"testing"

	"github.com/armature-go/armature/adapters/eino"
)

// testDeleteGroup checks a store's DeleteGroup: only the checkpoints
// whose id, up to its last slash, is the group go; a session id with a
// slash, or one the group's is a prefix of, is another group.
func testDeleteGroup(t *testing.T, s eino.GroupDeleter) {
	t.Helper()
	ctx := context.Background()
	ids := []string{"t/s/R1", "t/s/R2", "t/s/x/R3", "t/ss/R4", "t2/s/R5", "t/s%/R6", "t/s_/R7", "t/sé/R8"}
	for _, id := range ids {
		if err := s.Set(ctx, id, []byte(id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"t/s", "t/sé", "nobody/none"} {
		if err := s.DeleteGroup(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	var left []string
	for _, id := range ids {
		if _, ok, err := s.Get(ctx, id); err != nil {
			t.Fatal(err)
		} else if ok {
			left = append(left, id)
		}
	}
	if want := []string{"t/s/x/R3", "t/ss/R4", "t2/s/R5", "t/s%/R6", "t/s_/R7"}; !slices.Equal(left, want) {
		t.Fatalf("left after deleting the groups t/s and t/sé: %v, want %v", left, want)
	}
}

func TestDeleteGroup(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testDeleteGroup(t, eino.NewMemoryStore()) })
	t.Run("file", func(t *testing.T) {
		fs, err := eino.NewFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		testDeleteGroup(t, fs)
	})
	t.Run("postgres", func(t *testing.T) {
		url, table := postgresTable(t)
		s, err := eino.NewPostgresStore(context.Background(), url, table)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		testDeleteGroup(t, s)
	})
}
