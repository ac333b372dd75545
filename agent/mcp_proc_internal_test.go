//go:build unix

package agent

import (
	"os/exec"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ownGroup puts a command in a process group of its own unless its
// SysProcAttr already does, or joins another group (which is then never
// signalled), and never writes the caller's SysProcAttr.
func TestOwnGroup(t *testing.T) {
	cases := []struct {
		name string
		attr *syscall.SysProcAttr
		want *syscall.SysProcAttr
		own  bool
	}{
		{"none", nil, &syscall.SysProcAttr{Setpgid: true}, true},
		{"other fields kept", &syscall.SysProcAttr{Noctty: true}, &syscall.SysProcAttr{Noctty: true, Setpgid: true}, true},
		{"own group already", &syscall.SysProcAttr{Setpgid: true}, &syscall.SysProcAttr{Setpgid: true}, true},
		{"new session", &syscall.SysProcAttr{Setsid: true}, &syscall.SysProcAttr{Setsid: true}, true},
		{"joins a group", &syscall.SysProcAttr{Setpgid: true, Pgid: 4242}, &syscall.SysProcAttr{Setpgid: true, Pgid: 4242}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command("true")
			cmd.SysProcAttr = c.attr
			var before syscall.SysProcAttr
			if c.attr != nil {
				before = *c.attr
			}
			own := ownGroup(cmd)
			if own != c.own {
				t.Errorf("own = %v, want %v", own, c.own)
			}
			if d := cmp.Diff(c.want, cmd.SysProcAttr); d != "" {
				t.Errorf("SysProcAttr (-want +got):\n%s", d)
			}
			if c.attr != nil {
				if d := cmp.Diff(before, *c.attr); d != "" {
					t.Errorf("the caller's SysProcAttr was written (-before +after):\n%s", d)
				}
			}
		})
	}
}
