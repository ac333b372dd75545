package cli

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armature-go/armature/internal/chatcli"
)

// TestChatErrorIsPrintable: the error armature chat ends with, which
// Main prints on standard error (not through the client's output), shows
// a server's text as one line of text: its escape sequences (a window
// title, a screen clear, an OSC 52 clipboard write, a hyperlink), C1
// controls, bidi overrides and line breaks are escapes, and the error is
// still the server's answer to errors.Is and errors.As. Before, they
// reached the terminal as armature chat exited.
func TestChatErrorIsPrintable(t *testing.T) {
	const evil = "bad token\x1b]0;title\x07\x1b[2J\x1b]52;c;cm0gLXJmIH4K\x07\x1b]8;;http://evil\x1b\\link\u009b2J\u202eabc\rAmount: 1\narmature: all good"
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "unauthorized", "message": evil}})
	}))
	t.Cleanup(ts.Close)
	args := []string{"--server", ts.URL, "--state", filepath.Join(t.TempDir(), "chat.json"), "--session", "s1"}

	err := runChat(t.Context(), args, strings.NewReader(""), &strings.Builder{}, &strings.Builder{})
	var ae *chatcli.APIError
	if !errors.Is(err, chatcli.ErrUnauthorized) || !errors.As(err, &ae) || ae.Message != evil {
		t.Fatalf("runChat: %v (%#v)", err, ae)
	}
	checkPrintable(t, err.Error())

	if testing.Short() {
		return
	}
	cmd := exec.Command(armatureBinary(t), append([]string{"chat"}, args...)...)
	cmd.Stdin = strings.NewReader("")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("armature chat succeeded against a server that refuses it")
	}
	if !strings.HasPrefix(stderr.String(), "armature: chatcli: server answered 401 unauthorized: bad token") {
		t.Errorf("standard error: %q", stderr.String())
	}
	checkPrintable(t, strings.TrimSuffix(stderr.String(), "\n"))
}

// checkPrintable fails unless s is one line without control characters.
func checkPrintable(t *testing.T, s string) {
	t.Helper()
	if strings.ContainsAny(s, "\x1b\x07\r\n\u009b\u202e") {
		t.Errorf("a terminal would be sent control characters: %q", s)
	}
}
