package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// chatSuite runs the harness-chat fixtures through chat.Harness: Send,
// Subscribe and Signal.
type chatSuite struct{}

// hcTurn is one executed chat turn.
type hcTurn struct {
	name      string
	sessionID string
	user      llm.Message
	out       chat.Outcome
	loads     int // store loads during the turn
	bodyRuns  int // node bodies run during the turn
	before    []llm.Message
	after     []llm.Message
	hadRecord bool
	// callbacksDuring counts listener callbacks fired while Send ran.
	callbacksDuring int
}

// hcArrival is one executed signal arrival.
type hcArrival struct {
	signalID  string
	out       chat.Outcome
	callbacks map[string][]chat.Outcome // new callbacks per listener
}

type hcChatRun struct {
	hg        *hcGraph
	c         *chat.Harness
	turns     []*hcTurn
	arrivals  []*hcArrival
	mu        sync.Mutex
	callbacks map[string][]chat.Outcome // per listener name
	listenSID map[string]string         // listener name -> session
}

var hcTurnKeys = []string{"name", "session_id", "user_message", "subscribe_listener", "expected"}

var hcTurnExpectKeys = []string{"outcome", "replies", "pending_messages", "signal_descriptor", "error_bucket",
	"error_category", "reply", "final_state", "dispatch_path"}

// RunCase runs one harness-chat case.
func (chatSuite) RunCase(ctx context.Context, c *Case) error {
	hg, err := buildHarnessGraph(c.Body, hcChatKeys)
	if err != nil {
		return err
	}
	if hg.mode != harness.Sessioned {
		return schemaErrorf(c.Body.Pos, "the chat harness is sessioned only (harness-chat §1)")
	}
	if hg.store == nil {
		return schemaErrorf(c.Body.Pos, "a chat case needs a session_store")
	}
	ch, err := chat.New(chat.Config{Graph: hg.g, Coordinator: hg.coord})
	if err != nil {
		return err
	}
	r := &hcChatRun{hg: hg, c: ch, callbacks: map[string][]chat.Outcome{}, listenSID: map[string]string{}}
	m := newMatcher()
	turns, ok := c.Body.Get("chat_turns")
	if !ok || turns.Kind != KindList || len(turns.Items) == 0 {
		return schemaErrorf(c.Body.Pos, "chat_turns: must be a non-empty list")
	}
	for i, item := range turns.Items {
		if err := hcStrictKeys(item, "chat_turn", hcTurnKeys...); err != nil {
			return err
		}
		t, err := r.send(ctx, item)
		if err != nil {
			return fmt.Errorf("chat turn %d: %w", i, err)
		}
		r.turns = append(r.turns, t)
		if ev, ok := item.Get("expected"); ok {
			if err := r.assertTurn(m, t, ev); err != nil {
				return fmt.Errorf("chat turn %s: %w", t.name, err)
			}
		}
	}
	if arr, ok := c.Body.Get("signal_arrivals"); ok {
		for _, item := range arr.Items {
			if err := r.arrive(ctx, m, item); err != nil {
				return err
			}
		}
	}
	return r.invariants(ctx, c.Body)
}

// send runs one turn.
func (r *hcChatRun) send(ctx context.Context, item *Value) (*hcTurn, error) {
	t := &hcTurn{}
	if n, ok := item.Get("name"); ok {
		t.name = n.Str
	}
	if s, ok := item.Get("session_id"); ok {
		t.sessionID = s.Str
	}
	uv, ok := item.Get("user_message")
	if !ok {
		return nil, schemaErrorf(item.Pos, "user_message missing")
	}
	// A malformed message still decodes (validation is the harness's
	// job); only undecodable YAML is a fixture error.
	msg, err := hcMessage(uv)
	if err != nil {
		return nil, schemaErrorf(uv.Pos, "user_message: %v", err)
	}
	t.user = msg
	if lv, ok := item.Get("subscribe_listener"); ok {
		name := lv.Str
		r.listenSID[name] = t.sessionID
		r.c.Subscribe(t.sessionID, func(o chat.Outcome) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.callbacks[name] = append(r.callbacks[name], o)
		})
	}
	t.before, t.hadRecord = r.history(ctx, t.sessionID)
	l0, _ := r.hg.store.counts()
	b0 := r.hg.bodyRuns.count()
	cb0 := r.totalCallbacks()
	t.out, _ = r.c.Send(ctx, t.sessionID, msg)
	t.callbacksDuring = r.totalCallbacks() - cb0
	l1, _ := r.hg.store.counts()
	t.loads, t.bodyRuns = l1-l0, r.hg.bodyRuns.count()-b0
	t.after, _ = r.history(ctx, t.sessionID)
	return t, nil
}

