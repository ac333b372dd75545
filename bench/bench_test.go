package bench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/armature-go/armature/bench"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

var histories = []int{10, 1000, 10000}

func BenchmarkW1Memory(b *testing.B) {
	for _, h := range histories {
		b.Run(fmt.Sprintf("history=%d", h), func(b *testing.B) {
			bench.W1(b, session.NewMemoryStore(session.MemoryConfig{}), h)
		})
	}
}

func BenchmarkW1SQLite(b *testing.B) {
	for _, h := range histories {
		b.Run(fmt.Sprintf("history=%d", h), func(b *testing.B) {
			bench.W1(b, openSQLite(b), h)
		})
	}
}

func BenchmarkSuspendResumeMemory(b *testing.B) {
	bench.SuspendResume(b)
}

func openSQLite(tb testing.TB) *sqlite.Store {
	tb.Helper()
	s, err := sqlite.Open(context.Background(), sqlite.Config{Path: filepath.Join(tb.TempDir(), "bench.db")})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}
