package conformance

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// invariants evaluates a chat case's invariants by name. Each is checked
// against what the run recorded: outcomes, the stored history before and
// after every turn, store and node-body counters, listener callbacks.
func (r *hcChatRun) invariants(ctx context.Context, body *Value) error {
	iv, ok := body.Get("invariants")
	if !ok {
		return nil
	}
	uses, err := hcInvariantUses(iv)
	if err != nil {
		return err
	}
	flags := map[string]hcFlag{
		"send_returns_chat_turn_outcome": r.eachTurn(func(t *hcTurn) error {
			switch t.out.(type) {
			case *chat.Completed, *chat.Errored, *chat.Suspended:
				return nil
			}
			return fmt.Errorf("send returned %T", t.out)
		}),
		"replies_contain_only_new_messages_appended_during_turn": r.eachTurn(tailIsNew),
		"replies_field_contains_only_current_turn_new_messages":  r.eachTurn(tailIsNew),
		"replies_list_preserves_graph_execution_order":           r.eachTurn(tailIsNew),
		"turn_2_loads_turn_1_history": func(context.Context) error {
			if len(r.turns) < 2 {
				return fmt.Errorf("fewer than two turns")
			}
			a, b := r.turns[0], r.turns[1]
			if b.out.Info().Path != harness.PathExistingSession {
				return fmt.Errorf("turn 2 took path %q", b.out.Info().Path)
			}
			return prefixOf(a.after, b.after)
		},
		"session_messages_field_accumulates_via_append_reducer": r.eachTurn(func(t *hcTurn) error { return prefixOf(t.before, t.after) }),
		"tool_calls_lives_on_assistant_message_not_in_content_blocks": r.eachReply(func(m llm.Message) error {
			if len(m.ToolCalls) > 0 && m.Role != llm.RoleAssistant {
				return fmt.Errorf("a %s message carries tool_calls", m.Role)
			}
			for _, b := range m.Content.Blocks() {
				if !b.Type.Valid() {
					return fmt.Errorf("content block of type %q", b.Type)
				}
			}
			return nil
		}),
		"tool_role_message_has_tool_call_id_and_string_content": r.eachReply(func(m llm.Message) error {
			if m.Role != llm.RoleTool {
				return nil
			}
			if m.ToolCallID == "" || !m.Content.IsText() {
				return fmt.Errorf("tool message %s lacks a tool_call_id or string content", formatValue(nativeMessage(m)))
			}
			return nil
		}),
		"multimodal_content_blocks_preserved_in_history": r.eachTurn(func(t *hcTurn) error {
			if len(t.after) <= len(t.before) {
				return fmt.Errorf("the user message was not stored")
			}
			if !deepEqual(normalize(nativeMessage(t.user)), normalize(nativeMessage(t.after[len(t.before)]))) {
				return fmt.Errorf("stored %s, sent %s", formatValue(nativeMessage(t.after[len(t.before)])), formatValue(nativeMessage(t.user)))
			}
			return nil
		}),
		"content_block_types_match_llm_provider_3_1_set": r.eachTurn(func(t *hcTurn) error {
			for _, m := range t.after {
				for _, b := range m.Content.Blocks() {
					switch b.Type {
					case llm.BlockText, llm.BlockImage, llm.BlockThinking, llm.BlockRedactedThinking:
					default:
						return fmt.Errorf("block type %q", b.Type)
					}
				}
			}
			return nil
		}),
		"pending_message_extracted_from_state_messages_tail": r.suspendedTurn(func(t *hcTurn, s *chat.Suspended) error {
			return sameMessages(s.PendingMessages, tailAfter(t))
		}),
		"chat_harness_does_not_block_on_suspended_outcome": r.suspendedTurn(func(t *hcTurn, s *chat.Suspended) error {
			if !pausedRecordExists(context.Background(), r.hg, s.InvocationID) {
				return fmt.Errorf("send returned but no paused record is stored")
			}
			return nil
		}),
		"no_chat_specific_engine_hook_required_for_pending_message": r.suspendedTurn(func(t *hcTurn, s *chat.Suspended) error {
			// The graph is built from plain update and suspend nodes only;
			// the pending message must have come through them.
			if len(s.PendingMessages) == 0 || t.bodyRuns < 2 {
				return fmt.Errorf("no pending message from an upstream update node (%d bodies ran)", t.bodyRuns)
			}
			return nil
		}),
		"compose_pending_state_persisted_before_suspend_node_runs": r.suspendedTurn(func(t *hcTurn, s *chat.Suspended) error {
			return sameMessages(s.PendingMessages, tailAfter(t))
		}),
		"listener_fires_exactly_once_per_resumed_turn": func(context.Context) error {
			for name, cbs := range r.callbacks {
				if len(cbs) != len(r.resumedArrivals(r.listenSID[name])) {
					return fmt.Errorf("listener %s fired %d times for %d resumed turns", name, len(cbs), len(r.resumedArrivals(r.listenSID[name])))
				}
			}
			for _, t := range r.turns {
				if t.callbacksDuring != 0 {
					return fmt.Errorf("a listener fired during Send of turn %s", t.name)
				}
			}
			return r.anyListener()
		},
		"listener_callback_carries_post_resume_chat_turn_outcome": func(context.Context) error {
			for name, cbs := range r.callbacks {
				for _, o := range cbs {
					if !o.Info().Resumed || o.Info().Path != harness.PathSignalResume {
						return fmt.Errorf("listener %s got a %s outcome that is not a resumed turn's", name, chatKind(o))
					}
				}
			}
			return r.anyListener()
		},
		"next_send_call_does_not_consume_the_post_resume_reply": r.nextSendDoesNotConsume,
		"error_bucket_routes_to_harness_section_7_1":            r.lastBucket(harness.SessionTerminating),
		"error_bucket_routes_to_harness_section_7_2":            r.lastBucket(harness.RetryableTransient),
		"error_bucket_routes_to_harness_section_7_3":            r.lastBucket(harness.UserCorrectable),
		"chat_message_shape_invalid_routes_to_user_correctable": func(ctx context.Context) error {
			e, err := r.lastErrored()
			if err != nil {
				return err
			}
			if e.Category != errcat.ChatMessageShapeInvalid || e.Bucket != harness.UserCorrectable {
				return fmt.Errorf("category %s in bucket %s", e.Category, e.Bucket)
			}
			return nil
		},
		"reply_role_is_system": func(context.Context) error {
			e, err := r.lastErrored()
			if err != nil {
				return err
			}
			if e.Reply.Role != llm.RoleSystem {
				return fmt.Errorf("reply role %s", e.Reply.Role)
			}
			return nil
		},
		"reply_content_includes_upstream_diagnostic": func(context.Context) error {
			e, err := r.lastErrored()
			if err != nil {
				return err
			}
			d := harness.Diagnostic(e.Err)
			if d == "" || !containsFold(e.Reply.Text(), d) {
				return fmt.Errorf("reply %q lacks the diagnostic %q", e.Reply.Text(), d)
			}
			return nil
		},
		"chat_harness_does_not_invoke_graph_when_session_load_fails": r.lastTurnNoBody,
		"graph_body_not_invoked_when_message_validation_fails":       r.lastTurnNoBody,
		"message_validation_runs_at_send_api_boundary_before_session_load": func(context.Context) error {
			t := r.turns[len(r.turns)-1]
			if t.loads != 0 {
				return fmt.Errorf("the session store was loaded %d times", t.loads)
			}
			return nil
		},
		"session_state_preserved_after_transient_error": func(context.Context) error {
			t := r.turns[len(r.turns)-1]
			if _, ok := t.out.(*chat.Errored); !ok {
				return fmt.Errorf("the turn did not error")
			}
			if err := sameMessages(t.before, t.after); err != nil {
				return fmt.Errorf("history changed across the errored turn: %w", err)
			}
			return nil
		},
	}
	for _, u := range uses {
		f, ok := flags[u.Key]
		if !ok {
			return &DirectiveUnknownError{Name: "invariant " + u.Key, Pos: u.Pos}
		}
		if err := f(ctx); err != nil {
			return fmt.Errorf("invariant %s: %w", u.Key, err)
		}
	}
	return nil
}

