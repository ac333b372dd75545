package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
)

// langfuseExport is the Langfuse export of armature serve: on when
// LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY are set (LANGFUSE_HOST, or
// LANGFUSE_BASE_URL, names the instance; Langfuse cloud by default). One
// client sends the traces of every agent, each agent's named after it;
// model payloads and state stay out (the observer's privacy defaults).
type langfuseExport struct {
	client *langfuse.Client
	log    *slog.Logger
	// graphs are drained before the client shuts down (observer delivery
	// is asynchronous: the last turns' events may still be queued).
	graphs []*graph.Graph
}

// setupLangfuse returns nil when the keys are not set.
func setupLangfuse(log *slog.Logger) (*langfuseExport, error) {
	cfg, ok := langfuse.ClientConfigFromEnv()
	if !ok {
		if cfg.PublicKey != "" || cfg.SecretKey != "" {
			log.Warn("serve: Langfuse export needs both LANGFUSE_PUBLIC_KEY and LANGFUSE_SECRET_KEY; it is off")
		}
		return nil, nil
	}
	cfg.Logger = log
	c, err := langfuse.NewClient(cfg)
	if err != nil {
		return nil, err
	}
	log.Info("serve: exporting traces to Langfuse", "host", cfg.Host)
	return &langfuseExport{client: c, log: log}, nil
}

// attach registers an observer exporting the agent's turns on g.
func (l *langfuseExport) attach(g *graph.Graph, agentID string) error {
	if l == nil {
		return nil
	}
	obs, err := langfuse.New(langfuse.Config{Exporter: l.client, ImplementationVersion: version, Logger: l.log,
		TraceName: func(*graph.InvocationEvent) string { return agentID }})
	if err != nil {
		return err
	}
	if _, err := g.AddObserver(obs.Observe, graph.InvocationEvents()); err != nil {
		return err
	}
	l.graphs = append(l.graphs, g)
	return nil
}

// shutdown delivers the graphs' pending events and sends the traces
// still queued, for at most ten seconds.
func (l *langfuseExport) shutdown() {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, g := range l.graphs {
		_, _ = g.Drain(ctx, graph.DrainTimeout(5*time.Second))
	}
	if err := l.client.Shutdown(ctx); err != nil {
		l.log.Warn("serve: flushing the Langfuse export failed", "error", err)
	}
	if s := l.client.Stats(); s.Dropped+s.Failed+s.Rejected > 0 {
		l.log.Warn("serve: Langfuse events not delivered", "dropped", s.Dropped, "failed", s.Failed, "rejected", s.Rejected)
	}
}
