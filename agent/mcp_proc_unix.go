//go:build unix

package agent

import (
	"context"
	"errors"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpTerminateDuration is how long a stdio server is given to exit when
// its transport's TerminateDuration is not set: the SDK's default.
const mcpTerminateDuration = 5 * time.Second

// mcpGroupPoll is how often Close looks whether a stdio server's process
// group is gone.
const mcpGroupPoll = 10 * time.Millisecond

// groupCommand returns a transport that starts ct's command in a
// process group of its own (see ownGroup) and whose connection's Close
// ends the whole group, not only the command's own process: a server
// started through a launcher (npx, uvx, sh -c, npm exec) runs as the
// launcher's child, which the SDK's Close never signals, and would live
// on, reparented to init.
func groupCommand(ct *mcp.CommandTransport) mcp.Transport {
	return &groupTransport{ct: ct}
}

// groupTransport is an mcp.CommandTransport whose command leads a
// process group of its own.
type groupTransport struct{ ct *mcp.CommandTransport }

// Connect starts the command in a group of its own, as ct.Connect does.
func (g *groupTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	cmd := g.ct.Command
	own := ownGroup(cmd)
	conn, err := g.ct.Connect(ctx)
	if err != nil || !own || cmd.Process == nil {
		return conn, err
	}
	grace := g.ct.TerminateDuration
	if grace <= 0 {
		grace = mcpTerminateDuration
	}
	return &groupConn{Connection: conn, pgid: cmd.Process.Pid, grace: grace}, nil
}

// ownGroup makes cmd start in a new process group, which its process
// leads (setpgid(0, 0)), and reports whether it does, so that the group
// can be signalled whole. A SysProcAttr the caller set is kept, copied
// before it is changed (the caller's struct is never written): one that
// already gives the process a group of its own (Setpgid or Foreground
// with Pgid 0, or Setsid: a new session leads a new group) is left as
// it is; one that joins another group (a Pgid other than 0) is left as
// it is too, and that group is never signalled (it is not the server's
// alone): Close then ends only the command's own process, as the SDK
// does; any other has Setpgid set.
func ownGroup(cmd *exec.Cmd) bool {
	a := cmd.SysProcAttr
	switch {
	case a == nil:
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return true
	case a.Setsid:
		return true
	case a.Pgid != 0:
		return false
	case a.Setpgid || a.Foreground:
		return true
	}
	c := *a
	c.Setpgid = true
	cmd.SysProcAttr = &c
	return true
}

// groupConn is the connection to a stdio server whose command leads the
// process group pgid.
type groupConn struct {
	mcp.Connection
	pgid  int
	grace time.Duration

	once sync.Once
	err  error
}

// Close closes the connection and ends the server's process group: the
// SDK closes the server's stdin and waits for its command's process
// (signalling it SIGTERM, then SIGKILL, grace apart, if it does not
// exit); the group is given grace from the start to be gone too, then
// signalled SIGTERM, then, grace later, SIGKILL. Close may be called
// again, and concurrently: the first call does the work, the others
// wait for it and return its error.
func (c *groupConn) Close() error {
	c.once.Do(func() { c.err = c.close() })
	return c.err
}

func (c *groupConn) close() error {
	done := make(chan error, 1)
	go func() { done <- c.Connection.Close() }()
	var err error
	waited := false
	// wait waits up to d for the group to be gone, reading the SDK's
	// close when it ends.
	wait := func(d time.Duration) bool {
		timer := time.NewTimer(d)
		defer timer.Stop()
		tick := time.NewTicker(mcpGroupPoll)
		defer tick.Stop()
		for {
			if !waited {
				select {
				case err = <-done:
					waited = true
				default:
				}
			}
			if !groupAlive(c.pgid) {
				return true
			}
			select {
			case <-timer.C:
				return false
			case <-tick.C:
			}
		}
	}
	if !wait(c.grace) {
		_ = syscall.Kill(-c.pgid, syscall.SIGTERM)
		if !wait(c.grace) {
			_ = syscall.Kill(-c.pgid, syscall.SIGKILL)
			wait(c.grace)
		}
	}
	if !waited {
		err = <-done
	}
	return err
}

// groupAlive reports whether a process of the group pgid may still run:
// false once no process is left in it (ESRCH), or when this process may
// signal none of those left (EPERM: there is nothing more it can do).
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || !(errors.Is(err, syscall.ESRCH) || errors.Is(err, syscall.EPERM))
}