func (r *hcChatRun) eachTurn(f func(*hcTurn) error) hcFlag {
	return func(context.Context) error {
		var errs []error
		for _, t := range r.turns {
			if err := f(t); err != nil {
				errs = append(errs, fmt.Errorf("turn %s: %w", t.name, err))
			}
		}
		return errors.Join(errs...)
	}
}

func (r *hcChatRun) eachReply(f func(llm.Message) error) hcFlag {
	return r.eachTurn(func(t *hcTurn) error {
		c, ok := t.out.(*chat.Completed)
		if !ok {
			return nil
		}
		for _, m := range c.Replies {
			if err := f(m); err != nil {
				return err
			}
		}
		return nil
	})
}

func (r *hcChatRun) suspendedTurn(f func(*hcTurn, *chat.Suspended) error) hcFlag {
	return func(context.Context) error {
		for _, t := range r.turns {
			if s, ok := t.out.(*chat.Suspended); ok {
				return f(t, s)
			}
		}
		return fmt.Errorf("no turn suspended")
	}
}

func (r *hcChatRun) lastErrored() (*chat.Errored, error) {
	t := r.turns[len(r.turns)-1]
	e, ok := t.out.(*chat.Errored)
	if !ok {
		return nil, fmt.Errorf("the last turn is %s, not errored", chatKind(t.out))
	}
	return e, nil
}

