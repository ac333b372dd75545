package harness_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

var (
	Log      = graph.NewListField[string]("log", graph.Append)
	Approved = graph.NewField[bool]("approved")
)

// countingStore counts every call to a session store.
type countingStore struct {
	session.Store
	calls atomic.Int64
}

func (s *countingStore) Load(ctx context.Context, req session.LoadRequest) (*session.Record, error) {
	s.calls.Add(1)
	return s.Store.Load(ctx, req)
}

func (s *countingStore) Save(ctx context.Context, req session.SaveRequest) (session.WriteResult, error) {
	s.calls.Add(1)
	return s.Store.Save(ctx, req)
}

func (s *countingStore) Delete(ctx context.Context, id string) error {
	s.calls.Add(1)
	return s.Store.Delete(ctx, id)
}

func (s *countingStore) List(ctx context.Context, req session.ListRequest) (session.ListResponse, error) {
	s.calls.Add(1)
	return s.Store.List(ctx, req)
}

// newGraph compiles a graph whose one node runs fn (default: append
// "ran"), with sessions on store and paused records on records.
func newGraph(t *testing.T, store session.Store, records checkpoint.Store, fn graph.NodeFunc) *graph.Graph {
	t.Helper()
	if fn == nil {
		fn = func(context.Context, graph.State) (graph.Update, error) { return Log.Add("ran"), nil }
	}
	if store == nil {
		store = session.NewMemoryStore(session.MemoryConfig{})
	}
	opts := []graph.CompileOption{graph.WithSessions(graph.SessionConfig{Store: store})}
	if records != nil {
		opts = append(opts, graph.WithCheckpointStore(records))
	}
	after := func(context.Context, graph.State) (graph.Update, error) { return nil, nil }
	g, err := graph.NewBuilder(graph.MustSchema(Log, Approved)).AddNode("n", fn).AddNode("after", after).
		SetEntry("n").AddEdge("n", "after").AddEdge("after", graph.End).Compile(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// suspending suspends for signalID; the resumed run continues with the
// next node.
func suspending(signalID string) graph.NodeFunc {
	return func(ctx context.Context, s graph.State) (graph.Update, error) {
		return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: signalID, Metadata: map[string]any{"tool": "rm"}})
	}
}

