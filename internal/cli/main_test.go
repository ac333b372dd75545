package cli

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

func TestRunExample(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), []string{"example", "-json"}, &out, Options{}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"completed via classify → escalate: Paging the on-call engineer now.",
		"completed via classify → auto_reply: Thanks",
		"step 0 started   classify",
		`"trail":["classified as urgent","escalated"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"example", "-bogus"}} {
		if err := run(t.Context(), args, &strings.Builder{}, Options{}); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}

// The CLI behaves like a Go tool: help in every usual spelling prints the
// command list or the command's flags and exits 0; an unknown command or
// flag exits 2 with the usage on standard error; version names the
// module and commit.
func TestCLIHelpAndExitCodes(t *testing.T) {
	bin := armatureBinary(t)
	cases := []struct {
		args     []string
		wantCode int
		stdout   string // a substring of standard output
		stderr   string // a substring of standard error
	}{
		{nil, 0, "Commands:", ""},
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{"-h"}, 0, "Commands:", ""},
		{[]string{"--help"}, 0, "Commands:", ""},
		{[]string{"serve", "--help"}, 0, "-allow-origin", ""},
		{[]string{"serve", "-h"}, 0, "-addr", ""},
		{[]string{"serve", "-h"}, 0, "power loss", ""},
		{[]string{"serve", "--durability", "fast"}, 2, "", "want full or normal"},
		{[]string{"chat", "--help"}, 0, "-server", ""},
		{[]string{"help", "serve"}, 0, "-workspace", ""},
		{[]string{"example", "-h"}, 0, "-json", ""},
		{[]string{"version"}, 0, "(module github.com/armature-go/armature", ""},
		{[]string{"nope"}, 2, "", "Commands:"},
		{[]string{"serve", "--bogus"}, 2, "", "flag provided but not defined"},
	}
	for _, c := range cases {
		t.Run(strings.Join(append([]string{"armature"}, c.args...), " "), func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.wantCode || !strings.Contains(stdout.String(), c.stdout) || !strings.Contains(stderr.String(), c.stderr) {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.wantCode, stdout.String(), stderr.String())
			}
		})
	}
}
