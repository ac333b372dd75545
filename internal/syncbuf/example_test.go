package syncbuf_test

import (
	"fmt"
	"log/slog"

	"github.com/armature-go/armature/internal/syncbuf"
)

// A logger writing to a Buffer from the goroutines of a test's server,
// read while they run.
func Example() {
	var out syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	done := make(chan struct{})
	go func() { log.Info("served"); close(done) }()
	<-done
	fmt.Print(out.String())
	// Output: level=INFO msg=served
}