func (r *hcChatRun) totalCallbacks() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, cbs := range r.callbacks {
		n += len(cbs)
	}
	return n
}

// history reads the session's stored messages directly from the backing
// store (bypassing the counters and the fault injection).
func (r *hcChatRun) history(ctx context.Context, sessionID string) ([]llm.Message, bool) {
	rec, err := r.hg.store.Store.Load(ctx, session.LoadRequest{SessionID: sessionID})
	if err != nil || rec == nil {
		return nil, false
	}
	raw, ok := rec.State[chat.MessagesField]
	if !ok {
		return nil, true
	}
	var msgs []llm.Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, true
	}
	return msgs, true
}

// assertTurn checks a turn's expected block.
func (r *hcChatRun) assertTurn(m *matcher, t *hcTurn, ev *Value) error {
	if err := hcStrictKeys(ev, "expected", hcTurnExpectKeys...); err != nil {
		return err
	}
	return assertChatOutcome(m, "", t.out, ev, t.after)
}

// assertChatOutcome checks an outcome against an expected block; history
// is the session's stored messages afterwards (for final_state).
func assertChatOutcome(m *matcher, prefix string, out chat.Outcome, ev *Value, history []llm.Message) error {
	var errs []error
	fail := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, f := range ev.Fields {
		path := prefix + f.Key
		want := f.Value.Native()
		switch f.Key {
		case "outcome":
			fail(m.match(path, want, chatKind(out), exact))
		case "dispatch_path":
			fail(m.match(path, want, string(out.Info().Path), exact))
		case "replies":
			c, ok := out.(*chat.Completed)
			if !ok {
				fail(fmt.Errorf("%s: the outcome is %s", path, chatKind(out)))
				continue
			}
			fail(matchMessages(m, path, f.Value, c.Replies))
		case "pending_messages":
			s, ok := out.(*chat.Suspended)
			if !ok {
				fail(fmt.Errorf("%s: the outcome is %s", path, chatKind(out)))
				continue
			}
			fail(matchMessages(m, path, f.Value, s.PendingMessages))
		case "signal_descriptor":
			s, ok := out.(*chat.Suspended)
			if !ok {
				fail(fmt.Errorf("%s: the outcome is %s", path, chatKind(out)))
				continue
			}
			fail(m.match(path, want, descriptorMap(s.Descriptor), exact))
		case "error_bucket", "error_category", "reply":
			e, ok := out.(*chat.Errored)
			if !ok {
				fail(fmt.Errorf("%s: the outcome is %s", path, chatKind(out)))
				continue
			}
			switch f.Key {
			case "error_bucket":
				fail(m.match(path, want, string(e.Bucket), exact))
			case "error_category":
				fail(m.match(path, want, string(e.Category), exact))
				if !errors.Is(e.Err, errcat.Category(f.Value.Str)) {
					fail(fmt.Errorf("%s: errors.Is(err, %s) is false for %v", path, f.Value.Str, e.Err))
				}
			default:
				fail(matchReply(m, path, f.Value, e.Reply))
			}
		case "final_state":
			fail(matchFinalHistory(m, path, f.Value, history))
		case "listener":
			// checked by the caller
		default:
			fail(&DirectiveUnknownError{Name: path, Pos: f.Pos})
		}
	}
	return errors.Join(errs...)
}

func chatKind(o chat.Outcome) string {
	switch o.(type) {
	case *chat.Completed:
		return "completed"
	case *chat.Suspended:
		return "suspended"
	case *chat.Errored:
		return "errored"
	}
	return fmt.Sprintf("%T", o)
}

