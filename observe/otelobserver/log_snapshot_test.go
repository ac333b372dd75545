package otelobserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armature-go/armature/graph"
)

// runLogNode runs a one-node graph whose node logs through the observer's
// LogHandler wrapping next, and returns the node's error (a panic in the
// log call surfaces here).
func runLogNode(t *testing.T, next slog.Handler, log func(ctx context.Context, l *slog.Logger)) error {
	t.Helper()
	h := newHarness(t)
	logger := slog.New(h.obs.LogHandler(next))
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			log(ctx, logger)
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	_, ierr := g.Invoke(context.Background(), nil)
	if _, err := g.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ierr
}

// A nil *time.Time (an optional timestamp) logged from a node: slog's own
// handlers render it "<nil>" / null; the snapshot calls MarshalText on
// the nil pointer.
func TestNilPointerTextMarshaler(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	next := slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, nil)
	var deadline *time.Time
	err := runLogNode(t, next, func(ctx context.Context, l *slog.Logger) {
		l.InfoContext(ctx, "scheduling", "deadline", deadline)
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("logging a nil *time.Time from a node failed the invocation: %v (output %q)", err, buf.String())
	}
	if !strings.Contains(buf.String(), `"deadline"`) {
		t.Fatalf("record not rendered: %q", buf.String())
	}
}

// A named byte slice (json.RawMessage) is rendered by slog's TextHandler
// as its text; the doc promises the "%+v form (as slog's TextHandler
// renders it)".
func TestNamedByteSlice(t *testing.T) {
	var mu sync.Mutex
	var got, want bytes.Buffer
	raw := json.RawMessage(`{"a":1}`)
	next := slog.NewTextHandler(&lockedWriter{mu: &mu, w: &got}, &slog.HandlerOptions{ReplaceAttr: dropTime})
	if err := runLogNode(t, next, func(ctx context.Context, l *slog.Logger) {
		l.InfoContext(ctx, "m", "body", raw)
	}); err != nil {
		t.Fatal(err)
	}
	slog.New(slog.NewTextHandler(&want, &slog.HandlerOptions{ReplaceAttr: dropTime})).Info("m", "body", raw)
	mu.Lock()
	defer mu.Unlock()
	wantField := strings.Fields(want.String())[2]
	if !strings.Contains(got.String(), wantField) {
		t.Fatalf("TextHandler alone renders %s; through LogHandler in a node: %q", wantField, got.String())
	}
}

// The same through a JSON handler: the attribute was a JSON object.
func TestJSONHandlerStructured(t *testing.T) {
	var mu sync.Mutex
	var got bytes.Buffer
	next := slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &got}, nil)
	if err := runLogNode(t, next, func(ctx context.Context, l *slog.Logger) {
		l.InfoContext(ctx, "m", "req", map[string]any{"model": "x", "n": 2})
	}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	var m map[string]any
	if err := json.Unmarshal(got.Bytes(), &m); err != nil {
		t.Fatalf("%v: %q", err, got.String())
	}
	if _, ok := m["req"].(map[string]any); !ok {
		t.Logf("JSON handler: map attribute rendered as %T %v (was a JSON object before e2ea4fd)", m["req"], m["req"])
		t.Fail()
	}
}

// A cyclic map logged through a JSON handler: encoding/json reports the
// cycle and slog renders "!ERROR:..."; the snapshot's %+v recurses
// without end (fatal stack overflow). Run in a child process.
func TestCyclicMap(t *testing.T) {
	if os.Getenv("OTELOBSERVER_TEST_CHILD") == "1" {
		var mu sync.Mutex
		var got bytes.Buffer
		next := slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &got}, nil)
		m := map[string]any{"k": 1}
		m["self"] = m
		err := runLogNode(t, next, func(ctx context.Context, l *slog.Logger) {
			l.InfoContext(ctx, "cyclic", "m", m)
		})
		mu.Lock()
		fmt.Printf("CHILD-OK err=%v out=%.200s\n", err, got.String())
		mu.Unlock()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestCyclicMap$", "-test.v")
	cmd.Env = append(os.Environ(), "OTELOBSERVER_TEST_CHILD=1")
	out, err := cmd.CombinedOutput()
	s := string(out)
	if err != nil || !strings.Contains(s, "CHILD-OK") {
		i := strings.Index(s, "fatal error")
		if i < 0 {
			i = 0
		}
		t.Fatalf("child process died (%v): %.400s", err, s[i:])
	}
	t.Logf("%.300s", s[strings.Index(s, "CHILD-OK"):])
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// The same with the OTel observer not registered on the graph at all (a
// LogHandler used only for the correlation fields): the snapshot still
// runs and the log call panics in the node.
func TestNilPointerNoObserver(t *testing.T) {
	h := newHarness(t)
	var buf bytes.Buffer
	logger := slog.New(h.obs.LogHandler(slog.NewJSONHandler(&buf, nil)))
	var deadline *time.Time
	g, err := graph.NewBuilder(graph.MustSchema(x)).
		AddNode("a", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			logger.InfoContext(ctx, "scheduling", "deadline", deadline)
			return nil, nil
		}).AddEdge("a", graph.End).SetEntry("a").Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatalf("%v (output %q)", err, buf.String())
	}
}
