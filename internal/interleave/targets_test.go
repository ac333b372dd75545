package interleave

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/internal/syncbuf"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// target is what a sequence runs against.
type target interface {
	send(ctx context.Context, sess, id, content string) response
	signal(ctx context.Context, sess, sig string, payload map[string]any) response
	del(ctx context.Context, sess string) response
	cancel(ctx context.Context, sess, inv string) response
	// history reads the session's stored history (exists false: none).
	history(ctx context.Context, sess string) ([]llm.Message, bool, error)
	// runs lists the session's run records; ok false where the target
	// keeps none.
	runs(ctx context.Context, sess string) (runs []runtime.Run, ok bool, err error)
	// restart stops the process gracefully and starts it again on the
	// same data.
	restart(t *testing.T)
	// kill ends the process with SIGKILL and starts it again; false
	// where the target is not a process.
	kill(t *testing.T) bool
}

// ---- the library ----------------------------------------------------

// libTarget is the chat harness in this process on an SQLite file.
type libTarget struct {
	path  string
	store *sqlite.Store
	h     *chat.Harness
}

func newLibTarget(t *testing.T) *libTarget {
	l := &libTarget{path: filepath.Join(t.TempDir(), "armature.db")}
	l.open(t)
	t.Cleanup(func() { l.store.Close(context.Background()) })
	return l
}

func (l *libTarget) open(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	store, err := sqlite.Open(ctx, sqlite.Config{Path: l.path})
	if err != nil {
		t.Fatal(err)
	}
	a, err := demo.New()
	if err != nil {
		t.Fatal(err)
	}
	l.store, l.h = store, servertest.Harness(t, store, a)
}

func (l *libTarget) restart(t *testing.T) {
	t.Helper()
	if err := l.store.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	l.open(t)
}

func (l *libTarget) kill(*testing.T) bool { return false }

// libResponse maps a chat outcome to the HTTP answer the server gives it.
func libResponse(out chat.Outcome) response {
	t := out.Info()
	r := response{status: 200, invocation: t.InvocationID, superseded: t.Superseded, replayed: t.Replayed}
	switch o := out.(type) {
	case *chat.Completed:
		r.kind = "completed"
	case *chat.Suspended:
		r.kind, r.signal = "suspended", o.Descriptor.SignalID
	case *chat.Errored:
		r.kind, r.category = "errored", string(o.Category)
		switch o.Category {
		case errcat.HarnessSignalCorrelationFailed:
			r.status = 404
		case errcat.SuspensionResumePayloadInvalid:
			r.status = 400
		}
	}
	return r
}

func (l *libTarget) send(ctx context.Context, sess, id, content string) response {
	out, _ := l.h.Send(ctx, sess, llm.UserText(content), chat.WithMessageID(id))
	return libResponse(out)
}

func (l *libTarget) signal(ctx context.Context, sess, sig string, payload map[string]any) response {
	out, _ := l.h.Signal(ctx, chat.Signal{SignalID: sig, SessionID: sess, Payload: payload})
	r := libResponse(out)
	if r.status == 404 {
		// As the server tells a decision that took effect from one that
		// never will (its notAwaited): 409.
		if call, ok := strings.CutPrefix(sig, agent.SignalPrefix); ok {
			if done, err := l.h.DecisionTookEffect(ctx, sess, sig, call, ""); err == nil && done {
				r.status = 409
			}
		}
	}
	return r
}

func (l *libTarget) del(ctx context.Context, sess string) response {
	err := l.h.Delete(ctx, sess)
	switch {
	case err == nil:
		return response{status: 204}
	case errors.Is(err, session.ErrNotFound):
		return response{status: 404}
	}
	return response{status: 500, category: err.Error()}
}

func (l *libTarget) cancel(ctx context.Context, sess, inv string) response {
	err := l.h.CancelSuspended(ctx, sess, inv)
	return response{status: 202, cancelled: err == nil}
}

func (l *libTarget) history(ctx context.Context, sess string) ([]llm.Message, bool, error) {
	rec, err := l.store.Load(ctx, session.LoadRequest{SessionID: sess})
	if errors.Is(err, session.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var hist []llm.Message
	if raw, ok := rec.State[chat.MessagesField]; ok {
		if err := json.Unmarshal(raw, &hist); err != nil {
			return nil, true, err
		}
	}
	return hist, true, nil
}

func (l *libTarget) runs(context.Context, string) ([]runtime.Run, bool, error) {
	return nil, false, nil
}

// ---- armature serve over HTTP ----------------------------------------

// httpTarget is the armature serve binary, talked to over HTTP.
type httpTarget struct {
	bin, data string
	cmd       *exec.Cmd
	exited    chan struct{}
	base      string
	client    *http.Client
	logs      *syncbuf.Buffer
}

func newHTTPTarget(t *testing.T, bin string) *httpTarget {
	h := &httpTarget{bin: bin, data: t.TempDir(), client: &http.Client{Timeout: 30 * time.Second}, logs: &syncbuf.Buffer{}}
	h.start(t)
	t.Cleanup(func() {
		if h.cmd != nil {
			h.cmd.Process.Kill()
			<-h.exited
		}
		if t.Failed() {
			t.Logf("server log (last 4 KiB):\n%s", tail(h.logs.String(), 4096))
		}
	})
	return h
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

var servingLine = regexp.MustCompile(`serving on (http://\S+)`)

// start runs armature serve on a free loopback port and waits until it
// serves.
func (h *httpTarget) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(h.bin, "serve", "--addr", "127.0.0.1:0", "--data", h.data, "--grace", "5s", "--log", "json")
	cmd.Stderr = h.logs
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.cmd, h.exited = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(h.exited) }()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case h.base = <-found:
	case <-h.exited:
		t.Fatalf("armature serve exited at start:\n%s", h.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("armature serve did not start:\n%s", h.logs.String())
	}
}