// matchMessages matches a list of expected messages, each as a subset of
// the message's fields (a fixture may omit an empty content).
func matchMessages(m *matcher, path string, want *Value, got []llm.Message) error {
	if want.Kind != KindList {
		return schemaErrorf(want.Pos, "%s: must be a list", path)
	}
	if len(want.Items) != len(got) {
		return fmt.Errorf("%s: want %d messages, got %d: %s", path, len(want.Items), len(got), formatValue(nativeMessages(got)))
	}
	var errs []error
	for i, w := range want.Items {
		if err := m.match(fmt.Sprintf("%s[%d]", path, i), w.Native(), nativeMessage(got[i]), subsetTop); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// matchReply checks an errored reply: role, and content by exact value,
// template substring or included substrings (case-insensitive: the spec
// fixes the framing, not the casing).
func matchReply(m *matcher, path string, want *Value, got llm.Message) error {
	if err := hcStrictKeys(want, path, "role", "content", "content_matches_template", "content_includes"); err != nil {
		return err
	}
	text := got.Text()
	lower := strings.ToLower(text)
	var errs []error
	for _, f := range want.Fields {
		switch f.Key {
		case "role":
			errs = append(errs, m.match(path+".role", f.Value.Native(), string(got.Role), exact))
		case "content":
			errs = append(errs, m.match(path+".content", f.Value.Native(), text, exact))
		case "content_matches_template":
			if !strings.Contains(lower, strings.ToLower(f.Value.Str)) {
				errs = append(errs, fmt.Errorf("%s.content %q does not match the template %q", path, text, f.Value.Str))
			}
		case "content_includes":
			for _, s := range f.Value.Items {
				if !strings.Contains(lower, strings.ToLower(s.Str)) {
					errs = append(errs, fmt.Errorf("%s.content %q does not include %q", path, text, s.Str))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// matchFinalHistory checks final_state: messages_count and the ordered
// messages_history_contains subsequence, against the stored session.
func matchFinalHistory(m *matcher, path string, want *Value, history []llm.Message) error {
	if err := hcStrictKeys(want, path, "messages_count", "messages_history_contains"); err != nil {
		return err
	}
	var errs []error
	if c, ok := want.Get("messages_count"); ok {
		errs = append(errs, m.match(path+".messages_count", c.Native(), len(history), exact))
	}
	if hc, ok := want.Get("messages_history_contains"); ok {
		j := 0
		for i, w := range hc.Items {
			found := false
			for ; j < len(history); j++ {
				if m.match("", w.Native(), nativeMessage(history[j]), subsetTop) == nil {
					found, j = true, j+1
					break
				}
			}
			if !found {
				errs = append(errs, fmt.Errorf("%s.messages_history_contains[%d] %s: not found in order in %s",
					path, i, formatValue(w.Native()), formatValue(nativeMessages(history))))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// arrive delivers one signal and checks the listener callback.
func (r *hcChatRun) arrive(ctx context.Context, m *matcher, item *Value) error {
	if err := hcStrictKeys(item, "signal_arrival", "signal_id", "signal_payload", "expected_listener_callback"); err != nil {
		return err
	}
	a := &hcArrival{callbacks: map[string][]chat.Outcome{}}
	if s, ok := item.Get("signal_id"); ok {
		a.signalID = s.Str
	}
	var payload graph.Update
	if pv, ok := item.Get("signal_payload"); ok {
		p, ok := pv.Native().(map[string]any)
		if !ok {
			return schemaErrorf(pv.Pos, "signal_payload: must be a mapping")
		}
		payload = p
	}
	before := r.snapshotCallbacks()
	a.out, _ = r.c.Signal(ctx, chat.Signal{SignalID: a.signalID, Payload: payload})
	r.mu.Lock()
	for name, cbs := range r.callbacks {
		if n := len(cbs) - before[name]; n > 0 {
			a.callbacks[name] = cbs[before[name]:]
		}
	}
	r.mu.Unlock()
	r.arrivals = append(r.arrivals, a)
	ev, ok := item.Get("expected_listener_callback")
	if !ok {
		return nil
	}
	if err := hcStrictKeys(ev, "expected_listener_callback", "listener", "outcome", "replies", "pending_messages",
		"signal_descriptor", "error_bucket", "error_category", "reply", "final_state", "dispatch_path"); err != nil {
		return err
	}
	lv, ok := ev.Get("listener")
	if !ok {
		return schemaErrorf(ev.Pos, "expected_listener_callback.listener missing")
	}
	got := a.callbacks[lv.Str]
	if len(got) != 1 {
		return fmt.Errorf("signal %s: listener %s fired %d times, want once (signal outcome %s)", a.signalID, lv.Str, len(got), chatKind(a.out))
	}
	history, _ := r.history(ctx, r.listenSID[lv.Str])
	if err := assertChatOutcome(m, "expected_listener_callback.", got[0], ev, history); err != nil {
		return fmt.Errorf("signal %s: %w", a.signalID, err)
	}
	return nil
}

func (r *hcChatRun) snapshotCallbacks() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int, len(r.callbacks))
	for k, v := range r.callbacks {
		out[k] = len(v)
	}
	return out
}
