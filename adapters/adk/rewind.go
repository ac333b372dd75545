package adk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/adk/v2/session"
	"gorm.io/gorm"
)

// Position returns where ADK session sessionID of user stands: the
// time of its last event, in microseconds since the Unix epoch (the
// precision ADK-Go's database keeps), or 0 when the session holds no
// event or does not exist.
func (e *Engine) Position(ctx context.Context, user, sessionID string) (int64, error) {
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last == nil {
		return 0, err
	}
	return last.Timestamp.UnixMicro(), nil
}

// Rewind removes the events ADK session sessionID of user holds after
// position at (a [Engine.Position]; 0 removes them all, and the session
// with them) and returns how many it removed. The session's state
// becomes what its remaining events made it (ADK-Go's app: and user:
// state, shared with other sessions, is left as it is). It reads only
// the session's last event when there is nothing to remove.
//
// The runtime rewinds a session to the position its last committed turn
// left (adapter.Result.Cursor), so that a turn ADK-Go recorded but the
// runtime did not (the turn failed or was cancelled, the runtime's
// session write failed, or the process died between the two writes)
// does not reach the model again. On a session database, the events go
// and the state is rewritten in one transaction; on the in-memory
// service, the session is built again from the events kept.
func (e *Engine) Rewind(ctx context.Context, user, sessionID string, at int64) (int, error) {
	last, err := e.lastEvent(ctx, user, sessionID)
	if err != nil || last == nil || last.Timestamp.UnixMicro() <= at {
		return 0, err
	}
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return 0, fmt.Errorf("adk: rewind session %q: %w", sessionID, err)
	}
	var kept, dropped []*session.Event
	for ev := range resp.Session.Events().All() {
		if ev.Timestamp.UnixMicro() > at {
			dropped = append(dropped, ev)
		} else {
			kept = append(kept, ev)
		}
	}
	switch {
	case len(dropped) == 0:
		return 0, nil
	case len(kept) == 0:
		err = e.sessions.Delete(ctx, &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	case e.db != nil:
		err = e.rewindSQL(ctx, user, sessionID, kept, dropped)
	default:
		err = e.rebuild(ctx, user, sessionID, kept)
	}
	if err != nil {
		return 0, fmt.Errorf("adk: rewind session %q: %w", sessionID, err)
	}
	return len(dropped), nil
}

// lastEvent returns the session's last event: nil when the session
// holds none or does not exist.
func (e *Engine) lastEvent(ctx context.Context, user, sessionID string) (*session.Event, error) {
	resp, err := e.sessions.Get(ctx, &session.GetRequest{AppName: e.app, UserID: user, SessionID: sessionID, NumRecentEvents: 1})
	if err != nil {
		// The in-memory service fails a Get only for a session it does
		// not hold; the database service wraps GORM's not-found error.
		if e.db == nil || errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("adk: read session %q: %w", sessionID, err)
	}
	var last *session.Event
	for ev := range resp.Session.Events().All() {
		if last == nil || ev.Timestamp.After(last.Timestamp) {
			last = ev
		}
	}
	return last, nil
}

// rewindSQL deletes the dropped events of a session on a session
// database and sets its state to what the kept events made it, in one
// transaction (ADK-Go's tables, as its GORM schema names them).
func (e *Engine) rewindSQL(ctx context.Context, user, sessionID string, kept, dropped []*session.Event) error {
	state, err := json.Marshal(sessionState(kept))
	if err != nil {
		return err
	}
	ph := func(i int) string {
		if e.driver == SessionPostgres {
			return "$" + strconv.Itoa(i)
		}
		return "?"
	}
	tx, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	del := "DELETE FROM events WHERE app_name = " + ph(1) + " AND user_id = " + ph(2) + " AND session_id = " + ph(3) + " AND id = " + ph(4)
	for _, ev := range dropped {
		if _, err := tx.ExecContext(ctx, del, e.app, user, sessionID, ev.ID); err != nil {
			return err
		}
	}
	upd := "UPDATE sessions SET state = " + ph(1) + " WHERE app_name = " + ph(2) + " AND user_id = " + ph(3) + " AND id = " + ph(4)
	if _, err := tx.ExecContext(ctx, upd, string(state), e.app, user, sessionID); err != nil {
		return err
	}
	return tx.Commit()
}

// rebuild replaces a session of a service without transactions (the
// in-memory one) with a session holding only the kept events.
func (e *Engine) rebuild(ctx context.Context, user, sessionID string, kept []*session.Event) error {
	if err := e.sessions.Delete(ctx, &session.DeleteRequest{AppName: e.app, UserID: user, SessionID: sessionID}); err != nil {
		return err
	}
	created, err := e.sessions.Create(ctx, &session.CreateRequest{AppName: e.app, UserID: user, SessionID: sessionID})
	if err != nil {
		return err
	}
	for _, ev := range kept {
		if err := e.sessions.AppendEvent(ctx, created.Session, ev); err != nil {
			return err
		}
	}
	return nil
}

// sessionState is the session-scoped state events leave, as ADK-Go's
// services apply their state deltas: app:, user: and temp: keys are not
// the session's.
func sessionState(events []*session.Event) map[string]any {
	state := map[string]any{}
	for _, ev := range events {
		for k, v := range ev.Actions.StateDelta {
			if strings.HasPrefix(k, session.KeyPrefixApp) || strings.HasPrefix(k, session.KeyPrefixUser) || strings.HasPrefix(k, session.KeyPrefixTemp) {
				continue
			}
			state[k] = v
		}
	}
	return state
}
