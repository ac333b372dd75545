package adk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/session"
)

// TestCancelRaceOnEveryStore: a resumed turn whose approved call(s) ran
// (mode one: one call; two: a step of two, the cancel coming from the
// second) is cancelled 0.4-1 ms after the last tool returned: while
// ADK-Go writes the step's responses. Every call that ran is in the
// runtime's history after the cancel and in the model's next request
// exactly once, on every session service. (On ADK-Go's PostgreSQL
// session service the write commits while ADK-Go's append reports the
// cancellation: the adapter never sees those responses, and
// Engine.recordLate reports them.) Needs ARMATURE_POSTGRES_URL for the
// postgres subtests.
func TestCancelRaceOnEveryStore(t *testing.T) {
	for _, mode := range []string{"one", "two"} {
		for _, driver := range []string{"memory", "sqlite", "postgres"} {
			t.Run(mode+"/"+driver, func(t *testing.T) {
				ctx := context.Background()
				if driver != "memory" && raceEnabled {
					// ADK-Go v2.2.0's database session service races with
					// itself when a run is cancelled mid-step: its runner
					// appends the step's event to the session while the
					// next step's node, still running, reads the session's
					// events (session/database localSession, no lock). The
					// race detector reports that upstream race here; the
					// test runs these stores without it (go test without
					// -race, as the package's other runs do).
					t.Skip("ADK-Go's database session service races on a cancelled run (upstream); run without -race")
				}
				if driver == "postgres" {
					t.Setenv("ADK_TEST_DATABASE_URL", postgresURL(t))
				}
				bad := 0
				rounds := 40 // the race lost about one round in ten on PostgreSQL
				for i := 0; i < rounds; i++ {
					section := `{}`
					if driver == "sqlite" {
						section = `{"session":{"driver":"sqlite","path":` + strconvQuote(filepath.Join(t.TempDir(), "adk.db")) + `}}`
					}
					if driver == "postgres" {
						section = `{"session":{"driver":"postgres","url_env":"ADK_TEST_DATABASE_URL"}}`
					}
					m := &orderScript{}
					var mu sync.Mutex
					var cancelTurn context.CancelFunc = func() {}
					runs := map[string]int{}
					type args struct {
						Order  string  `json:"order"`
						Amount float64 `json:"amount"`
					}
					tl := agent.MustTool("issue_refund", "Refund an order (needs approval)", func(ctx context.Context, a args) (string, error) {
						mu.Lock()
						runs[a.Order]++
						c := cancelTurn
						mu.Unlock()
						if strings.HasSuffix(a.Order, "b") || mode == "one" {
							d := 400*time.Microsecond + time.Duration(i%24)*25*time.Microsecond
							go func() {
								for st := time.Now(); time.Since(st) < d; {
								}
								c()
							}()
						}
						return "refunded order " + a.Order, nil
					}).WithApproval()
					st := stores{sessions: session.NewMemoryStore(session.MemoryConfig{}), cps: checkpoint.NewMemoryStore(nil)}
					h, closeA := approvalHarness(t, section, m, tl, st)
					sid := fmt.Sprintf("acme/s%d", i)
					out, err := h.Send(ctx, sid, llm.UserText("refund "+mode+" 7"))
					s, ok := out.(*chat.Suspended)
					if err != nil || !ok {
						t.Fatalf("send: %#v %v", out, err)
					}
					if mode == "two" {
						out, err = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: agent.Approve("")})
						s, ok = out.(*chat.Suspended)
						if err != nil || !ok {
							t.Fatalf("first approval: %#v %v", out, err)
						}
					}
					cctx, cancel := context.WithCancel(ctx)
					mu.Lock()
					cancelTurn = cancel
					mu.Unlock()
					var chunks []string
					rout, rerr := h.SignalFunc(cctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: agent.Approve("")}, func(c chat.Chunk) bool {
						if c.Tool != nil {
							chunks = append(chunks, fmt.Sprintf("%s:%s", c.Tool.CallID, c.Tool.Status))
						}
						return true
					})
					cancel()
					mu.Lock()
					cancelTurn = func() {}
					mu.Unlock()
					rec, _ := st.sessions.Load(ctx, session.LoadRequest{SessionID: sid})
					b, _ := json.Marshal(rec.State["messages"])
					adkEvents := dumpADKEvents(t, driver, sid)
					_, _ = h.Signal(ctx, chat.Signal{SignalID: s.Descriptor.SignalID, SessionID: sid, Payload: agent.Approve("")})
					_, herr := h.Send(ctx, sid, llm.UserText("hello"))
					reqs := m.requests()
					last := reqs[len(reqs)-1]
					problems := []string{}
					mu.Lock()
					wantB := 1
					if mode == "one" {
						wantB = 0
					}
					if runs["7"] != 1 || runs["7b"] != wantB {
						problems = append(problems, fmt.Sprintf("runs %v", runs))
					}
					mu.Unlock()
					wants := []string{"refunded order 7", "refunded order 7b"}
					if mode == "one" {
						wants = wants[:1]
					}
					for _, want := range wants {
						n := 0
						for _, msg := range last {
							if msg.Role == llm.RoleTool && msg.Text() == want {
								n++
							}
						}
						if n != 1 {
							problems = append(problems, fmt.Sprintf("%q %d times in the next request", want, n))
						}
						if !strings.Contains(string(b), `"content":"`+want+`"`) {
							problems = append(problems, fmt.Sprintf("%q not in the history after the cancel", want))
						}
					}
					if herr != nil {
						problems = append(problems, "hello: "+herr.Error())
					}
					if len(problems) > 0 {
						bad++
						if bad <= 3 {
							t.Logf("round %d: tool chunks %v; outcome %T %v; %v; history %s; next request %q; ADK-Go session right after the cancel: %s", i, chunks, rout, rerr, problems, b, requestShape(last), adkEvents)
						}
					}
					closeA()
				}
				if bad > 0 {
					t.Errorf("%d of %d rounds lost or duplicated a call's result", bad, rounds)
				}
			})
		}
	}
}

// dumpADKEvents lists the ADK-Go events of session sid on PostgreSQL.
func dumpADKEvents(t *testing.T, driver, sid string) string {
	if driver != "postgres" {
		return ""
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv("ADK_TEST_DATABASE_URL"))
	if err != nil {
		return err.Error()
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "select author, coalesce(content::text,'') from events where session_id=$1 or session_id=$2 order by timestamp", sid, strings.TrimPrefix(sid, "acme/"))
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	out := []string{"events:"}
	for rows.Next() {
		var a, c string
		_ = rows.Scan(&a, &c)
		if len(c) > 160 {
			c = c[:160]
		}
		out = append(out, a+": "+c)
	}
	return strings.Join(out, " | ")
}

// requestShape is a request's messages as role:text, calls and ids.
func requestShape(msgs []llm.Message) []string {
	var shape []string
	for _, m := range msgs {
		s := string(m.Role) + ":" + m.Text()
		for _, tc := range m.ToolCalls {
			s += " call(" + tc.ID + " " + string(tc.Arguments) + ")"
		}
		if m.ToolCallID != "" {
			s += " [" + m.ToolCallID + "]"
		}
		shape = append(shape, s)
	}
	return shape
}