func newHarness(t *testing.T, cfg harness.Config) *harness.Harness {
	t.Helper()
	h, err := harness.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestNewValidatesConfig(t *testing.T) {
	g := newGraph(t, nil, nil, nil)
	for name, cfg := range map[string]harness.Config{
		"no graph":     {},
		"unknown mode": {Graph: g, Mode: harness.Mode(7)},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := harness.New(cfg); !errors.Is(err, harness.ErrInvalidConfig) {
				t.Fatalf("New: %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestErrorPrefixes(t *testing.T) {
	for _, err := range []error{harness.ErrInvalidConfig, harness.ErrNoSubscription, harness.ErrAmbiguousSignal, &harness.Error{Cat: errcat.HarnessSessionIDUnresolved, Msg: "x"}} {
		if !strings.HasPrefix(err.Error(), "harness: ") {
			t.Errorf("%q lacks the package prefix", err)
		}
	}
	var nilErr *harness.Error
	if nilErr.Error() == "" || nilErr.Unwrap() != nil || nilErr.Category() != "" || nilErr.Is(errcat.HarnessSessionIDUnresolved) {
		t.Error("a nil *Error is not nil-safe")
	}
	cause := errors.New("cause")
	e := &harness.Error{Cat: errcat.HarnessSignalCorrelationFailed, Msg: "m", Err: cause}
	if !errors.Is(e, cause) || !errors.Is(e, errcat.HarnessSignalCorrelationFailed) || errors.Is(e, errcat.HarnessSessionIDUnresolved) || e.Message() != "m" {
		t.Errorf("Error %v does not match its category and cause", e)
	}
}

func TestRoute(t *testing.T) {
	const (
		amb    = errcat.HarnessPathClassificationAmbiguous
		unres  = errcat.HarnessSessionIDUnresolved
		s3_0   = harness.PathStateless
		s3_1   = harness.PathNewSession
		s3_2   = harness.PathExistingSession
		s3_3   = harness.PathSignalResume
		bad    = "bad\x01id"
		valid  = "s1"
		noSess = ""
	)
	intents := map[string]harness.Intent{"infer": harness.IntentInfer, "new": harness.IntentNewSession, "continue": harness.IntentContinue, "resume": harness.IntentResume}
	sessions := map[string]string{"none": noSess, "valid": valid, "bad": bad}
	signals := map[string]*harness.SignalRef{"nil": nil, "sig": {SignalID: "approve"}, "empty": {}}
	modes := map[string]harness.Mode{"sessioned": harness.Sessioned, "stateless": harness.Stateless}
	// want[mode/intent/session/signal] is a Path or an errcat.Category.
	want := map[string]any{
		"sessioned/infer/none/nil": s3_1, "sessioned/infer/valid/nil": s3_2, "sessioned/infer/bad/nil": unres,
		"sessioned/new/none/nil": s3_1, "sessioned/new/valid/nil": s3_1, "sessioned/new/bad/nil": unres,
		"sessioned/continue/none/nil": unres, "sessioned/continue/valid/nil": s3_2, "sessioned/continue/bad/nil": unres,
		"sessioned/resume/none/nil": amb, "sessioned/resume/valid/nil": amb, "sessioned/resume/bad/nil": amb,
		"sessioned/infer/none/sig": s3_3, "sessioned/infer/valid/sig": s3_3, "sessioned/infer/bad/sig": s3_3,
		"sessioned/new/none/sig": amb, "sessioned/new/valid/sig": amb, "sessioned/new/bad/sig": amb,
		"sessioned/continue/none/sig": amb, "sessioned/continue/valid/sig": amb, "sessioned/continue/bad/sig": amb,
		"sessioned/resume/none/sig": s3_3, "sessioned/resume/valid/sig": s3_3, "sessioned/resume/bad/sig": s3_3,

		"stateless/infer/none/nil": s3_0, "stateless/infer/valid/nil": amb, "stateless/infer/bad/nil": amb,
		"stateless/new/none/nil": amb, "stateless/new/valid/nil": amb, "stateless/new/bad/nil": amb,
		"stateless/continue/none/nil": amb, "stateless/continue/valid/nil": amb, "stateless/continue/bad/nil": amb,
		"stateless/resume/none/nil": amb, "stateless/resume/valid/nil": amb, "stateless/resume/bad/nil": amb,
		"stateless/infer/none/sig": s3_3, "stateless/infer/valid/sig": s3_3, "stateless/infer/bad/sig": s3_3,
		"stateless/new/none/sig": amb, "stateless/new/valid/sig": amb, "stateless/new/bad/sig": amb,
		"stateless/continue/none/sig": amb, "stateless/continue/valid/sig": amb, "stateless/continue/bad/sig": amb,
		"stateless/resume/none/sig": s3_3, "stateless/resume/valid/sig": s3_3, "stateless/resume/bad/sig": s3_3,
	}
	g := newGraph(t, nil, nil, nil)
	hs := map[string]*harness.Harness{}
	for name, m := range modes {
		hs[name] = newHarness(t, harness.Config{Graph: g, Mode: m})
	}
	check := func(t *testing.T, h *harness.Harness, tx harness.Transmission, w any) {
		t.Helper()
		for range 2 { // deterministic
			path, err := h.Route(&tx)
			switch w := w.(type) {
			case harness.Path:
				if err != nil || path != w {
					t.Fatalf("Route = %q, %v; want %q", path, err, w)
				}
			case errcat.Category:
				var he *harness.Error
				if path != "" || !errors.Is(err, w) || !errors.As(err, &he) || errcat.Of(err) != w {
					t.Fatalf("Route = %q, %v; want category %s", path, err, w)
				}
			}
		}
	}
	n := 0
	for mn := range modes {
		for in, intent := range intents {
			for sn, sid := range sessions {
				for gn, sig := range signals {
					key := mn + "/" + in + "/" + sn + "/" + gn
					w, ok := want[key]
					if gn == "empty" {
						w, ok = amb, true // a signal naming nothing never routes
					}
					if !ok {
						t.Fatalf("no expectation for %s", key)
					}
					n++
					t.Run(key, func(t *testing.T) {
						check(t, hs[mn], harness.Transmission{Intent: intent, SessionID: sid, Signal: sig}, w)
					})
				}
			}
		}
	}
	if n != 72 || len(want) != 48 {
		t.Fatalf("%d combinations, %d expectations", n, len(want))
	}
	for name, tc := range map[string]struct {
		mode harness.Mode
		tx   harness.Transmission
		want any
	}{
		"signal with input":           {tx: harness.Transmission{Signal: &harness.SignalRef{SignalID: "x"}, Input: Log.Add("a")}, want: amb},
		"payload without signal":      {tx: harness.Transmission{SessionID: valid, Payload: Approved.Set(true)}, want: amb},
		"signal by invocation":        {tx: harness.Transmission{Signal: &harness.SignalRef{InvocationID: "i1"}, Payload: Approved.Set(true)}, want: s3_3},
		"unknown intent":              {tx: harness.Transmission{Intent: harness.Intent(9), SessionID: valid}, want: amb},
		"stateless payload no signal": {mode: harness.Stateless, tx: harness.Transmission{Payload: Approved.Set(true)}, want: amb},
		"input on existing session":   {tx: harness.Transmission{SessionID: valid, Input: Log.Add("a")}, want: s3_2},
	} {
		t.Run(name, func(t *testing.T) {
			h := hs["sessioned"]
			if tc.mode == harness.Stateless {
				h = hs["stateless"]
			}
			check(t, h, tc.tx, tc.want)
		})
	}
}

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestHandleMintsSessionID(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, nil)})
	seen := map[string]bool{}
	for range 20 {
		o, err := h.Handle(ctx, harness.Transmission{})
		if err != nil {
			t.Fatal(err)
		}
		if !o.SessionIDMinted || !uuidV4.MatchString(o.SessionID) || o.Path != harness.PathNewSession {
			t.Fatalf("outcome session %q minted %v path %q", o.SessionID, o.SessionIDMinted, o.Path)
		}
		if seen[o.SessionID] {
			t.Fatalf("session id %q minted twice", o.SessionID)
		}
		seen[o.SessionID] = true
	}
	// A caller-named session is not minted; a configured generator is used.
	h = newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, nil), NewSessionID: func() string { return "fixed" }})
	o, err := h.Handle(ctx, harness.Transmission{})
	if err != nil || o.SessionID != "fixed" || !o.SessionIDMinted {
		t.Fatalf("outcome %+v, %v", o, err)
	}
	o, err = h.Handle(ctx, harness.Transmission{Intent: harness.IntentNewSession, SessionID: "mine"})
	if err != nil || o.SessionID != "mine" || o.SessionIDMinted {
		t.Fatalf("outcome %+v, %v", o, err)
	}
	// The session persists: the next turn continues it.
	o, err = h.Handle(ctx, harness.Transmission{SessionID: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ran", "ran"}, Log.Get(o.State())); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

func TestStatelessNeverTouchesTheStore(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: session.NewMemoryStore(session.MemoryConfig{})}
	var sessionIDs []string
	h := newHarness(t, harness.Config{Graph: newGraph(t, store, nil, func(ctx context.Context, s graph.State) (graph.Update, error) {
		sessionIDs = append(sessionIDs, graph.SessionID(ctx))
		return suspending("go")(ctx, s)
	}), Mode: harness.Stateless})
	o, err := h.Handle(ctx, harness.Transmission{Input: Log.Add("in")})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != graph.Suspended || o.Path != harness.PathStateless || o.SessionID != "" || o.Subscription.SessionID != "" {
		t.Fatalf("outcome %+v", o)
	}
	o, err = h.Handle(ctx, harness.Transmission{Signal: &harness.SignalRef{SignalID: "go"}, Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	if o.Status != graph.Completed || o.Path != harness.PathSignalResume || o.SessionID != "" {
		t.Fatalf("resumed outcome %+v", o)
	}
	if diff := cmp.Diff([]string{"in"}, Log.Get(o.State())); diff != "" || !Approved.Get(o.State()) {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if n := store.calls.Load(); n != 0 {
		t.Errorf("a stateless harness called the session store %d times", n)
	}
	if diff := cmp.Diff([]string{""}, sessionIDs); diff != "" {
		t.Errorf("session ids threaded into the node (-want +got):\n%s", diff)
	}
}

func TestBucketOf(t *testing.T) {
	const (
		st = harness.SessionTerminating
		rt = harness.RetryableTransient
		uc = harness.UserCorrectable
	)
	want := map[errcat.Category]harness.Bucket{
		errcat.NoDeclaredEntry: rt, errcat.UnreachableNode: rt, errcat.DanglingEdge: rt, errcat.MultipleOutgoingEdges: rt,
		errcat.ConflictingReducers: rt, errcat.MappingReferencesUndeclaredField: rt, errcat.ConflictingProjectionForms: rt,
		errcat.ReducerConfigurationInvalid: rt, errcat.InvalidGraph: rt, errcat.ProjectionReducerRoundTrip: rt,
		errcat.NodeException: rt, errcat.EdgeException: rt, errcat.ReducerError: rt, errcat.RoutingError: rt,
		errcat.StateValidationError: uc, errcat.InvocationCancelled: rt,
		errcat.FanOutEmpty: rt, errcat.FanOutInvalidCount: rt, errcat.FanOutInvalidConcurrency: rt, errcat.FanOutFieldNotList: rt,
		errcat.FanOutCountModeAmbiguous: rt, errcat.FanOutDegradedUpdateMissingCollectField: rt,
		errcat.ParallelBranchesNoBranches: rt, errcat.ParallelBranchesInvalidBranchSpec: rt, errcat.ParallelBranchesBranchFailed: rt,
		errcat.ProviderAuthentication: uc, errcat.ProviderUnavailable: rt, errcat.ProviderInvalidModel: uc,
		errcat.ProviderModelNotLoaded: rt, errcat.ProviderRateLimit: rt, errcat.ProviderRateLimited: rt, errcat.ProviderTimeout: rt,
		errcat.ProviderInvalidResponse: uc, errcat.ProviderInvalidRequest: uc, errcat.ProviderUnsupportedContentBlock: uc,
		errcat.StructuredOutputInvalid: uc,
		errcat.SessionLoadFailed:       st, errcat.SessionSaveFailed: rt, errcat.SessionStateMigrationMissing: st,
		errcat.SessionStateMigrationChainAmbiguous: st, errcat.SessionStateMigrationFailed: st, errcat.SessionWriteConflict: rt,
		errcat.CheckpointNotFound: rt, errcat.CheckpointRecordInvalid: rt, errcat.CheckpointSaveFailed: rt,
		errcat.CheckpointStateMigrationMissing: rt, errcat.CheckpointStateMigrationChainAmbiguous: rt, errcat.CheckpointStateMigrationFailed: rt,
		errcat.SuspensionPersistenceFailed: st, errcat.SuspensionRecordInvalid: uc, errcat.SuspensionResumePayloadInvalid: uc,
		errcat.SuspensionInUnsupportedContext: rt,
		errcat.HarnessSessionIDUnresolved:     st, errcat.HarnessSignalSubscriptionFailed: rt,
		errcat.HarnessSignalCorrelationFailed: uc, errcat.HarnessPathClassificationAmbiguous: uc,
		errcat.ChatMessageShapeInvalid: uc,
		"some_future_category":         rt, "": rt,
	}
	if len(want) != 59 {
		t.Fatalf("%d categories in the table", len(want))
	}
	for c, b := range want {
		t.Run(string(c), func(t *testing.T) {
			if got := harness.BucketOf(c); got != b {
				t.Errorf("BucketOf(%s) = %s, want %s", c, got, b)
			}
			if c == "" {
				return
			}
			err := errcat.New(c, "failed")
			if gc, gb := harness.Classify(err); gc != c || gb != b {
				t.Errorf("Classify = %s %s, want %s %s", gc, gb, c, b)
			}
		})
	}
	if c, b := harness.Classify(nil); c != "" || b != "" {
		t.Errorf("Classify(nil) = %q %q", c, b)
	}
	if c, b := harness.Classify(errors.New("plain")); c != "" || b != rt {
		t.Errorf("Classify(uncategorized) = %q %q", c, b)
	}
}

func TestRetrySafe(t *testing.T) {
	for c, want := range map[errcat.Category]bool{
		errcat.ProviderUnavailable: true, errcat.ProviderRateLimit: true, errcat.ProviderTimeout: true,
		errcat.SessionSaveFailed: true, errcat.SessionWriteConflict: true, errcat.HarnessSignalSubscriptionFailed: true,
		errcat.NodeException: false, errcat.InvocationCancelled: false, errcat.ProviderInvalidRequest: false,
	} {
		if got := harness.RetrySafe(c); got != want {
			t.Errorf("RetrySafe(%s) = %v, want %v", c, got, want)
		}
	}
}

// A provider failure raised inside a node classifies by its own
// category, not the node_exception carrying it.
func TestHandleClassifiesNodeFailure(t *testing.T) {
	for _, tt := range []struct {
		name   string
		err    error
		cat    errcat.Category
		bucket harness.Bucket
		retry  bool
	}{
		{"provider unavailable", errcat.New(errcat.ProviderUnavailable, "503"), errcat.ProviderUnavailable, harness.RetryableTransient, true},
		{"invalid model", errcat.New(errcat.ProviderInvalidModel, "model 'x' not found"), errcat.ProviderInvalidModel, harness.UserCorrectable, false},
		{"plain error", errors.New("boom"), errcat.NodeException, harness.RetryableTransient, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, func(context.Context, graph.State) (graph.Update, error) { return nil, tt.err })})
			o, err := h.Handle(context.Background(), harness.Transmission{SessionID: "s1"})
			if err == nil || o.Err != err || o.Status != graph.Errored || !errors.Is(err, tt.err) {
				t.Fatalf("outcome %+v, err %v", o, err)
			}
			if o.Category != tt.cat || o.Bucket != tt.bucket {
				t.Errorf("classified %s %s, want %s %s", o.Category, o.Bucket, tt.cat, tt.bucket)
			}
			if o.InvocationID == "" || o.Result == nil {
				t.Errorf("an invoked turn lacks its invocation: %+v", o)
			}
			r := o.Response()
			if r.Shape != harness.ShapeError || r.Payload["retry_safe"] != tt.retry || r.Payload["category"] != string(tt.cat) {
				t.Errorf("response %+v", r)
			}
		})
	}
}

