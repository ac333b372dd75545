package interleave

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// response is what a target answered an operation, in HTTP terms on
// every target: 200 a turn's outcome, 202 a cancel, 204 a delete, 400 a
// refused payload, 404 nothing to act on; 0 no answer (the process died
// under the request: in doubt).
type response struct {
	status     int
	kind       string // completed | suspended | errored (status 200)
	category   string // errored outcomes
	signal     string // a suspended outcome's signal id
	invocation string
	superseded []string
	replayed   bool
	cancelled  bool // a cancel's answer
}

func (r response) String() string {
	return fmt.Sprintf("%d %s%s sig=%s sup=%v replayed=%v", r.status, r.kind, r.category, r.signal, r.superseded, r.replayed)
}

// op is one operation of a sequence, on one session.
type op struct {
	kind    string // send, resend, signal, badsignal, stalesignal, delete, cancel
	sess    string
	id      string // message id (send, resend)
	content string // send
	sig     string // signal id (signal kinds)
	inv     string // invocation id (cancel)
	approve bool
	// doubt marks the retransmission of a request the process died under:
	// it may have committed before (then it answers as a replay, or 404
	// for a signal) or not (then it runs now).
	doubt bool
}

func (o op) String() string {
	s := o.kind + " " + o.sess
	switch o.kind {
	case "send", "resend":
		s += fmt.Sprintf(" %s %q", o.id, o.content)
	case "signal", "badsignal", "stalesignal":
		s += " " + o.sig
	case "cancel":
		s += " " + o.inv
	}
	if o.doubt {
		s += " (retransmitted after a crash)"
	}
	return s
}

// sentMsg is an acknowledged message: what a retransmission must replay.
type sentMsg struct {
	content, kind string
}

// sessModel is what the test knows a session must be.
type sessModel struct {
	exists     bool
	users      []string // the user messages, in order
	pending    string   // the signal a suspended turn awaits
	pendingInv string
	stale      []string // signals that no longer resume anything
	// decided holds the stale signals whose decision took effect in the
	// session's conversation (sent again: 409, "took effect"), and
	// maybeDecided those that may have (the process died under them);
	// a delete forgets both.
	decided, maybeDecided []string
	sent                  map[string]sentMsg // message id → the acknowledged message
	// runs counts the run records each final status must have (reset
	// by a delete: it deletes the session's runs).
	runs map[runtime.Status]int
	// maybe counts the runs of each status that may be missing: the
	// cancelled ends of suspended runs superseded by a message answered
	// only as a replay (its first attempt may have died before recording
	// them); the completed resume of a signal the process died under,
	// which may instead have died after its approved call's result was
	// saved (the run then ends interrupted, and the signal sent again is
	// refused as spent, as it is after a completed resume).
	maybe map[runtime.Status]int
}

func (s *sessModel) clone() *sessModel {
	c := *s
	c.users = slices.Clone(s.users)
	c.stale = slices.Clone(s.stale)
	c.decided = slices.Clone(s.decided)
	c.maybeDecided = slices.Clone(s.maybeDecided)
	c.sent = maps.Clone(s.sent)
	c.runs = maps.Clone(s.runs)
	c.maybe = maps.Clone(s.maybe)
	return &c
}

// model is the state of every session of a sequence.
type model struct {
	s map[string]*sessModel
}

func newModel(sessions ...string) *model {
	m := &model{s: map[string]*sessModel{}}
	for _, id := range sessions {
		m.s[id] = &sessModel{sent: map[string]sentMsg{}, runs: map[runtime.Status]int{}, maybe: map[runtime.Status]int{}}
	}
	return m
}

func (m *model) clone() *model {
	c := &model{s: make(map[string]*sessModel, len(m.s))}
	for k, v := range m.s {
		c.s[k] = v.clone()
	}
	return c
}

// expectedKind is what the demo agent does with a message.
func expectedKind(content string) string {
	if strings.Contains(content, "refund") {
		return "suspended"
	}
	return "completed"
}

