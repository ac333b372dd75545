package runtimetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/runtime"
)

// testMessageID: Run.MessageID round-trips through StartRun, a
// BatchWriter's start and a Recorder's turn (which records only a valid
// id on the run, and refuses no turn for an invalid one); StartRun
// refuses an invalid one.
func testMessageID(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	want := runtime.Run{ID: "r1", Tenant: "acme", SessionID: "s1", AgentID: "a1", MessageID: "retry-0123abcd-7f9c",
		Status: runtime.StatusStarted, StartedAt: t0}
	if err := s.StartRun(ctx, want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, getRun(t, s, "acme", "r1")); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	if err := s.Finish(ctx, runtime.FinishRequest{Tenant: "acme", RunID: "r1", Status: runtime.StatusCompleted}); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, s, "acme", "r1"); got.MessageID != want.MessageID {
		t.Errorf("finished run's message id = %q, want %q", got.MessageID, want.MessageID)
	}
	resp, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme"})
	if err != nil || len(resp.Runs) != 1 || resp.Runs[0].MessageID != want.MessageID {
		t.Errorf("ListRuns = %+v, %v; want the run with its message id", resp.Runs, err)
	}

	if bw, ok := s.(runtime.BatchWriter); ok {
		for i, id := range []string{"m-batch", ""} {
			runID := fmt.Sprintf("b%d", i)
			r := runtime.Run{ID: runID, Tenant: "acme", SessionID: "s1", AgentID: "a1", MessageID: id, StartedAt: t0}
			if _, err := bw.WriteTurns(ctx, []runtime.TurnRecord{{Start: &r, Append: runtime.AppendRequest{Tenant: "acme", RunID: runID,
				Events: evs(runtime.EventRequestStarted), Finish: &runtime.FinishRequest{Status: runtime.StatusCompleted}}}}); err != nil {
				t.Fatalf("WriteTurns with message id %q: %v", id, err)
			}
			if got := getRun(t, s, "acme", runID).MessageID; got != id {
				t.Errorf("batch-written run's message id = %q, want %q", got, id)
			}
		}
	}

	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rec.Close(ctx) }()
	for _, tc := range []struct{ given, onRun string }{
		{"m-1", "m-1"},
		{"héllo ✓ \U0010FFFF", "héllo ✓ \U0010FFFF"},
		{"", ""},
		{"line\nbreak", ""}, // control character: on the event only
		{"\xff", ""},        // not UTF-8: on the event only
		{strings.Repeat("x", runtime.MaxIDLength), strings.Repeat("x", runtime.MaxIDLength)},
		{strings.Repeat("x", runtime.MaxIDLength+1), ""}, // too long: on neither
	} {
		turn, _, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "rec", AgentID: "a", MessageID: tc.given})
		if err != nil {
			t.Fatalf("Begin with message id %q: %v", tc.given, err)
		}
		if err := turn.Complete(ctx, nil); err != nil {
			t.Fatal(err)
		}
		if err := rec.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if got := getRun(t, s, "acme", turn.ID()).MessageID; got != tc.onRun {
			t.Errorf("Begin with message id %q: the run's = %q, want %q", tc.given, got, tc.onRun)
		}
	}

	long := strings.Repeat("m", runtime.MaxIDLength+1)
	for _, id := range []string{"a\nb", "\x00", "\xff", "del\x7f", long} {
		if err := s.StartRun(ctx, runtime.Run{ID: "bad", Tenant: "acme", MessageID: id}); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("StartRun with message id %q = %v, want ErrInvalidRequest", id, err)
		}
	}
	if _, err := s.Run(ctx, "acme", "bad"); !errors.Is(err, runtime.ErrNotFound) {
		t.Errorf("a refused run was stored: %v", err)
	}
}

// msgRun is a run of testListByMessagePrefix.
type msgRun struct{ tenant, id, session, message string }

