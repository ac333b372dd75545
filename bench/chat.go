package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// Backend is the storage a chat workload runs on: a session store and the
// record store paused invocations go to (nil: the engine's in-memory
// default).
type Backend struct {
	Sessions session.Store
	Records  checkpoint.Store
}

// MemoryBackend returns in-memory stores.
func MemoryBackend() Backend {
	return Backend{Sessions: session.NewMemoryStore(session.MemoryConfig{}), Records: checkpoint.NewMemoryStore(nil)}
}

// SQLiteBackend returns the embedded store on one file.
func SQLiteBackend(s *sqlite.Store) Backend {
	return Backend{Sessions: s, Records: s.Checkpoints()}
}

// compileOptions are the options binding a chat graph to the backend.
func (be Backend) compileOptions() []graph.CompileOption {
	opts := []graph.CompileOption{graph.WithSessions(graph.SessionConfig{Store: be.Sessions, SchemaVersion: "v1"})}
	if be.Records != nil {
		opts = append(opts, graph.WithCheckpointStore(be.Records))
	}
	return opts
}

// compile finishes a chat graph on the backend.
func (be Backend) compile(b *graph.Builder) (*graph.Graph, error) {
	return b.Compile(be.compileOptions()...)
}

// harness returns a chat harness over the graph build makes on the
// backend.
func (be Backend) harness(build func(Backend) (*graph.Graph, error)) (*chat.Harness, error) {
	g, err := build(be)
	if err != nil {
		return nil, err
	}
	return be.harnessFor(g)
}

// harnessFor returns a chat harness over g whose signals resolve through
// the backend's record store.
func (be Backend) harnessFor(g *graph.Graph) (*chat.Harness, error) {
	cfg := chat.Config{Graph: g, IdempotencyCapacity: -1}
	if be.Records != nil {
		cfg.Coordinator = harness.NewStoreCoordinator(be.Records)
	}
	return chat.New(cfg)
}

var (
	userMsg  = llm.UserText("And what about tomorrow?")
	replyMsg = llm.AssistantText(reply)
)

// ReplyGraph is the one-node chat graph of W1/W2: the scripted model
// appends one assistant reply per turn.
func ReplyGraph(be Backend) (*graph.Graph, error) {
	schema, err := chat.NewSchema()
	if err != nil {
		return nil, err
	}
	return be.compile(graph.NewBuilder(schema).
		AddNode("model", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(replyMsg), nil
		}).
		AddEdge("model", graph.End).
		SetEntry("model"))
}

// SeedChat stores a session holding history llm messages.
func SeedChat(ctx context.Context, store session.Store, id string, history int) error {
	msgs := make([]llm.Message, history)
	for i := range msgs {
		text := fmt.Sprintf("message %d of the conversation so far", i)
		if i%2 == 0 {
			msgs[i] = llm.UserText(text)
		} else {
			msgs[i] = llm.AssistantText(text)
		}
	}
	raw, err := json.Marshal(msgs)
	if err != nil {
		return err
	}
	_, err = store.Save(ctx, session.SaveRequest{SessionID: id, SchemaVersion: "v1",
		State: map[string]json.RawMessage{chat.MessagesField: raw}})
	return err
}

// ChatW1 is W1: one Send to an existing session of history messages whose
// graph appends one reply. The harness is warm (each session has one turn
// before the timer, as on a long-running server). Each op adds two
// messages, so a session serves max(history/10, 10)/2 ops and the
// workload then moves to the next one: the history stays near its
// nominal length. Sessions are seeded, untimed, in batches (about 2 000
// messages' worth at a time) on a fresh harness, and the previous batch
// is deleted, so neither the heap nor the timer churn grows with b.N.
func ChatW1(b *testing.B, be Backend, history int) {
	b.Helper()
	chatW1(b, be, ReplyGraph, history, false)
}

// ChatW1Agent is W1 through the agent package's real graph (agent.New,
// its model node and tool loop) over ReplyModel: what a warm turn costs
// an agent at a given history length, with the conversation handed to
// the provider on every model call.
func ChatW1Agent(b *testing.B, be Backend, history int) {
	b.Helper()
	chatW1(b, be, AgentGraph, history, false)
}

// ChatW3Agent is W3 on a warm session of history messages: one Send
// whose turn runs one tool call through the agent graph (ToolModel)
// with the conversation so far handed to the provider on both calls.
func ChatW3Agent(b *testing.B, be Backend, history int) {
	b.Helper()
	chatW1(b, be, ToolGraph, history, false)
}

