package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/store/sqlite"
)

// TestServeRefusesCorruptStore: armature serve fails at startup on a
// data directory whose armature.db is damaged, with an error saying so
// (ErrCorrupt, session_load_failed), instead of serving with /readyz
// ready and failing turns; a healthy store's readiness probe is its
// Ping.
func TestServeRefusesCorruptStore(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SDK_DISABLED", "LANGFUSE_PUBLIC_KEY", "LANGFUSE_SECRET_KEY", "ARMATURE_TOKENS", "ARMATURE_WORKSPACE"} {
		t.Setenv(k, "")
	}
	data := t.TempDir()
	c := serveConfig{data: data, durability: sqlite.DurabilityNormal}
	be, err := openBackend(t.Context(), c, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if be.ready == nil || be.ready(t.Context()) != nil {
		t.Errorf("a healthy store is not ready")
	}
	be.close()
	if be.ready(t.Context()) == nil {
		t.Errorf("a closed store is ready")
	}
	// Damage the file's header.
	path := filepath.Join(data, "armature.db")
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("garbage!", 12)), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	// Bounded: a server that starts anyway serves until the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = runServe(ctx, []string{"--data", data, "--addr", "127.0.0.1:19253"}, io.Discard, io.Discard, Options{})
	if !errors.Is(err, sqlite.ErrCorrupt) || errcat.Of(err) != errcat.SessionLoadFailed || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("runServe on a damaged store = %v, want ErrCorrupt", err)
	}
}
