package adk_test

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/adapter/adaptertest"
	"github.com/armature-go/armature/adapters/adk"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestRollback: ADK-Go's session holds exactly the conversation the
// runtime committed after a failed turn, a turn whose session write
// failed (the process dying between ADK-Go's write and the runtime's is
// the same for ADK-Go) and a failed resume, across a restart: on SQLite
// and PostgreSQL, and in memory, where the restart loses ADK-Go's
// session and the runtime's history is seeded in its place. Before the
// adapter kept a cursor, a turn sent again after a 429 reached the model
// twice and an uncommitted turn stayed in the model's context; after a
// resume that failed once the approved call ran, the model is told the
// call's result once (the runtime saved it with ADK-Go's position).
func TestRollback(t *testing.T) {
	t.Run("memory", func(t *testing.T) { adaptertest.CheckRollback(t, adk.Name, adk.Factory, "", true) })
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "adk.db")
		adaptertest.CheckRollback(t, adk.Name, adk.Factory, `{"session":{"driver":"sqlite","path":`+strconv.Quote(path)+`}}`, true)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
		adaptertest.CheckRollback(t, adk.Name, adk.Factory, `{"session":{"driver":"postgres","url_env":"ADK_TEST_DATABASE_URL"}}`, true)
	})
}

// TestRandomTurns: random failed, cancelled, suspended, resumed and
// superseded turns and restarts on one session; the model is sent the
// committed conversation at every call (the seed is logged).
func TestRandomTurns(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory, Restart: true, Durable: true})
	})
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "adk.db")
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory,
			Section: `{"session":{"driver":"sqlite","path":` + strconv.Quote(path) + `}}`, Restart: true, Durable: true})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
		adaptertest.CheckRandomTurns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory,
			Section: `{"session":{"driver":"postgres","url_env":"ADK_TEST_DATABASE_URL"}}`, Restart: true, Durable: true})
	})
}

// TestConfirmationAfterLoss: an approval pending when ADK-Go's in-memory
// sessions are lost (a restart) still resumes the turn: the runtime's
// history and the pending confirmation are seeded under their original
// ids, the tool runs once, and the model is sent the committed
// conversation, without the runtime's approval prompt.
func TestConfirmationAfterLoss(t *testing.T) {
	ctx := context.Background()
	m := adaptertest.NewModel()
	newEngine := func() *adk.Engine {
		e, err := adk.NewEngine(ctx, adk.Config{Tools: demo.Tools(), LLM: adk.NewProviderModel("m", m)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	a := &adk.Adapter{Engine: newEngine()}
	h := adaptertest.Harness(t, a, &adapter.Agent{ID: "x", Backend: adk.Name, Tools: demo.Tools()}, session.NewMemoryStore(session.MemoryConfig{}))
	if out, _ := h.Send(ctx, "acme/s", llm.UserText("hello")); !isCompleted(out) {
		t.Fatalf("hello: %#v", out)
	}
	out, _ := h.Send(ctx, "acme/s", llm.UserText("please refund order 7"))
	s, ok := out.(*chat.Suspended)
	if !ok {
		t.Fatalf("refund: %#v", out)
	}
	a.Engine = newEngine() // the restart: ADK-Go's sessions are gone
	out, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: "acme/s", Payload: agent.Approve("")})
	c, ok := out.(*chat.Completed)
	if !ok || len(c.Replies) != 2 || !strings.Contains(c.Replies[0].Text(), "refunded") {
		t.Fatalf("the approval after the loss: %#v", out)
	}
	var got []string
	for _, msg := range m.LastTranscript() {
		switch {
		case msg.Role == llm.RoleSystem:
		case len(msg.ToolCalls) > 0:
			got = append(got, "call "+msg.ToolCalls[0].Name)
		case msg.Role == llm.RoleTool:
			got = append(got, "result "+msg.Text())
		case msg.Role == llm.RoleAssistant:
			got = append(got, "assistant") // the demo's greeting; the approval prompt would be a second
		default:
			got = append(got, string(msg.Role)+": "+msg.Text())
		}
	}
	want := []string{"user: hello", "assistant", "user: please refund order 7", "call issue_refund", "result refunded $30.00 for order 7"}
	if !slices.Equal(got, want) {
		t.Fatalf("after the approval the model was sent %q, want %q", got, want)
	}
}

func isCompleted(out chat.Outcome) bool {
	_, ok := out.(*chat.Completed)
	return ok
}

// TestImages: a user's images reach the model through ADK-Go, on their
// turn and from ADK-Go's session after.
func TestImages(t *testing.T) { adaptertest.CheckImages(t, adk.Name, adk.Factory) }

// TestRandomRuns: the random operations through the RuntimeClient; each
// turn's run record ends in the status its outcome says.
func TestRandomRuns(t *testing.T) {
	adaptertest.CheckRandomRuns(t, adaptertest.RandomConfig{Backend: adk.Name, Factory: adk.Factory, Restart: true, Durable: true})
}

// TestUsage: each model call's usage (the bridge's, carried by ADK-Go's
// events) is the turn's, streamed or not.
func TestUsage(t *testing.T) {
	adaptertest.CheckUsage(t, adk.Name, adk.Factory, `{"streaming":false}`, `{"streaming":true}`)
}

// TestToolCallKey: the bridged Armature tools run with the call's
// identity (agent.ToolCallOf), the approved one's the same as the
// approval named.
func TestToolCallKey(t *testing.T) { adaptertest.CheckToolCallKey(t, adk.Name, adk.Factory) }

// TestRunaway: a model that never stops calling tools, first one nobody
// declared: ADK-Go answers the undeclared call with an error, and the
// turn ends completed at max_llm_calls saying so. Before, ADK-Go called
// the model for as long as it asked for tools.
func TestRunaway(t *testing.T) {
	adaptertest.CheckRunaway(t, adk.Name, adk.Factory, `{"max_llm_calls":5}`, 5)
}

// TestClosedCalls: a call awaiting confirmation that a new message
// superseded, or that was cancelled, reaches the model as not run, as
// the runtime's history says. Before, ADK-Go's session still answered
// it "requires confirmation, please approve or reject".
// On ADK-Go's in-memory sessions, and on its SQLite session database.
func TestClosedCalls(t *testing.T) {
	path := filepath.Join(t.TempDir(), "adk.db")
	adaptertest.CheckClosedCalls(t, adk.Name, adk.Factory, "", `{"session":{"driver":"sqlite","path":`+strconv.Quote(path)+`}}`)
}

// TestSignalOwner: beside a native agent, an approval resumes the turn of
// the agent that suspended it (adaptertest.CheckSignalOwner).
func TestSignalOwner(t *testing.T) { adaptertest.CheckSignalOwner(t, adk.Name, adk.Factory, "") }
