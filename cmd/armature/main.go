// Command armature is the Armature command-line tool.
//
// Usage:
//
//	armature serve [flags]     run the HTTP server (see armature serve -h)
//	armature chat [flags]      chat with a server's agent in the terminal (see armature chat -h)
//	armature example [-json]   run a small example graph and trace its events
//	armature version           print the version
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/armature-go/armature/graph"
)

// version is the Armature release; overridden at link time with
// -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "armature:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: armature serve [flags] | armature chat [flags] | armature example [-json] | armature version")
	}
	switch args[0] {
	case "version":
		fmt.Fprintln(out, "armature", version)
		return nil
	case "serve":
		return runServe(ctx, args[1:], out, os.Stderr)
	case "chat":
		return runChat(ctx, args[1:], os.Stdin, out, os.Stderr)
	case "example":
		fs := flag.NewFlagSet("example", flag.ContinueOnError)
		asJSON := fs.Bool("json", false, "print the final state as JSON")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return runExample(ctx, out, *asJSON)
	}
	return fmt.Errorf("unknown command %q", args[0])
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
