//go:build linux

package cli

import (
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// terminal is an armature chat process on a pseudo-terminal.
type terminal struct {
	t    *testing.T
	cmd  *exec.Cmd
	pty  *os.File
	mu   sync.Mutex
	seen strings.Builder
	mark int
	done chan error
	// ended closes when the process has been waited for.
	ended chan struct{}
}

// startChatTerminal runs armature chat with args on a new pseudo-terminal.
func startChatTerminal(t *testing.T, args ...string) *terminal {
	t.Helper()
	ctl, tty, err := openPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	term := &terminal{t: t, pty: ctl, done: make(chan error, 1), ended: make(chan struct{})}
	term.cmd = exec.Command(armatureBinary(t), append([]string{"chat"}, args...)...)
	term.cmd.Env = append(os.Environ(), "ARMATURE_SERVER=", "ARMATURE_TOKEN=")
	term.cmd.Stdin, term.cmd.Stdout, term.cmd.Stderr = tty, tty, tty
	term.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := term.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := ctl.Read(buf)
			term.mu.Lock()
			term.seen.WriteString(strings.ReplaceAll(string(buf[:n]), "\r", ""))
			term.mu.Unlock()
			if err != nil {
				return // EIO once the process and its terminal are gone
			}
		}
	}()
	go func() {
		defer close(term.ended)
		term.done <- term.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case <-term.ended:
		default:
			_ = term.cmd.Process.Kill()
			<-term.ended
		}
		ctl.Close()
		wg.Wait()
	})
	return term
}

func (term *terminal) screen() string {
	term.mu.Lock()
	defer term.mu.Unlock()
	return term.seen.String()
}

// waitFor waits until the screen, from the mark on, shows want, and
// moves the mark past it; it returns what it read up to want's end.
func (term *terminal) waitFor(want string) string {
	term.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		all := term.screen()
		if i := strings.Index(all[term.mark:], want); i >= 0 {
			got := all[term.mark : term.mark+i+len(want)]
			term.mark += i + len(want)
			return got
		}
		if time.Now().After(deadline) {
			term.t.Fatalf("terminal lacks %q after:\n%s", want, all[term.mark:])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// typeLine types line and Enter.
func (term *terminal) typeLine(line string) {
	term.t.Helper()
	if _, err := term.pty.WriteString(line + "\r"); err != nil {
		term.t.Fatal(err)
	}
}

// exited waits for the process to end successfully.
func (term *terminal) exited() {
	term.t.Helper()
	select {
	case err := <-term.done:
		var ee *exec.ExitError
		if errors.As(err, &ee) || err != nil {
			term.t.Fatalf("armature chat: %v\n%s", err, term.screen())
		}
	case <-time.After(15 * time.Second):
		term.t.Fatalf("armature chat did not exit\n%s", term.screen())
	}
}

// TestChatTerminal drives the real armature chat through a
// pseudo-terminal against a real armature serve: a streamed reply, an
// approval answered inline and its resumed reply, /new, /switch back,
// /history, /quit, and a restart that continues the last session.
func TestChatTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	state := filepath.Join(t.TempDir(), "chat.json")

	term := startChatTerminal(t, "--server", srv.base, "--state", state)
	first := strings.Fields(term.waitFor(" on " + srv.base))[4]
	term.waitFor("you> ")
	term.typeLine("hello there")
	got := term.waitFor("or for a refund.\n")
	if !strings.Contains(got, "hello there\nagent> You said: \"hello there\"") {
		t.Errorf("first turn:\n%s", got)
	}

	term.waitFor("you> ")
	term.typeLine("refund order 7")
	got = term.waitFor("[y/N/comment] ")
	if !strings.Contains(got, `Approve issue_refund {"amount":30,"order":"7"}? [y/N/comment] `) {
		t.Fatalf("approval prompt:\n%s", got)
	}
	term.typeLine("y")
	got = term.waitFor("agent> Here is what I found: refunded $30.00 for order 7\n")
	for _, want := range []string{"  approved\n", `  · calling issue_refund {"amount":30,"order":"7"}`,
		"  · issue_refund returned: refunded $30.00 for order 7\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("resumed turn lacks %q:\n%s", want, got)
		}
	}

	term.waitFor("you> ")
	term.typeLine("/new")
	second := strings.TrimSpace(strings.TrimPrefix(term.waitFor("\nyou> "), "/new\nnew session "))
	second = strings.TrimSuffix(second, "\nyou>")
	if second == "" || second == first || strings.ContainsAny(second, " \n") {
		t.Fatalf("/new: %q (first %q)\n%s", second, first, term.screen())
	}
	term.typeLine("/switch " + first)
	term.waitFor("switched to session " + first)
	term.waitFor("you> ")
	term.typeLine("/history")
	got = term.waitFor("refunded $30.00 for order 7\nyou> ")
	for _, want := range []string{"you> hello there\n", "you> refund order 7\n", "agent> I need your approval to call issue_refund"} {
		if !strings.Contains(got, want) {
			t.Errorf("/history lacks %q:\n%s", want, got)
		}
	}
	term.typeLine("/quit")
	term.exited()

	// A restarted client continues the last session; Ctrl-D leaves.
	term = startChatTerminal(t, "--server", srv.base, "--state", state)
	term.waitFor("continuing session " + first + " on ")
	term.waitFor("you> ")
	term.typeLine("where is order 5?")
	got = term.waitFor("agent> Here is what I found: order 5: shipped, arriving Thursday\n")
	if !strings.Contains(got, "  · lookup_order returned: order 5: shipped") {
		t.Errorf("tool turn after restart:\n%s", got)
	}
	term.waitFor("you> ")
	if _, err := term.pty.Write([]byte{4}); err != nil { // Ctrl-D
		t.Fatal(err)
	}
	term.exited()
}

// TestChatTerminalCtrlCCancelsACommand: Ctrl-C typed while /sessions
// waits for a server that does not answer cancels the listing and
// returns to the prompt, where the client goes on; Ctrl-C at the prompt
// then ends it. Before, the interrupt was left pending and the next
// prompt took it for a quit.
func TestChatTerminalCtrlCCancelsACommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	srv := startServer(t, t.TempDir())
	upstream, err := url.Parse(srv.base)
	if err != nil {
		t.Fatal(err)
	}
	// A proxy whose sessions listing hangs until the client gives up on
	// it (or, for a client that never does, answers after a while).
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	held, cancelled := make(chan struct{}, 1), make(chan bool, 1)
	base := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.URL.Path == "/v1/sessions" {
			held <- struct{}{}
			select {
			case <-r.Context().Done():
				cancelled <- true
				return
			case <-time.After(3 * time.Second):
				cancelled <- false
			}
		}
		proxy.ServeHTTP(w, r)
	})

	term := startChatTerminal(t, "--server", base, "--state", filepath.Join(t.TempDir(), "chat.json"))
	term.waitFor("you> ")
	term.typeLine("/sessions")
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatalf("the sessions were not listed\n%s", term.screen())
	}
	if _, err := term.pty.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	term.waitFor("(cancelled)\n")
	term.waitFor("you> ")
	if !<-cancelled {
		t.Error("the listing's request was not cancelled")
	}
	term.typeLine("still here")
	term.waitFor(`agent> You said: "still here"`)
	term.waitFor("you> ")
	if _, err := term.pty.Write([]byte{3}); err != nil { // Ctrl-C at the prompt
		t.Fatal(err)
	}
	term.exited()
}