func TestResponse(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, suspending("go"))})

	o, err := h.Handle(ctx, harness.Transmission{SessionID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	want := harness.Response{Shape: harness.ShapeSuspended, Path: harness.PathExistingSession, SessionID: "s1", InvocationID: o.InvocationID,
		Payload: map[string]any{"signal_id": "go", "metadata": map[string]any{"tool": "rm"}}}
	if diff := cmp.Diff(want, o.Response()); diff != "" {
		t.Errorf("suspended response (-want +got):\n%s", diff)
	}

	o, err = h.Handle(ctx, harness.Transmission{Signal: &harness.SignalRef{SignalID: "go", SessionID: "s1"}, Payload: Approved.Set(true)})
	if err != nil {
		t.Fatal(err)
	}
	want = harness.Response{Shape: harness.ShapeCompletion, Path: harness.PathSignalResume, SessionID: "s1", InvocationID: o.InvocationID,
		Payload: map[string]any{"log": []string{}, "approved": true}}
	if diff := cmp.Diff(want, o.Response()); diff != "" {
		t.Errorf("completion response (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name string
		err  error
		want map[string]any
	}{
		{"session terminating", errcat.New(errcat.SessionStateMigrationFailed, "secret detail"), map[string]any{
			"category": "session_state_migration_failed", "bucket": "session_terminating",
			"retry_safe": false, "intervention_required": true, "user_action_required": false}},
		{"retryable", errcat.New(errcat.ProviderRateLimit, "secret detail"), map[string]any{
			"category": "provider_rate_limit", "bucket": "retryable_transient",
			"retry_safe": true, "intervention_required": false, "user_action_required": false}},
		{"retryable but not retry safe", errors.New("secret detail"), map[string]any{
			"category": "node_exception", "bucket": "retryable_transient",
			"retry_safe": false, "intervention_required": false, "user_action_required": false}},
		{"user correctable", errcat.New(errcat.ProviderInvalidModel, "model 'x' not found"), map[string]any{
			"category": "provider_invalid_model", "bucket": "user_correctable",
			"retry_safe": false, "intervention_required": false, "user_action_required": true,
			"diagnostic_message": "model 'x' not found"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, func(context.Context, graph.State) (graph.Update, error) { return nil, tt.err })})
			o, _ := h.Handle(ctx, harness.Transmission{SessionID: "s1"})
			r := o.Response()
			if r.Shape != harness.ShapeError || r.SessionID != "s1" || r.Path != harness.PathExistingSession {
				t.Errorf("response %+v", r)
			}
			if diff := cmp.Diff(tt.want, r.Payload); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
		})
	}

	// A failure before invoking renders too, with no invocation.
	o, _ = h.Handle(ctx, harness.Transmission{Intent: harness.IntentContinue})
	if r := o.Response(); r.Shape != harness.ShapeError || r.InvocationID != "" || r.Payload["category"] != string(errcat.HarnessSessionIDUnresolved) || !o.State().IsZero() {
		t.Errorf("response %+v", r)
	}
}

