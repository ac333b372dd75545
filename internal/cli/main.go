// Package cli is the armature command-line tool: cmd/armature is
//
//	func main() { os.Exit(cli.Main(os.Args[1:], cli.Options{})) }
//
// and a program that serves agents of other backends registers their
// adapter factories, keyed by adapter name, so that armature serve builds
// the workspace agents that name them (backend: adk, backend: eino; see
// the adapters/ modules):
//
//	func main() {
//		os.Exit(cli.Main(os.Args[1:], cli.Options{Adapters: map[string]adapter.Factory{adk.Name: adk.Factory}}))
//	}
//
// Commands:
//
//	armature serve [flags]     run the HTTP server (see armature serve -h)
//	armature chat [flags]      chat with a server's agent in the terminal (see armature chat -h)
//	armature example [-json]   run a small example graph and trace its events
//	armature version           print the version, module version and VCS commit
//	armature help              print the command list (also armature, -h, --help)
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/graph"
)

// version is the Armature release; overridden at link time with
// -ldflags "-X github.com/armature-go/armature/internal/cli.version=...".
var version = "0.1.0-dev"

// Options extend the command.
type Options struct {
	// Adapters are backend adapter factories by adapter name, beside the
	// native one (adapter.Native, which they must not name): armature
	// serve builds a workspace agent whose backend names one with it.
	Adapters map[string]adapter.Factory
}

// Main runs the command line args (without the program name) and
// returns the process's exit status: 0, or 2 after printing the error
// (and the command list for a command line it does not understand).
func Main(args []string, opts Options) int {
	err := run(context.Background(), args, os.Stdout, opts)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintln(os.Stderr, "armature:", err)
		if errors.Is(err, errUsage) {
			fmt.Fprint(os.Stderr, usage)
		}
		return 2
	}
}

// usage is the command list that armature, armature help, -h and --help
// print.
const usage = `Armature: a Go runtime for chat agents.

Usage:

	armature <command> [flags]

Commands:

	serve      run the HTTP server: chat REST + SSE, OpenHarness, OpenAI-compatible, web UI
	chat       chat with a server's agent in the terminal
	example    run a small example graph and trace its events (-json: print the final state)
	version    print the version, the module version and the VCS commit
	help       print this list (armature help <command>: the command's flags)

Run "armature <command> -h" for a command's flags.
`

// errUsage marks a command line armature does not understand.
var errUsage = errors.New("usage")

// isHelp reports whether an argument asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// wantsHelp reports whether a command's arguments ask for its flags
// (before a "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

func run(ctx context.Context, args []string, out io.Writer, opts Options) error {
	if len(args) == 0 || (isHelp(args[0]) && len(args) == 1) {
		fmt.Fprint(out, usage)
		return nil
	}
	if args[0] == "help" {
		args = []string{args[1], "-h"} // armature help serve
	}
	// Asked for, a command's flags go to standard output (and exit 0).
	stderr := io.Writer(os.Stderr)
	if wantsHelp(args[1:]) {
		stderr = out
	}
	switch args[0] {
	case "version":
		fmt.Fprintln(out, versionLine())
		return nil
	case "serve":
		return runServe(ctx, args[1:], out, stderr, opts)
	case "chat":
		return runChat(ctx, args[1:], os.Stdin, out, stderr)
	case "example":
		fs := flag.NewFlagSet("example", flag.ContinueOnError)
		fs.SetOutput(stderr)
		asJSON := fs.Bool("json", false, "print the final state as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return runExample(ctx, out, *asJSON)
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
}

// versionLine is what armature version prints: the release, then the
// module version and the VCS commit the binary was built from, when the
// build recorded them.
func versionLine() string {
	line := "armature " + version
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return line
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	line += " (module " + bi.Main.Path + " " + bi.Main.Version
	if rev != "" {
		line += ", commit " + rev
		if at != "" {
			line += " " + at
		}
		line += dirty
	}
	return line + ", " + bi.GoVersion + ")"
}

// The example is a tiny support-ticket triage graph: classify the ticket,
// route urgent ones to escalation and the rest to an auto-reply, and keep a
// trail of what happened.
var (
	ticket   = graph.NewField[string]("ticket")
	priority = graph.NewField[string]("priority")
	reply    = graph.NewField[string]("reply")
	trail    = graph.NewListField[string]("trail", graph.Append)
)

func exampleGraph() (*graph.Graph, error) {
	schema, err := graph.NewSchema(ticket, priority, reply, trail)
	if err != nil {
		return nil, err
	}
	return graph.NewBuilder(schema).
		AddNode("classify", func(ctx context.Context, s graph.State) (graph.Update, error) {
			p := "normal"
			if t := strings.ToLower(ticket.Get(s)); strings.Contains(t, "down") || strings.Contains(t, "outage") {
				p = "urgent"
			}
			return priority.Set(p).With(trail.Add("classified as " + p)), nil
		}).
		AddNode("escalate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return reply.Set("Paging the on-call engineer now.").With(trail.Add("escalated")), nil
		}).
		AddNode("auto_reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return reply.Set("Thanks, we will get back to you within a day.").With(trail.Add("auto-replied")), nil
		}).
		AddConditionalEdge("classify", func(ctx context.Context, s graph.State) (string, error) {
			if priority.Get(s) == "urgent" {
				return "escalate", nil
			}
			return "auto_reply", nil
		}, "escalate", "auto_reply").
		AddEdge("escalate", graph.End).
		AddEdge("auto_reply", graph.End).
		SetEntry("classify").
		Compile()
}

func runExample(ctx context.Context, out io.Writer, asJSON bool) error {
	g, err := exampleGraph()
	if err != nil {
		return err
	}
	trace := graph.WithObserver(func(ctx context.Context, ev graph.Event) error {
		if e, ok := ev.(*graph.NodeEvent); ok {
			fmt.Fprintf(out, "  step %d %-9s %s\n", e.Step, e.Phase, e.NodeName)
		}
		return nil
	})
	for _, t := range []string{"The API is down for all our users!", "How do I change my avatar?"} {
		fmt.Fprintf(out, "ticket: %q\n", t)
		res, err := g.Invoke(ctx, ticket.Set(t), trace)
		if err != nil {
			return err
		}
		if _, err := g.Drain(ctx); err != nil {
			return err
		}
		if asJSON {
			b, err := json.Marshal(res.State)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "  state: %s\n", b)
		}
		fmt.Fprintf(out, "  %s via %s: %s\n", res.Status, strings.Join(res.Path, " → "), reply.Get(res.State))
	}
	return nil
}
