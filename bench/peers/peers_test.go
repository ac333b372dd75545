package peers_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armature-go/armature/bench/peers"
	"github.com/cloudwego/eino/flow/agent/react"
	"github.com/cloudwego/eino/schema"
)

// histories are the W1 history lengths of BENCHMARKS.md.
var histories = []int{10, 1000, 10000}

// W1: a warm chat turn at history H. The session grows by two messages an
// op; once it has grown by max(H/10, 10) messages the benchmark moves to a
// freshly seeded session with the timer stopped, so every op runs at H plus
// at most 10 %.
func BenchmarkW1(b *testing.B) {
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=adk/store=memory/history=%d", h), func(b *testing.B) {
			a, n := newADK(b, peers.ADKConfig{}), 0
			w1ADK(b, h, func() (*peers.ADK, string) {
				n++
				id := fmt.Sprintf("w1-%d", n)
				seed(b, a, id, h)
				return a, id
			})
		})
	}
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=adk/store=sqlite/history=%d", h), func(b *testing.B) {
			var a *peers.ADK
			w1ADK(b, h, func() (*peers.ADK, string) {
				if a != nil {
					_ = a.Close()
				}
				a = seededSQLite(b, h)
				return a, templateSession
			})
		})
	}
	// Eino keeps no chat history: the application holds it and passes it
	// in the input, which is the idiomatic equivalent of a warm turn. The
	// reply is returned, not stored, so H stays fixed.
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=eino/store=memory/history=%d", h), func(b *testing.B) {
			e := newEinoRunner(b, peers.EinoNoTool)
			einoTurns(b, h, func(ctx context.Context, in []*schema.Message) error {
				_, _, err := e.Send(ctx, in)
				return err
			})
		})
	}
	for _, h := range histories {
		b.Run(fmt.Sprintf("peer=eino-graph/store=memory/history=%d", h), func(b *testing.B) {
			g := newEinoGraph(b, false)
			einoTurns(b, h, func(ctx context.Context, in []*schema.Message) error {
				_, err := g.Generate(ctx, in)
				return err
			})
		})
	}
}

// einoTurns runs turns on a history of h messages held by the caller.
func einoTurns(b *testing.B, h int, send func(context.Context, []*schema.Message) error) {
	ctx := context.Background()
	history := make([]*schema.Message, h, h+1)
	for i := range history {
		history[i] = schema.AssistantMessage(peers.HistoryText(i), nil)
		if peers.HistoryRole(i) {
			history[i] = schema.UserMessage(peers.HistoryText(i))
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := send(ctx, append(history[:h:h], schema.UserMessage(peers.UserText))); err != nil {
			b.Fatal(err)
		}
	}
}

// w1ADK runs W1 on ADK; fresh returns a peer and the id of a session of h
// messages on it.
func w1ADK(b *testing.B, h int, fresh func() (*peers.ADK, string)) {
	ctx := context.Background()
	every := max(h/10, 10) / 2
	a, id := fresh()
	b.ReportAllocs()
	b.ResetTimer()
	ops := 0
	for b.Loop() {
		if ops == every {
			b.StopTimer()
			a, id = fresh()
			ops = 0
			b.StartTimer()
		}
		ops++
		if _, err := a.Send(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}

// W2: the first turn of a new session, one fresh session id an op.
func BenchmarkW2(b *testing.B) {
	b.Run("peer=adk/store=memory", func(b *testing.B) { newSessionTurns(b, newADK(b, peers.ADKConfig{}), "w2") })
	b.Run("peer=adk/store=sqlite", func(b *testing.B) { newSessionTurns(b, newADK(b, sqliteConfig(b, false)), "w2") })
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoNoTool)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, _, err := e.Send(ctx, in); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g := newEinoGraph(b, false)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, err := g.Generate(ctx, in); return err })
	})
}

