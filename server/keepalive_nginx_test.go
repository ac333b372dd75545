package server_test

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/servertest"
)

// TestStreamKeepAliveThroughNginx: behind a real reverse proxy (nginx)
// that drops a connection idle for a second (proxy_read_timeout), a
// streamed turn whose model thinks for longer gets its whole answer
// with the keep-alive on, and the proxy's 504 with it off, which is
// what a client behind nginx, a cloud load balancer or a CDN (idle
// timeouts of 60 to 100 s) got from a model thinking that long.
func TestStreamKeepAliveThroughNginx(t *testing.T) {
	bin := servertest.Nginx(t)
	for _, tc := range []struct {
		name      string
		keepAlive time.Duration
		want      int
	}{
		{"on", 200 * time.Millisecond, 200},
		{"off", -1, 504},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := keepAliveServer(t, thinkingModel(2500*time.Millisecond), tc.keepAlive)
			proxy := startNginx(t, bin, ts.Listener.Addr().String(), "1s")
			for _, sf := range []struct{ path, body, end string }{
				{"/v1/chat/completions", `{"model":"demo","stream":true,"messages":[{"role":"user","content":"think"}]}`, "data: [DONE]"},
				{"/v1/responses", `{"model":"demo","stream":true,"input":"think"}`, `"type":"response.completed"`},
			} {
				resp, err := ts.Client().Do(authedPost(proxy, sf.path, sf.body, nil))
				if err != nil {
					t.Fatal(err)
				}
				raw, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != tc.want {
					t.Fatalf("%s through nginx: %d %v\n%s", sf.path, resp.StatusCode, err, raw)
				}
				if tc.want == 200 && (!strings.Contains(string(raw), sf.end) || !strings.Contains(string(raw), ": keep-alive")) {
					t.Fatalf("%s through nginx: the stream is not whole:\n%s", sf.path, raw)
				}
			}
		})
	}
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
      proxy_buffering off;
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