func TestDiagnostic(t *testing.T) {
	if harness.Diagnostic(nil) != "" {
		t.Error("Diagnostic(nil) is not empty")
	}
	if got := harness.Diagnostic(errors.New("plain")); got != "plain" {
		t.Errorf("Diagnostic(plain) = %q", got)
	}
	if got := harness.Diagnostic(errcat.Wrap(errcat.NodeException, "node failed", errcat.New(errcat.ProviderInvalidModel, "no such model"))); got != "node failed" && got != "no such model" {
		t.Errorf("Diagnostic = %q", got)
	}
	pe := &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: "openai", Op: "complete", StatusCode: 400, Message: "model 'gpt-x' not found"}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		// A provider's error reads as the provider's message, not as
		// the log line "llm: openai complete: … (HTTP 400): …".
		{"provider error", pe, "model 'gpt-x' not found"},
		{"wrapped", fmt.Errorf("agent: calling the model: %w", pe), "model 'gpt-x' not found"},
		{"cause only", &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "openai", Op: "complete", Err: llm.ErrResponseTooLarge}, "the upstream reply exceeds the size bound"},
		// Neither message nor cause: the derived message.
		{"bare", &llm.ProviderError{Cat: errcat.ProviderInvalidRequest, Provider: "openai", Op: "complete"}, "llm: openai complete: provider_invalid_request"},
		// The derived category is an outer error's: its message, not
		// the provider's.
		{"outer category", errcat.Wrap(errcat.ChatMessageShapeInvalid, "content[0] is empty", pe), "content[0] is empty"},
	} {
		if got := harness.Diagnostic(tc.err); got != tc.want {
			t.Errorf("%s: Diagnostic = %q, want %q", tc.name, got, tc.want)
		}
	}
}