// testListByMessagePrefix: ListRunsRequest.MessageIDPrefix lists the
// tenant's runs whose message id begins with it, newest first, with
// pagination and the session filter: ids that share a start, an id
// equal to the prefix, LIKE wildcards and backslashes taken literally,
// multi-byte and the highest code points (whose prefix range has no
// end, or ends past the surrogates), and never a run of another tenant
// or without a message id. Every prefix of every id is checked against
// strings.HasPrefix.
func testListByMessagePrefix(t *testing.T, s runtime.Store) {
	ctx := t.Context()
	messages := []string{
		"retry-aa-1", "retry-aa-2", "retry-aab-1", "retry-aa", "retry-a", "retry-ab-1", "retry-", "retry",
		"retry-%-1", "retry-_a", "retry-\\-1", "retry-\\%", "%", "_",
		"é", "é-1", "éa", "ê", "e", "\uD7FF", "\uD7FFx", "\uE000", "\uFFFD", "\uFFFF",
		"\U0010FFFF", "\U0010FFFFa", "\U0010FFFF\U0010FFFF", "x\U0010FFFF", "x\U0010FFFFy", "y", "中文-1", "中文",
	}
	var runs []msgRun
	for i, m := range messages {
		session := []string{"s1", "s2"}[i%2]
		runs = append(runs, msgRun{"acme", fmt.Sprintf("r%02d", i), session, m})
		// Another tenant's runs with the same message ids, started
		// between acme's: never listed for acme.
		runs = append(runs, msgRun{"globex", fmt.Sprintf("r%02d", i), session, m})
		if i%5 == 0 { // and runs without a message id
			runs = append(runs, msgRun{"acme", fmt.Sprintf("n%02d", i), session, ""})
		}
	}
	for _, r := range runs {
		if err := s.StartRun(ctx, runtime.Run{ID: r.id, Tenant: r.tenant, SessionID: r.session, AgentID: "agent",
			MessageID: r.message, StartedAt: t0}); err != nil {
			t.Fatalf("StartRun(%+v): %v", r, err)
		}
	}
	list := func(req runtime.ListRunsRequest) []string {
		t.Helper()
		var got []string
		for range 200 {
			resp, err := s.ListRuns(ctx, req)
			if err != nil {
				t.Fatalf("ListRuns(%+v): %v", req, err)
			}
			for _, r := range resp.Runs {
				if r.Tenant != req.Tenant {
					t.Fatalf("ListRuns(%+v) listed run %q of tenant %q", req, r.ID, r.Tenant)
				}
				got = append(got, r.ID+" "+r.MessageID)
			}
			if resp.NextPageToken == "" {
				return got
			}
			req.PageToken = resp.NextPageToken
		}
		t.Fatal("pagination does not end")
		return nil
	}
	oracle := func(tenant, session, prefix string) []string {
		var want []string
		for _, r := range slices.Backward(runs) {
			if r.tenant == tenant && (session == "" || r.session == session) && r.message != "" && strings.HasPrefix(r.message, prefix) {
				want = append(want, r.id+" "+r.message)
			}
		}
		return want
	}

	// A few spelled out.
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"retry-aa-", []string{"r01 retry-aa-2", "r00 retry-aa-1"}},
		{"retry-aa", []string{"r03 retry-aa", "r02 retry-aab-1", "r01 retry-aa-2", "r00 retry-aa-1"}},
		{"retry-aa-2", []string{"r01 retry-aa-2"}},
		{"retry-%", []string{"r08 retry-%-1"}},
		{"retry-_", []string{"r09 retry-_a"}},
		{"retry-\\", []string{"r11 retry-\\%", "r10 retry-\\-1"}},
		{"%", []string{"r12 %"}},
		{"é", []string{"r16 éa", "r15 é-1", "r14 é"}},
		{"\uD7FF", []string{"r20 \uD7FFx", "r19 \uD7FF"}},
		{"\U0010FFFF", []string{"r26 \U0010FFFF\U0010FFFF", "r25 \U0010FFFFa", "r24 \U0010FFFF"}},
		{"\U0010FFFF\U0010FFFF", []string{"r26 \U0010FFFF\U0010FFFF"}},
		{"x\U0010FFFF", []string{"r28 x\U0010FFFFy", "r27 x\U0010FFFF"}},
		{"中", []string{"r31 中文", "r30 中文-1"}},
		{"retry-aa-3", nil},
		{"zzz", nil},
	} {
		for _, size := range []int{1, 2, 100} {
			got := list(runtime.ListRunsRequest{Tenant: "acme", MessageIDPrefix: tc.prefix, PageSize: size})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("prefix %q, page size %d (-want +got):\n%s", tc.prefix, size, diff)
			}
		}
	}

	// Every prefix of every message id, at each code point boundary, in
	// both tenants, of the tenant and of one session.
	prefixes := map[string]bool{}
	for _, m := range messages {
		for i := range m {
			if i > 0 {
				prefixes[m[:i]] = true
			}
		}
		prefixes[m] = true
		prefixes[m+"!"] = true
	}
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range prefixes {
			if !yield(p) {
				return
			}
		}
	}) {
		if !utf8.ValidString(p) {
			t.Fatalf("prefix %q is not a code point boundary", p)
		}
		for _, req := range []runtime.ListRunsRequest{
			{Tenant: "acme", MessageIDPrefix: p, PageSize: 3},
			{Tenant: "globex", MessageIDPrefix: p},
			{Tenant: "acme", SessionID: "s2", MessageIDPrefix: p, PageSize: 1},
			{Tenant: "nobody", MessageIDPrefix: p},
		} {
			if diff := cmp.Diff(oracle(req.Tenant, req.SessionID, p), list(req)); diff != "" {
				t.Errorf("ListRuns(%+v) (-want +got):\n%s", req, diff)
			}
		}
	}

	// The parent filter applies too.
	if err := s.StartRun(ctx, runtime.Run{ID: "child", Tenant: "acme", SessionID: "s1", AgentID: "agent", ParentID: "r00",
		MessageID: "retry-aa-child", StartedAt: t0}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"child retry-aa-child"}, list(runtime.ListRunsRequest{Tenant: "acme", ParentID: "r00",
		MessageIDPrefix: "retry-aa-"})); diff != "" {
		t.Errorf("prefix and parent (-want +got):\n%s", diff)
	}

	for _, p := range []string{"a\nb", "\x00", "\xff", "x\x7f", strings.Repeat("p", runtime.MaxIDLength+1)} {
		if _, err := s.ListRuns(ctx, runtime.ListRunsRequest{Tenant: "acme", MessageIDPrefix: p}); !errors.Is(err, runtime.ErrInvalidRequest) {
			t.Errorf("ListRuns with message id prefix %q = %v, want ErrInvalidRequest", p, err)
		}
	}
}