// ChatW1MessageID is W1 with a client message id on every Send
// (chat.WithMessageID): what recording the id for idempotency costs a
// warm turn.
func ChatW1MessageID(b *testing.B, be Backend, history int) {
	b.Helper()
	chatW1(b, be, ReplyGraph, history, true)
}

func chatW1(b *testing.B, be Backend, build func(Backend) (*graph.Graph, error), history int, withIDs bool) {
	b.Helper()
	ctx := context.Background()
	var sent int
	var opts []chat.SendOption
	send := func(h *chat.Harness, id string) error {
		opts = opts[:0]
		if withIDs {
			sent++
			opts = append(opts, chat.WithMessageID("msg-"+strconv.Itoa(sent)))
		}
		_, err := h.Send(ctx, id, userMsg, opts...)
		return err
	}
	period := max(history/10, 10) / 2
	batch := max(1, 2000/history)
	n := 0
	var (
		ids  []string
		h    *chat.Harness
		cur  int
		used int
	)
	fresh := func() {
		for _, id := range ids {
			if err := be.Sessions.Delete(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		ids = ids[:0]
		g, err := build(be)
		if err != nil {
			b.Fatal(err)
		}
		if h, err = be.harnessFor(g); err != nil {
			b.Fatal(err)
		}
		for range batch {
			n++
			id := fmt.Sprintf("w1-%d", n)
			if err := SeedChat(ctx, be.Sessions, id, history); err != nil {
				b.Fatal(err)
			}
			if err := send(h, id); err != nil {
				b.Fatal(err)
			}
			ids = append(ids, id)
		}
		cur, used = 0, 0
	}
	fresh()
	b.ReportAllocs()
	for b.Loop() {
		if used == period {
			cur, used = cur+1, 0
			if cur == len(ids) {
				b.StopTimer()
				fresh()
				b.StartTimer()
			}
		}
		if err := send(h, ids[cur]); err != nil {
			b.Fatal(err)
		}
		used++
	}
}

// ChatW2 is W2: one Send to a new session.
func ChatW2(b *testing.B, be Backend) {
	b.Helper()
	newSessionTurns(b, be, ReplyGraph, "w2-", 1)
}

// ChatW2Agent is W2 through the agent graph (AgentGraph): one Send per
// op, each to a new session, whose turn is a model call answering the
// user's message.
func ChatW2Agent(b *testing.B, be Backend) {
	b.Helper()
	newSessionTurns(b, be, AgentGraph, "w2a-", 1)
}

// newSessionTurns times one Send per op, each to a new session (prefix
// plus a counter), on the graph build makes; every turn must complete
// with replies new messages.
func newSessionTurns(b *testing.B, be Backend, build func(Backend) (*graph.Graph, error), prefix string, replies int) {
	b.Helper()
	ctx := context.Background()
	h, err := be.harness(build)
	if err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		out, err := h.Send(ctx, prefix+itoa(i), userMsg)
		if err != nil {
			b.Fatal(err)
		}
		if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != replies {
			b.Fatalf("%s turn: %#v", prefix, out)
		}
	}
}

var weatherCall = llm.ToolCall{ID: "call_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}

// ToolModel is W3's scripted model: it answers a user message with one
// get_weather call and a tool result with the final text. The call's id
// is "call_" and the length of the conversation it was sent (call_1 on a
// new session), so that it is unique in a session's history. It does no
// I/O and keeps no state, like the peers' fake models.
type ToolModel struct{}

// Ready reports the model ready.
func (ToolModel) Ready(context.Context) error { return nil }

// Complete answers per the script.
func (ToolModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req.Messages[len(req.Messages)-1].Role == llm.RoleTool {
		return &llm.Response{Message: llm.AssistantText("It is sunny in Paris, 22°C."), FinishReason: llm.FinishStop, Raw: rawReply}, nil
	}
	call := weatherCall
	if n := len(req.Messages); n != 1 {
		call.ID = "call_" + strconv.Itoa(n)
	}
	return &llm.Response{Message: llm.AssistantToolCalls(call), FinishReason: llm.FinishToolCalls, Raw: rawReply}, nil
}

var rawReply = json.RawMessage(`{}`)

// ReplyModel is W1's scripted model for the agent graph: it answers every
// call with the same assistant text, without reading the conversation. It
// does no I/O and keeps no state.
type ReplyModel struct{}

// Ready reports the model ready.
func (ReplyModel) Ready(context.Context) error { return nil }

// Complete answers with the W1 reply.
func (ReplyModel) Complete(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: replyMsg, FinishReason: llm.FinishStop, Raw: rawReply}, nil
}

// AgentGraph is the agent package's graph over ReplyModel, with no tools
// and a system prompt: W1 through the agent.
func AgentGraph(be Backend) (*graph.Graph, error) {
	a, err := agent.New(agent.Config{Provider: ReplyModel{}, System: "You are a helpful assistant."})
	if err != nil {
		return nil, err
	}
	return a.Compile(be.compileOptions()...)
}

type weatherArgs struct {
	City string `json:"city"`
}

// ToolGraph is the W3 graph: the agent package's real tool-calling graph
// over ToolModel and one typed tool.
func ToolGraph(be Backend) (*graph.Graph, error) {
	weather, err := agent.NewTool("get_weather", "Current weather for a city",
		func(ctx context.Context, a weatherArgs) (string, error) { return "Sunny, 22°C in " + a.City, nil })
	if err != nil {
		return nil, err
	}
	a, err := agent.New(agent.Config{Provider: ToolModel{}, Tools: []agent.Tool{weather}})
	if err != nil {
		return nil, err
	}
	return a.Compile(be.compileOptions()...)
}

// ChatW3 is W3: one Send to a new session whose turn runs a tool call
// through the agent graph: three new messages.
func ChatW3(b *testing.B, be Backend) {
	b.Helper()
	newSessionTurns(b, be, ToolGraph, "w3-", 3)
}

var approvedField = graph.NewField[bool]("approved")

// ApprovalGraph is the W4 graph: a pending assistant message, a gate that
// suspends until approved, and a final reply.
func ApprovalGraph(be Backend) (*graph.Graph, error) { return approvalGraph(be, false) }

// approvalGraph is ApprovalGraph; repeat makes its send node withdraw
// the approval.
func approvalGraph(be Backend, repeat bool) (*graph.Graph, error) {
	schema, err := chat.NewSchema(approvedField)
	if err != nil {
		return nil, err
	}
	return be.compile(graph.NewBuilder(schema).
		AddNode("plan", func(ctx context.Context, s graph.State) (graph.Update, error) {
			return chat.Messages.Add(llm.AssistantText("Approve sending the email?")), nil
		}).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			if !approvedField.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: "approve-email"})
			}
			return nil, nil
		}).
		AddNode("send", func(ctx context.Context, s graph.State) (graph.Update, error) {
			u := chat.Messages.Add(llm.AssistantText("Email sent."))
			if repeat {
				u = u.With(approvedField.Set(false))
			}
			return u, nil
		}).
		AddEdge("plan", "gate").AddEdge("gate", "send").AddEdge("send", graph.End).
		SetEntry("plan"))
}