// W3: a tool turn (tool call, tool result, answer) as the first turn of a
// new session, one fresh session id an op.
func BenchmarkW3(b *testing.B) {
	b.Run("peer=adk/store=memory", func(b *testing.B) { newSessionTurns(b, newADK(b, peers.ADKConfig{Tool: true}), "w3") })
	b.Run("peer=adk/store=sqlite", func(b *testing.B) { newSessionTurns(b, newADK(b, sqliteConfig(b, true)), "w3") })
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoWeatherTool)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, _, err := e.Send(ctx, in); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g := newEinoGraph(b, true)
		einoTurns(b, 0, func(ctx context.Context, in []*schema.Message) error { _, err := g.Generate(ctx, in); return err })
	})
}

// W4: an approval cycle. ADK-Go has no suspend/resume outcome, and Eino
// no history store, so only Eino in memory runs: interrupt at the tool,
// checkpoint, resume with the payload, tool, answer. Each op uses a new
// checkpoint id (an existing one would be resumed).
func BenchmarkW4(b *testing.B) {
	b.Run("peer=eino/store=memory", func(b *testing.B) {
		e := newEinoRunner(b, peers.EinoApprovalTool)
		cycles(b, func(ctx context.Context, id string) error { _, err := e.Cycle(ctx, id); return err })
	})
	b.Run("peer=eino-graph/store=memory", func(b *testing.B) {
		g, err := peers.NewEinoApproval(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		cycles(b, func(ctx context.Context, id string) error { _, err := g.Cycle(ctx, id); return err })
	})
}

func cycles(b *testing.B, cycle func(context.Context, string) error) {
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if err := cycle(ctx, fmt.Sprintf("w4-%d", n)); err != nil {
			b.Fatal(err)
		}
	}
}

func newSessionTurns(b *testing.B, a *peers.ADK, prefix string) {
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if _, err := a.Send(ctx, fmt.Sprintf("%s-%d", prefix, n)); err != nil {
			b.Fatal(err)
		}
	}
}

func newEinoRunner(tb testing.TB, t peers.EinoTool) *peers.EinoRunner {
	tb.Helper()
	e, err := peers.NewEinoRunner(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func newEinoGraph(tb testing.TB, withTool bool) *react.Agent {
	tb.Helper()
	g, err := peers.NewEinoAgent(context.Background(), withTool)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

func newADK(tb testing.TB, cfg peers.ADKConfig) *peers.ADK {
	tb.Helper()
	a, err := peers.NewADK(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Close() })
	return a
}

func sqliteConfig(tb testing.TB, withTool bool) peers.ADKConfig {
	return peers.ADKConfig{Tool: withTool, Path: filepath.Join(tb.TempDir(), "adk.db")}
}

func seed(tb testing.TB, a *peers.ADK, id string, h int) {
	tb.Helper()
	if err := a.Seed(context.Background(), id, h); err != nil {
		tb.Fatal(err)
	}
}

// templateSession is the session the SQLite templates hold.
const templateSession = "w1"

// templateDir holds one SQLite file per history length, seeded once per
// test binary (seeding 10 000 events, one transaction each, takes long);
// each W1 SQLite run works on a copy.
var (
	templateDir string
	templates   sync.Map // int -> *template
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "peers-templates")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	templateDir = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

type template struct {
	once sync.Once
	path string
	err  error
}

// seededSQLite returns an ADK peer on a fresh copy of a SQLite file whose
// session [templateSession] holds h messages.
func seededSQLite(tb testing.TB, h int) *peers.ADK {
	tb.Helper()
	v, _ := templates.LoadOrStore(h, &template{})
	t := v.(*template)
	t.once.Do(func() {
		t.path = filepath.Join(templateDir, fmt.Sprintf("history-%d.db", h))
		a, err := peers.NewADK(peers.ADKConfig{Path: t.path})
		if err != nil {
			t.err = err
			return
		}
		t.err = errors.Join(a.Seed(context.Background(), templateSession, h), a.Close())
	})
	if t.err != nil {
		tb.Fatal(t.err)
	}
	path := filepath.Join(tb.TempDir(), "adk.db")
	if err := copyFile(t.path, path); err != nil {
		tb.Fatal(err)
	}
	return newADK(tb, peers.ADKConfig{Path: path})
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}
