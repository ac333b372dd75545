// Command openai-agent is a runnable example: a tool-calling chat agent
// on any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp
// server), driven from the terminal through the chat harness, with one
// approval-gated tool.
//
//	OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.2 \
//		go run ./examples/openai-agent
//	OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini go run ./examples/openai-agent
//
// OPENAI_BASE_URL defaults to https://api.openai.com/v1. History is kept
// in an SQLite file (ARMATURE_DB, default ./openai-agent.db), so a
// conversation survives restarts; ARMATURE_SESSION names the session.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/openai"
	"github.com/armature-go/armature/store/sqlite"
)

type timeArgs struct {
	Zone string `json:"zone" jsonschema:"an IANA time zone such as Europe/Paris"`
}

type noteArgs struct {
	Text string `json:"text" jsonschema:"the note to save"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	model := os.Getenv("OPENAI_MODEL")
	if model == "" {
		return errors.New("set OPENAI_MODEL (and OPENAI_BASE_URL / OPENAI_API_KEY as your endpoint needs)")
	}
	provider, err := openai.New(openai.Config{
		BaseURL: envOr("OPENAI_BASE_URL", "https://api.openai.com/v1"),
		APIKey:  os.Getenv("OPENAI_API_KEY"),
		Model:   model,
	})
	if err != nil {
		return err
	}

	clock := agent.MustTool("current_time", "The current time in a time zone",
		func(ctx context.Context, a timeArgs) (string, error) {
			loc, err := time.LoadLocation(a.Zone)
			if err != nil {
				return "", err
			}
			return time.Now().In(loc).Format(time.RFC1123), nil
		})
	var notes []string
	save := agent.MustTool("save_note", "Save a note for the user",
		func(ctx context.Context, a noteArgs) (string, error) {
			notes = append(notes, a.Text)
			return fmt.Sprintf("saved (%d notes)", len(notes)), nil
		}).WithApproval()

	a, err := agent.New(agent.Config{
		Provider: provider,
		System:   "You are a concise assistant. Use tools when they help.",
		Tools:    []agent.Tool{clock, save},
	})
	if err != nil {
		return err
	}
	store, err := sqlite.Open(ctx, sqlite.Config{Path: envOr("ARMATURE_DB", "openai-agent.db")})
	if err != nil {
		return err
	}
	defer store.Close(context.Background())
	g, err := a.Compile(
		graph.WithSessions(graph.SessionConfig{Store: store}),
		graph.WithCheckpointStore(store.Checkpoints()),
	)
	if err != nil {
		return err
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		return err
	}
	sessionID := envOr("ARMATURE_SESSION", "terminal")
	defer h.Subscribe(sessionID, func(o chat.Outcome) { show(o) })()

	in := bufio.NewScanner(os.Stdin)
	fmt.Printf("chatting with %s as session %q; empty line to quit\n", model, sessionID)
	for {
		fmt.Print("> ")
		if !in.Scan() || strings.TrimSpace(in.Text()) == "" {
			return in.Err()
		}
		var final chat.Outcome
		for c, _ := range h.SendStreaming(ctx, sessionID, llm.UserText(in.Text())) {
			switch c.Kind {
			case chat.ChunkText:
				fmt.Print(c.Text)
			case chat.ChunkTool:
				fmt.Printf("\n[%s %s]\n", c.Tool.Name, c.Tool.Status)
			case chat.ChunkOutcome:
				final = c.Outcome
			}
		}
		fmt.Println()
		if e, ok := final.(*chat.Errored); ok {
			show(e)
		}
		// Approvals: ask inline, then deliver the decision as a signal;
		// the resumed turn's replies arrive through the listener.
		for {
			s, ok := final.(*chat.Suspended)
			if !ok {
				break
			}
			fmt.Printf("%s [y/N] ", s.PendingMessages[len(s.PendingMessages)-1].Text())
			payload := agent.Deny("the user said no")
			if in.Scan() && strings.HasPrefix(strings.ToLower(strings.TrimSpace(in.Text())), "y") {
				payload = agent.Approve("")
			}
			var err error
			if final, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sessionID, Payload: payload}); err != nil && final.Info().InvocationID == "" {
				show(final) // nothing resumed, so no listener reports it
			}
		}
	}
}

// show prints a resumed or failed turn.
func show(o chat.Outcome) {
	switch o := o.(type) {
	case *chat.Completed:
		for _, m := range o.Replies {
			if m.Role == llm.RoleAssistant && m.Text() != "" {
				fmt.Println(m.Text())
			}
		}
	case *chat.Errored:
		fmt.Printf("[%s] %s\n", o.Bucket, o.Reply.Text())
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