// ChatW4 is W4: a Send that suspends with a pending message, the signal
// with the approval payload, and the listener callback with the resumed
// turn's reply.
func ChatW4(b *testing.B, be Backend) {
	b.Helper()
	ctx := context.Background()
	h, err := be.harness(ApprovalGraph)
	if err != nil {
		b.Fatal(err)
	}
	payload := approvedField.Set(true)
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		id := "w4-" + itoa(i)
		got := 0
		unsubscribe := h.Subscribe(id, func(o chat.Outcome) {
			if c, ok := o.(*chat.Completed); ok && len(c.Replies) == 1 {
				got++
			}
		})
		out, err := h.Send(ctx, id, userMsg)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := out.(*chat.Suspended); !ok {
			b.Fatalf("W4 send: %#v", out)
		}
		if _, err := h.Signal(ctx, chat.Signal{SignalID: "approve-email", SessionID: id, Payload: payload}); err != nil {
			b.Fatal(err)
		}
		unsubscribe()
		if got != 1 {
			b.Fatalf("listener fired %d times", got)
		}
	}
}

// ChatW4History is W4 on a warm session of history messages: one Send
// that suspends for approval and the Signal that resumes it, on a
// session seeded with history messages (a fresh one every few cycles,
// untimed, so that the history stays near its length): what an approval
// costs a long conversation.
func ChatW4History(b *testing.B, be Backend, history int) {
	b.Helper()
	ctx := context.Background()
	// The send node withdraws the approval: every turn asks for one.
	h, err := be.harness(func(be Backend) (*graph.Graph, error) { return approvalGraph(be, true) })
	if err != nil {
		b.Fatal(err)
	}
	payload := approvedField.Set(true)
	period := max(history/10, 10) / 2
	n, used := 0, period
	id := ""
	b.ReportAllocs()
	for b.Loop() {
		if used == period {
			b.StopTimer()
			if id != "" {
				if err := be.Sessions.Delete(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			n++
			id = "w4h-" + itoa(n)
			if err := SeedChat(ctx, be.Sessions, id, history); err != nil {
				b.Fatal(err)
			}
			used = 0
			b.StartTimer()
		}
		used++
		out, err := h.Send(ctx, id, userMsg)
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := out.(*chat.Suspended); !ok {
			b.Fatalf("W4 send: %#v", out)
		}
		out, err = h.Signal(ctx, chat.Signal{SignalID: "approve-email", SessionID: id, Payload: payload})
		if err != nil {
			b.Fatal(err)
		}
		if _, ok := out.(*chat.Completed); !ok {
			b.Fatalf("W4 resume: %#v", out)
		}
	}
}

// B0 is the storage floor: the bare SQLite transaction a turn needs
// (insert the user message and the reply as item rows, bump the session
// version), with no harness, on the file layout and connection settings
// of the store at path opened with durability d (synchronous=NORMAL or
// FULL).
func B0(b *testing.B, path string, d sqlite.Durability) {
	b.Helper()
	ctx := context.Background()
	level, err := d.MarshalText()
	if err != nil {
		b.Fatal(err)
	}
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Save(ctx, session.SaveRequest{SessionID: "s", State: map[string]json.RawMessage{}}); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
	// The settings of the Store's write connection, on the VFS a Store
	// that owns its file uses (sqlite.Config.Shared unset): no file
	// locks per transaction, the WAL index in memory.
	db, err := sql.Open("sqlite", path+"?vfs=unix-excl&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=synchronous("+string(level)+")&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ins, err := db.PrepareContext(ctx, `INSERT INTO session_items (session_id, field, seq, value) VALUES (?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	bump, err := db.PrepareContext(ctx, `UPDATE sessions SET version = version + 1, updated_at = ? WHERE id = ? AND version = ?`)
	if err != nil {
		b.Fatal(err)
	}
	user, assistant := b0Messages(b)
	version, seq := int64(1), int64(0)
	b.ReportAllocs()
	for b.Loop() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		ti := tx.StmtContext(ctx, ins)
		if _, err := ti.ExecContext(ctx, "s", chat.MessagesField, seq, user); err != nil {
			b.Fatal(err)
		}
		if _, err := ti.ExecContext(ctx, "s", chat.MessagesField, seq+1, assistant); err != nil {
			b.Fatal(err)
		}
		res, err := tx.StmtContext(ctx, bump).ExecContext(ctx, time.Now().UnixNano(), "s", version)
		if err != nil {
			b.Fatal(err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			b.Fatal("version bump matched no row")
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		version, seq = version+1, seq+2
	}
}

// b0Messages are the encoded user message and reply a B0 turn stores.
func b0Messages(b *testing.B) (user, assistant []byte) {
	b.Helper()
	user, err := json.Marshal(userMsg)
	if err != nil {
		b.Fatal(err)
	}
	assistant, err = json.Marshal(replyMsg)
	if err != nil {
		b.Fatal(err)
	}
	return user, assistant
}

func itoa(i int) string { return strconv.Itoa(i) }

// ColdWindow is the context window of ChatColdTurn's agent.
var ColdWindow = agent.Window{MaxMessages: 20}

// ChatColdTurn is a turn of the agent graph, with a window of
// ColdWindow.MaxMessages messages, on a session of about history
// messages: cold, the engine keeps no session in its cache
// (graph.SessionConfig.CacheSize -1), so every turn loads the session
// from the store, and with the window it loads only the history's tail
// (agent.Window.TailMax); warm, the cache holds it and a turn checks its
// version. The session has one turn before the timer (which moves a
// seeded history into list items). Each op adds two messages.
func ChatColdTurn(b *testing.B, be Backend, history int, cold bool) {
	b.Helper()
	ctx := context.Background()
	a, err := agent.New(agent.Config{Provider: ReplyModel{}, System: "You are a helpful assistant.", Window: ColdWindow})
	if err != nil {
		b.Fatal(err)
	}
	cfg := graph.SessionConfig{Store: be.Sessions, SchemaVersion: "v1"}
	if cold {
		cfg.CacheSize = -1
	}
	opts := []graph.CompileOption{graph.WithSessions(cfg)}
	if be.Records != nil {
		opts = append(opts, graph.WithCheckpointStore(be.Records))
	}
	g, err := a.Compile(opts...)
	if err != nil {
		b.Fatal(err)
	}
	h, err := be.harnessFor(g)
	if err != nil {
		b.Fatal(err)
	}
	const id = "cold-1"
	if err := SeedChat(ctx, be.Sessions, id, history); err != nil {
		b.Fatal(err)
	}
	if _, err := h.Send(ctx, id, userMsg); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := h.Send(ctx, id, userMsg)
		if err != nil {
			b.Fatal(err)
		}
		if c, ok := out.(*chat.Completed); !ok || len(c.Replies) != 1 {
			b.Fatalf("cold turn: %#v", out)
		}
	}
}