func (r *hcChatRun) lastBucket(b harness.Bucket) hcFlag {
	return func(context.Context) error {
		e, err := r.lastErrored()
		if err != nil {
			return err
		}
		if e.Bucket != b {
			return fmt.Errorf("bucket %s, want %s", e.Bucket, b)
		}
		return nil
	}
}

func (r *hcChatRun) lastTurnNoBody(context.Context) error {
	t := r.turns[len(r.turns)-1]
	if t.bodyRuns != 0 {
		return fmt.Errorf("%d node bodies ran", t.bodyRuns)
	}
	return nil
}

func (r *hcChatRun) anyListener() error {
	if len(r.listenSID) == 0 {
		return fmt.Errorf("no listener was subscribed")
	}
	return nil
}

// resumedArrivals returns the arrivals that resumed a turn of sessionID.
func (r *hcChatRun) resumedArrivals(sessionID string) []*hcArrival {
	var out []*hcArrival
	for _, a := range r.arrivals {
		if a.out.Info().SessionID == sessionID && a.out.Info().InvocationID != "" {
			if _, errored := a.out.(*chat.Errored); !errored {
				out = append(out, a)
			}
		}
	}
	return out
}

// nextSendDoesNotConsume sends one more message to each listened session
// after the signals: its outcome must carry only its own replies, hand
// over no resumed outcome, and fire no listener.
func (r *hcChatRun) nextSendDoesNotConsume(ctx context.Context) error {
	if err := r.anyListener(); err != nil {
		return err
	}
	for _, sid := range r.listenSID {
		before, _ := r.history(ctx, sid)
		cb0 := r.totalCallbacks()
		out, _ := r.c.Send(ctx, sid, llm.UserText("next message"))
		if r.totalCallbacks() != cb0 {
			return fmt.Errorf("the next Send fired a listener")
		}
		if len(out.Info().Delivered) != 0 {
			return fmt.Errorf("the next Send was handed %d resumed outcomes", len(out.Info().Delivered))
		}
		if c, ok := out.(*chat.Completed); ok {
			after, _ := r.history(ctx, sid)
			if err := sameMessages(c.Replies, after[min(len(before)+1, len(after)):]); err != nil {
				return fmt.Errorf("the next Send's replies are not its own: %w", err)
			}
		}
	}
	return nil
}

// tailIsNew checks a completed turn's replies are exactly the messages
// stored after the user's message in this turn.
func tailIsNew(t *hcTurn) error {
	c, ok := t.out.(*chat.Completed)
	if !ok {
		return nil
	}
	return sameMessages(c.Replies, tailAfter(t))
}

// tailAfter is what a turn stored after the user's message.
func tailAfter(t *hcTurn) []llm.Message {
	from := len(t.before) + 1
	if from > len(t.after) {
		return nil
	}
	return t.after[from:]
}

func sameMessages(a, b []llm.Message) error {
	na, nb := normalize(nativeMessages(a)), normalize(nativeMessages(b))
	if !deepEqual(na, nb) {
		return fmt.Errorf("%s != %s", formatValue(na), formatValue(nb))
	}
	return nil
}

func prefixOf(prefix, list []llm.Message) error {
	if len(prefix) > len(list) {
		return fmt.Errorf("history shrank from %d to %d messages", len(prefix), len(list))
	}
	return sameMessages(prefix, list[:len(prefix)])
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