func (h *httpTarget) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := h.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("armature serve did not exit on %v", sig)
	}
	h.cmd = nil
}

func (h *httpTarget) restart(t *testing.T) {
	h.stop(t, syscall.SIGTERM)
	h.start(t)
}

func (h *httpTarget) kill(t *testing.T) bool {
	h.stop(t, syscall.SIGKILL)
	h.start(t)
	return true
}

// do sends a request; status 0 means no answer came.
func (h *httpTarget) do(ctx context.Context, method, path string, body any, out any) int {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return 0
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return 0
		}
	}
	return resp.StatusCode
}

// outcomeJSON is the REST outcome.
type outcomeJSON struct {
	Outcome      string   `json:"outcome"`
	InvocationID string   `json:"invocation_id"`
	Replayed     bool     `json:"replayed"`
	Superseded   []string `json:"superseded"`
	Signal       *struct {
		SignalID string `json:"signal_id"`
	} `json:"signal"`
	Error *struct {
		Category string `json:"category"`
	} `json:"error"`
}

func (o outcomeJSON) response(status int) response {
	r := response{status: status, kind: o.Outcome, invocation: o.InvocationID, replayed: o.Replayed, superseded: o.Superseded}
	if o.Signal != nil {
		r.signal = o.Signal.SignalID
	}
	if o.Error != nil {
		r.category = o.Error.Category
	}
	return r
}

func sessPath(sess string) string { return "/v1/sessions/" + url.PathEscape(sess) }

func (h *httpTarget) send(ctx context.Context, sess, id, content string) response {
	var o outcomeJSON
	st := h.do(ctx, "POST", sessPath(sess)+"/messages", map[string]string{"content": content, "message_id": id}, &o)
	return o.response(st)
}

func (h *httpTarget) signal(ctx context.Context, sess, sig string, payload map[string]any) response {
	var o outcomeJSON
	st := h.do(ctx, "POST", sessPath(sess)+"/signals", map[string]any{"signal_id": sig, "payload": payload}, &o)
	return o.response(st)
}

func (h *httpTarget) del(ctx context.Context, sess string) response {
	return response{status: h.do(ctx, "DELETE", sessPath(sess), nil, nil)}
}

func (h *httpTarget) cancel(ctx context.Context, sess, inv string) response {
	runs, _, err := h.runs(ctx, sess)
	if err != nil {
		return response{}
	}
	for _, r := range runs {
		if r.InvocationID == inv && r.Status == runtime.StatusSuspended {
			var out struct {
				Cancelled bool `json:"cancelled"`
			}
			st := h.do(ctx, "POST", "/v1/runs/"+url.PathEscape(r.ID)+"/cancel", nil, &out)
			return response{status: st, cancelled: out.Cancelled}
		}
	}
	return response{status: 202}
}

func (h *httpTarget) history(ctx context.Context, sess string) ([]llm.Message, bool, error) {
	var s struct {
		Messages []llm.Message `json:"messages"`
	}
	switch st := h.do(ctx, "GET", sessPath(sess), nil, &s); st {
	case 200:
		return s.Messages, true, nil
	case 404:
		return nil, false, nil
	default:
		return nil, false, fmt.Errorf("GET %s: %d", sessPath(sess), st)
	}
}

func (h *httpTarget) runs(ctx context.Context, sess string) ([]runtime.Run, bool, error) {
	var all []runtime.Run
	page := ""
	for {
		var resp struct {
			Runs []runtime.Run `json:"runs"`
			Next string        `json:"next_page_token"`
		}
		path := sessPath(sess) + "/runs"
		if page != "" {
			path += "?page_token=" + url.QueryEscape(page)
		}
		if st := h.do(ctx, "GET", path, nil, &resp); st != 200 {
			return nil, true, fmt.Errorf("GET %s: %d", path, st)
		}
		all = append(all, resp.Runs...)
		if resp.Next == "" {
			return all, true, nil
		}
		page = resp.Next
	}
}

// buildArmature builds the armature command into dir.
func buildArmature(dir string) (string, error) {
	bin := filepath.Join(dir, "armature")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/armature-go/armature/cmd/armature")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
}
