package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/servertest"
)

// TestStreamKeepAliveThroughNginx: behind a real reverse proxy (nginx,
// with its defaults but for a proxy_read_timeout of a second: it drops
// an upstream connection idle that long), a streamed turn whose model
// thinks for longer gets its whole answer with the keep-alive on, its
// keep-alive lines reaching the client through the proxy while the
// model still thinks, and the proxy's 504 with it off: what a client
// behind nginx, a cloud load balancer or a CDN (idle timeouts of 60 to
// 100 s) got from a model thinking that long.
func TestStreamKeepAliveThroughNginx(t *testing.T) {
	bin := servertest.Nginx(t)
	surfaces := []struct{ path, body, end string }{
		{"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"think"}]}`, "data: [DONE]"},
		{"/v1/responses", `{"model":"demo","stream":true,"input":"think"}`, `"type":"response.completed"`},
	}
	t.Run("on", func(t *testing.T) {
		// The model thinks until released, or for 20 s at most: keep-alive
		// lines that a proxy held back would reach the client only once
		// the model had answered.
		m := thinkingModel(20 * time.Second)
		ts := keepAliveServer(t, m, 200*time.Millisecond)
		proxy := startNginx(t, bin, ts.Listener.Addr().String(), "1s")
		for _, sf := range surfaces {
			m.answered.Store(false)
			resp, err := ts.Client().Do(authedPost(proxy, sf.path, sf.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				raw, _ := io.ReadAll(resp.Body)
				t.Fatalf("%s through nginx: %d\n%s", sf.path, resp.StatusCode, raw)
			}
			// The model thinks until the client has read keep-alive
			// lines past the proxy's timeout (5 × 200 ms > 1 s).
			lines := &sseLines{sc: bufio.NewScanner(resp.Body)}
			for range 5 {
				lines.until(t, func(l string) bool { return l == ": keep-alive" })
			}
			if m.answered.Load() {
				t.Fatalf("%s through nginx: the keep-alive lines reached the client only once the model had answered: the proxy held them back", sf.path)
			}
			m.release <- struct{}{}
			if all := lines.rest(); !strings.Contains(all, sf.end) || !strings.Contains(all, "done thinking") {
				t.Fatalf("%s through nginx: the stream is not whole:\n%s", sf.path, all)
			}
			resp.Body.Close()
		}
	})
	t.Run("off", func(t *testing.T) {
		ts := keepAliveServer(t, thinkingModel(2500*time.Millisecond), -1)
		proxy := startNginx(t, bin, ts.Listener.Addr().String(), "1s")
		for _, sf := range surfaces {
			resp, err := ts.Client().Do(authedPost(proxy, sf.path, sf.body, nil))
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusGatewayTimeout {
				t.Fatalf("%s through nginx without the keep-alive: %d, want the proxy's 504\n%s", sf.path, resp.StatusCode, raw)
			}
		}
	})
}

// startNginx runs nginx in front of upstream (host:port), with the given
// proxy_read_timeout, and returns its base URL; it stops with the test.
func startNginx(t *testing.T, bin, upstream, readTimeout string) string {
	t.Helper()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// One process (no master and workers), so that stopping it leaves
	// nothing behind.
	conf := fmt.Sprintf(`master_process off;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  server {
    listen %[2]s;
    location / {
      proxy_pass http://%[3]s;
      proxy_http_version 1.1;
      proxy_read_timeout %[4]s;
    }
  }
}
`, dir, addr, upstream, readTimeout)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return "http://" + addr
		}
		if time.Now().After(deadline) {
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not start: %v\n%s\n%s", err, stderr.String(), logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