// apply checks r against what the model predicts for o and moves the
// model on. An error says how the answer breaks the contract.
func (m *model) apply(o op, r response) error {
	s := m.s[o.sess]
	want := func(status int, what string) error {
		if r.status != status {
			return fmt.Errorf("%s: answered %v, want %d (%s)", o, r, status, what)
		}
		return nil
	}
	// notAwaited checks the answer to a signal nothing awaits: 409 when
	// a decision on it took effect in the session's conversation, else
	// 404.
	notAwaited := func() error {
		switch {
		case slices.Contains(s.decided, o.sig):
			return want(409, "the decision was given and took effect")
		case slices.Contains(s.maybeDecided, o.sig) && (r.status == 404 || r.status == 409):
			return nil
		}
		return want(404, "nothing awaits the signal")
	}
	switch o.kind {
	case "send", "resend":
		prev, known := s.sent[o.id]
		if known && !o.doubt {
			// A retransmission: the recorded answer, nothing runs.
			if r.status != 200 || !r.replayed || r.kind != prev.kind {
				return fmt.Errorf("%s: answered %v, want the recorded %s, replayed", o, r, prev.kind)
			}
			return nil
		}
		kind := expectedKind(o.content)
		if r.status != 200 || r.kind != kind {
			return fmt.Errorf("%s: answered %v, want 200 %s", o, r, kind)
		}
		if r.replayed && !o.doubt {
			return fmt.Errorf("%s: a new message answered as a replay", o)
		}
		if !r.replayed { // a replay's outcome does not record what it superseded
			wantSup := []string(nil)
			if s.pending != "" {
				wantSup = []string{s.pending}
			}
			if !slices.Equal(r.superseded, wantSup) {
				return fmt.Errorf("%s: superseded %v, want %v", o, r.superseded, wantSup)
			}
		}
		if s.pending != "" {
			s.stale = append(s.stale, s.pending)
			// The superseded suspended run ends with a cancelled run of
			// its own.
			if r.replayed {
				s.maybe[runtime.StatusCancelled]++
			} else {
				s.runs[runtime.StatusCancelled]++
			}
		}
		s.pending, s.pendingInv = "", ""
		if kind == "suspended" {
			if r.signal == "" || r.invocation == "" {
				return fmt.Errorf("%s: a suspended outcome without its signal: %v", o, r)
			}
			s.pending, s.pendingInv = r.signal, r.invocation
		}
		s.exists = true
		s.users = append(s.users, o.content)
		s.sent[o.id] = sentMsg{o.content, kind}
		s.runs[runtime.Status(kind)]++
	case "signal":
		if !s.exists || s.pending == "" || o.sig != s.pending {
			return notAwaited()
		}
		if o.doubt && (r.status == 404 || r.status == 409) {
			// It resumed the turn before the crash, or it ran the approved
			// call and saved its result, then died (409: the decision took
			// effect).
			s.maybe[runtime.StatusCompleted]++
			s.maybeDecided = append(s.maybeDecided, s.pending)
		} else if r.status != 200 || r.kind != "completed" {
			return fmt.Errorf("%s: answered %v, want 200 completed", o, r)
		} else {
			s.runs[runtime.StatusCompleted]++
			s.decided = append(s.decided, s.pending)
		}
		s.stale = append(s.stale, s.pending)
		s.pending, s.pendingInv = "", ""
	case "badsignal":
		if !s.exists || s.pending == "" || o.sig != s.pending {
			return notAwaited()
		}
		return want(400, "a malformed approval is refused and stays pending")
	case "stalesignal":
		if s.exists && s.pending != "" && o.sig == s.pending {
			// Signal ids repeat in a session deleted and used again: this
			// one names the live suspension after all.
			o.kind = "signal"
			return m.apply(o, r)
		}
		return notAwaited()
	case "delete":
		switch {
		case o.doubt && (r.status == 204 || r.status == 404):
		case s.exists:
			if err := want(204, "the session exists"); err != nil {
				return err
			}
		case r.status != 204 && r.status != 404: // deleting no session succeeds (or is 404)
			return want(204, "no such session")
		}
		if s.pending != "" {
			s.stale = append(s.stale, s.pending)
		}
		*s = sessModel{sent: map[string]sentMsg{}, runs: map[runtime.Status]int{}, stale: s.stale, maybe: map[runtime.Status]int{}}
	case "cancel":
		if s.pending == "" || o.inv != s.pendingInv {
			if r.status == 202 && r.cancelled {
				return fmt.Errorf("%s: cancelled a turn that no longer awaits its signal", o)
			}
			return nil
		}
		if r.status != 202 || !r.cancelled {
			return fmt.Errorf("%s: answered %v, want 202 cancelled", o, r)
		}
		s.stale = append(s.stale, s.pending)
		s.pending, s.pendingInv = "", ""
		s.runs[runtime.StatusCancelled]++
	default:
		return fmt.Errorf("unknown op %q", o.kind)
	}
	return nil
}

