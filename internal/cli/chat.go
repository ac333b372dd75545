package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/armature-go/armature/internal/chatcli"
)

// chatConfig is armature chat's configuration: flags, with environment
// variables as defaults.
type chatConfig struct {
	server  string
	token   string
	session string
	state   string
}

func parseChat(args []string, stderr io.Writer) (chatConfig, error) {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c chatConfig
	fs.StringVar(&c.server, "server", envOr("ARMATURE_SERVER", chatcli.DefaultServer), "the server's base URL (env ARMATURE_SERVER)")
	fs.StringVar(&c.token, "token", os.Getenv("ARMATURE_TOKEN"), "bearer token (env ARMATURE_TOKEN)")
	fs.StringVar(&c.session, "session", "", "start in this session (created if it does not exist); default: the last one, else a new one")
	fs.StringVar(&c.state, "state", "", "state file remembering the last session (default: chat.json in armature's user config directory)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("chat: unexpected arguments %q", fs.Args())
	}
	return c, nil
}

// runChat runs armature chat, the terminal client, until its input ends,
// /quit, or SIGINT/SIGTERM.
func runChat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	c, err := parseChat(args, stderr)
	if err != nil {
		return err
	}
	if c.state == "" {
		if c.state, err = chatcli.DefaultStatePath(); err != nil {
			return err
		}
	}
	client, err := chatcli.NewClient(chatcli.ClientConfig{Server: c.server, Token: c.token})
	if err != nil {
		return err
	}
	// SIGTERM ends the client; Ctrl-C (SIGINT) cancels the turn or the
	// command under way, or ends the client at a prompt.
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	interrupts := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				select {
				case interrupts <- struct{}{}:
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	err = chatcli.Run(ctx, chatcli.Config{Client: client, In: stdin, Out: stdout, StatePath: c.state, Session: c.session, Interrupt: interrupts})
	if err != nil {
		return chatError{err}
	}
	return nil
}

// chatError is an error armature chat ends with, which Main prints on
// standard error, a terminal that does not go through the client's
// output: the server's text in it (an error message, a session id)
// shows as one line of text, its control sequences and line breaks as
// escapes. Before, a server's error answer could retitle the window,
// clear the screen or write the clipboard (OSC 52) as armature chat
// exited. errors.Is and errors.As see the error it wraps.
type chatError struct{ err error }

func (e chatError) Error() string { return chatcli.SafeLine(e.err.Error()) }

func (e chatError) Unwrap() error { return e.err }