// MessageIDUpgraded checks a run store that was just upgraded to record
// message ids (Run.MessageID) and held, from before, the runs old-1,
// old-2 and old-3 of tenant acme, started in that order: an old run has
// no message id, runs started since record theirs, and listing by
// prefix finds them, and them only, newest first.
func MessageIDUpgraded(t *testing.T, rs runtime.Store) {
	t.Helper()
	ctx := t.Context()
	old, err := rs.Run(ctx, "acme", "old-2")
	if err != nil || old.MessageID != "" {
		t.Fatalf("an old run after the upgrade = %+v, %v", old, err)
	}
	for _, id := range []string{"new-1", "new-2"} {
		if err := rs.StartRun(ctx, runtime.Run{ID: id, Tenant: "acme", SessionID: "s", MessageID: "retry-abc-" + id}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(req runtime.ListRunsRequest) []string {
		t.Helper()
		resp, err := rs.ListRuns(ctx, req)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", req, err)
		}
		var out []string
		for _, r := range resp.Runs {
			out = append(out, r.ID+" "+r.MessageID)
		}
		return out
	}
	if diff := cmp.Diff([]string{"new-2 retry-abc-new-2", "new-1 retry-abc-new-1", "old-3 ", "old-2 ", "old-1 "},
		ids(runtime.ListRunsRequest{Tenant: "acme"})); diff != "" {
		t.Errorf("all runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"new-2 retry-abc-new-2", "new-1 retry-abc-new-1"},
		ids(runtime.ListRunsRequest{Tenant: "acme", MessageIDPrefix: "retry-abc-"})); diff != "" {
		t.Errorf("by prefix (-want +got):\n%s", diff)
	}
}