// checkHistory compares a session's stored history with the model: the
// same user messages in the same order, each once; valid for every
// provider; no user message after an unanswered tool call.
func checkHistory(s *sessModel, hist []llm.Message, exists bool) error {
	if exists != s.exists {
		return fmt.Errorf("the session exists: %v, want %v", exists, s.exists)
	}
	var users []string
	for _, m := range hist {
		if m.Role == llm.RoleUser {
			users = append(users, m.Text())
		}
	}
	if !slices.Equal(users, s.users) {
		return fmt.Errorf("user messages in the history:\n  %q\nwant:\n  %q", users, s.users)
	}
	if err := llm.CheckHistory(nil, hist); err != nil {
		return fmt.Errorf("the history is invalid: %w", err)
	}
	open := map[string]bool{}
	for i, m := range hist {
		switch m.Role {
		case llm.RoleAssistant:
			for _, c := range m.ToolCalls {
				open[c.ID] = true
			}
		case llm.RoleTool:
			delete(open, m.ToolCallID)
		case llm.RoleUser:
			if len(open) > 0 {
				return fmt.Errorf("messages[%d]: a user message follows unanswered tool calls %v", i, slices.Sorted(maps.Keys(open)))
			}
		}
	}
	return nil
}

// checkRuns compares a session's run records with the model: as many
// completed, suspended and cancelled runs as acknowledged turns of each
// kind, no run left started, and failed runs only from crashes.
func checkRuns(s *sessModel, runs []runtime.Run, crashes int) error {
	got := map[runtime.Status]int{}
	interrupted := 0
	for _, r := range runs {
		got[r.Status]++
		if r.Status != runtime.StatusFailed {
			continue
		}
		cat := ""
		if r.Error != nil {
			cat = r.Error.Category
		}
		switch cat {
		case runtime.CategoryInterrupted:
			interrupted++
		case "harness_signal_correlation_failed":
			// A signal that lost a race with the message superseding its
			// turn (it was checked, then the turn was gone).
		default:
			return fmt.Errorf("run %s failed (%s): no turn here fails", r.ID, cat)
		}
	}
	if got[runtime.StatusStarted] > 0 {
		return fmt.Errorf("%d runs left started", got[runtime.StatusStarted])
	}
	for _, st := range []runtime.Status{runtime.StatusCompleted, runtime.StatusSuspended, runtime.StatusCancelled} {
		if got[st] >= s.runs[st] && got[st] <= s.runs[st]+s.maybe[st] {
			continue
		}
		if got[st] != s.runs[st] {
			return fmt.Errorf("%d %s runs, want %d (runs by status %v)", got[st], st, s.runs[st], got)
		}
	}
	if interrupted > crashes {
		return fmt.Errorf("%d interrupted runs after %d crashes", interrupted, crashes)
	}
	return nil
}
