// Package adapterserve is the server of the backend adapter modules'
// binaries (adapters/adk/cmd/armature-adk, adapters/eino/cmd/armature-eino):
// one agent of one backend adapter, with the demo tools (lookup_order,
// issue_refund, the tools an armature serve workspace may name), over the
// embedded SQLite store of a data directory, served with every surface of
// armature serve (chat REST + SSE, OpenHarness, the OpenAI-compatible
// endpoints, the web page; armature chat connects to it). Each binary is
// three lines:
//
//	func main() { os.Exit(adapterserve.Main(adk.Name, adk.Factory)) }
//
// It stands in until armature serve (a package main) is a package the
// adapter modules can import: then those binaries become armature serve
// itself with one more adapter factory, reading a whole workspace. It
// listens on loopback addresses only (it takes no tokens).
package adapterserve

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/store/sqlite"
)

// Main runs the binary of the adapter named backend: it parses
// os.Args, serves until SIGINT or SIGTERM, and returns the exit status.
func Main(backend string, factory adapter.Factory) int {
	err := Run(context.Background(), os.Args[1:], os.Stdout, backend, factory)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	default:
		fmt.Fprintf(os.Stderr, "armature-%s: %v\n", backend, err)
		return 2
	}
}

// Run is Main on the given arguments: it serves until ctx ends or a
// SIGINT or SIGTERM arrives.
func Run(ctx context.Context, args []string, stdout io.Writer, backend string, factory adapter.Factory) error {
	name := "armature-" + backend
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stdout)
	addr := fs.String("addr", envOr("ARMATURE_ADDR", "127.0.0.1:8080"), "listen address, loopback only (env ARMATURE_ADDR)")
	data := fs.String("data", envOr("ARMATURE_DATA", "armature-data"), "directory of the SQLite store (env ARMATURE_DATA)")
	config := fs.String("config", "", "YAML file holding the agent's "+backend+": section; its relative paths are resolved against the file's directory (default: the data directory)")
	system := fs.String("system", "You are a helpful assistant.", "the agent's system prompt")
	id := fs.String("agent", backend, "the agent's id (the OpenAI model name)")
	grace := fs.Duration("grace", 10*time.Second, "how long shutdown lets running turns finish")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s [flags]\n\nServes one %s agent (the demo tools; issue_refund needs approval) with every surface of armature serve.\n\n", name, backend)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := os.MkdirAll(*data, 0o700); err != nil {
		return err
	}
	section, dir, err := readSection(*config, backend)
	if err != nil {
		return err
	}
	if dir == "" {
		dir = *data
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(*data, "armature.db"), Logger: log})
	if err != nil {
		return err
	}
	defer st.Close(context.WithoutCancel(ctx))
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: st.Runs(), Logger: log})
	if err != nil {
		return err
	}
	defer rec.Close(context.WithoutCancel(ctx))

	ag := &adapter.Agent{ID: *id, Backend: backend, System: *system, Tools: demo.Tools(), Config: section}
	ws := &adapter.Workspace{Agents: []*adapter.Agent{ag}, Dir: dir}
	reg := &adapter.Registry{}
	if err := reg.Register(backend, factory); err != nil {
		return err
	}
	a, err := reg.Build(ctx, adapter.FactoryRequest{Workspace: ws, Agent: ag, Logger: log})
	if err != nil {
		return err
	}
	if c, ok := a.(io.Closer); ok {
		defer c.Close()
	}
	sa, err := server.NewAdapterAgent(server.AdapterAgentConfig{Adapter: a, Agent: ag, Workspace: ws,
		Sessions: st, Records: st.Checkpoints(), Locker: st.SessionLocker(sqlite.LockerConfig{})})
	if err != nil {
		return err
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{sa}, Sessions: st, Runs: rec, Addr: *addr, Logger: log})
	if err != nil {
		return err
	}
	if _, err := srv.RecoverRuns(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(stdout, "%s serving agent %s on http://%s (data: %s)\n", name, ag.ID, ln.Addr(), *data)
	return srv.Serve(ctx, ln, *grace)
}

// readSection reads the backend's section from path: a YAML document
// holding either the section itself or a mapping with the section under
// the backend's key (as in a workspace agent). It returns the section as
// JSON and the file's directory.
func readSection(path, backend string) (json.RawMessage, string, error) {
	if path == "" {
		return nil, "", nil
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, "", err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	if inner, ok := doc[backend].(map[string]any); ok && len(doc) == 1 {
		doc = inner
	}
	section, err := json.Marshal(doc)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	return section, dir, err
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
