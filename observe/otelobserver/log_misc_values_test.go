package otelobserver_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

type logValuesPanicValuer struct{}

func (logValuesPanicValuer) LogValue() slog.Value { panic("valuer boom") }

type logValuesGroupValuer struct{}

func (logValuesGroupValuer) LogValue() slog.Value {
	return slog.GroupValue(slog.Any("inner", logValuesPanicValuer{}), slog.Int("n", 3))
}

// LogValuers that panic (also inside a group a valuer returns), nil
// interfaces, typed nil errors, huge values, and handler attrs/groups.
func TestLogHandlerMiscValues(t *testing.T) {
	var mu sync.Mutex
	var buf bytes.Buffer
	next := slog.NewJSONHandler(&lockedWriter{mu: &mu, w: &buf}, nil)
	var nilErr *logValuesErr
	huge := strings.Repeat("x", 1<<20)
	err := runLogNode(t, next, func(ctx context.Context, l *slog.Logger) {
		l.With("pre", 1).WithGroup("g").InfoContext(ctx, "m",
			"pv", logValuesPanicValuer{}, "gv", logValuesGroupValuer{},
			slog.Any("nil", nil), slog.Any("nilerr", nilErr), "err", errors.New("e1"),
			"huge", []byte(huge), slog.Group("grp", "a", []int{1, 2}))
	})
	mu.Lock()
	defer mu.Unlock()
	if err != nil {
		t.Fatalf("%v", err)
	}
	out := buf.String()
	for _, want := range []string{`"pre":1`, `"g":{`, `"pv":"LogValue panicked`, `"n":3`, `"nil":null`, `"err":"e1"`, `"grp":{"a":`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s", want)
		}
	}
	t.Logf("%d bytes; head %.600s", len(out), strings.ReplaceAll(out, huge, "<huge>"))
}

type logValuesErr struct{ msg string }

func (e *logValuesErr) Error() string { return e.msg }
