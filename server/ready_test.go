package server_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/server"
)

// /readyz answers 503 while Config.Ready fails (a database that does not
// answer), without saying why to the caller, and 200 again once it
// answers. Not ready is an answer, not a failed request: it is logged as
// a warning once per probe, never as an error (before, each probe also
// logged "server: request failed" at level ERROR, as did every probe of
// a draining server).
func TestReadyProbe(t *testing.T) {
	var down atomic.Bool
	var logs syncbuf.Buffer
	ts := servertest.NewDemo(t, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Ready = func(ctx context.Context) error {
			if down.Load() {
				return errors.New("dial tcp 10.0.0.5:5432: connect: connection refused (password=s3cret)")
			}
			return nil
		}
	})
	for _, tc := range []struct {
		name string
		down bool
		want int
	}{{"up", false, 200}, {"down", true, 503}, {"up again", false, 200}} {
		t.Run(tc.name, func(t *testing.T) {
			down.Store(tc.down)
			resp, err := http.Get(ts.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var b strings.Builder
			buf := make([]byte, 512)
			n, _ := resp.Body.Read(buf)
			b.Write(buf[:n])
			if resp.StatusCode != tc.want || strings.Contains(b.String(), "s3cret") || strings.Contains(b.String(), "10.0.0.5") {
				t.Errorf("%d %s", resp.StatusCode, b.String())
			}
		})
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a probe logged an error:\n%s", logs.String())
	}
}