// failingCoordinator fails every subscription.
type failingCoordinator struct{ harness.MemoryCoordinator }

var errSubscribe = errors.New("coordinator down")

func (*failingCoordinator) Subscribe(context.Context, harness.Subscription) error {
	return errSubscribe
}

func TestSubscriptionFailure(t *testing.T) {
	h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, suspending("go")), Coordinator: &failingCoordinator{}})
	o, err := h.Handle(context.Background(), harness.Transmission{SessionID: "s1"})
	if o.Status != graph.Errored || !errors.Is(err, errcat.HarnessSignalSubscriptionFailed) || !errors.Is(err, errSubscribe) {
		t.Fatalf("outcome %v, err %v", o.Status, err)
	}
	if o.Category != errcat.HarnessSignalSubscriptionFailed || o.Bucket != harness.RetryableTransient || o.Subscription != nil {
		t.Errorf("outcome %+v", o)
	}
}

func TestTurnSpan(t *testing.T) {
	ctx := context.Background()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()
	h := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, suspending("go")), Tracer: tp.Tracer("test")})
	if _, err := h.Handle(ctx, harness.Transmission{SessionID: "s1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Handle(ctx, harness.Transmission{Signal: &harness.SignalRef{SignalID: "go"}, Payload: Approved.Set(true)}); err != nil {
		t.Fatal(err)
	}
	stateless := newHarness(t, harness.Config{Graph: newGraph(t, nil, nil, nil), Mode: harness.Stateless, Tracer: tp.Tracer("test")})
	if _, err := stateless.Handle(ctx, harness.Transmission{}); err != nil {
		t.Fatal(err)
	}
	spans := rec.Ended()
	var got []map[string]string
	for _, s := range spans {
		if s.Name() != harness.SpanTurn {
			t.Errorf("span %q", s.Name())
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		got = append(got, attrs)
	}
	want := []map[string]string{
		{harness.AttrDispatchPath: "3.2", harness.AttrSessionID: "s1"},
		{harness.AttrDispatchPath: "3.3", harness.AttrSessionID: "s1", harness.AttrSignalID: "go", "openarmature.suspension.metadata.tool": "rm"},
		{harness.AttrDispatchPath: "3.0"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("span attributes (-want +got):\n%s", diff)
	}
}
