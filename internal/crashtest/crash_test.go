package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/internal/pgtest"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/postgres"
	"github.com/armature-go/armature/store/sqlite"
)

const (
	childEnv  = "ARMATURE_CRASHTEST_CHILD"
	dbEnv     = "ARMATURE_CRASHTEST_DB"
	pgEnv     = "ARMATURE_CRASHTEST_PG" // the child runs on PostgreSQL: the URL
	sessions  = 4
	perTurn   = 2 // messages a turn appends: the user's and the reply
	approvalN = 3 // every third turn suspends for approval first
)

var (
	messages = graph.NewListField[string]("messages", graph.Append)
	approved = graph.NewField[bool]("approved")
)

// backend is the store under test: a SQLite file or a PostgreSQL schema.
type backend struct {
	sessions session.Store
	records  checkpoint.Store // a checkpoint.SessionWriter of sessions
	close    func()
}

// open opens the SQLite file db, or the PostgreSQL database at url when
// url is set.
func open(ctx context.Context, db, url string) (*backend, error) {
	if url != "" {
		st, err := postgres.Open(ctx, postgres.Config{URL: url})
		if err != nil {
			return nil, err
		}
		return &backend{sessions: st, records: st.Checkpoints(), close: st.Close}, nil
	}
	st, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	if err != nil {
		return nil, err
	}
	return &backend{sessions: st, records: st.Checkpoints(), close: func() { _ = st.Close(ctx) }}, nil
}

// turnGraph appends the user's message, and a reply once approved when
// the turn needs approval.
func turnGraph(store *backend) (*graph.Graph, error) {
	schema, err := graph.NewSchema(messages, approved)
	if err != nil {
		return nil, err
	}
	return graph.NewBuilder(schema).
		AddNode("gate", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := messages.Get(s)
			if strings.HasSuffix(msgs[len(msgs)-1], "!approval") && !approved.Get(s) {
				return nil, graph.Suspend(ctx, graph.SignalDescriptor{SignalID: graph.SessionID(ctx)})
			}
			return nil, nil
		}).
		AddNode("reply", func(ctx context.Context, s graph.State) (graph.Update, error) {
			msgs := messages.Get(s)
			return messages.Add("reply to " + msgs[len(msgs)-1]).With(approved.Set(false)), nil
		}).
		AddEdge("gate", "reply").
		AddEdge("reply", graph.End).
		SetEntry("gate").
		Compile(
			graph.WithSessions(graph.SessionConfig{Store: store.sessions, Fields: []string{"messages", "approved"}, SchemaVersion: "v1"}),
			graph.WithCheckpointStore(store.records),
		)
}

// TestCrashChild is the child process's body; it runs only when the parent
// sets childEnv. It resumes as the chat harness does, refusing a stale
// resume (graph.RefuseStaleResume): a killed child's suspending write can
// still commit on PostgreSQL after the next child loaded the session, and
// the next child's own suspension of that turn then wins by writing the
// whole session (last write wins), leaving the dead child's paused record
// beside its own; resumed as well, it would store the turn's reply twice.
// Refused, it is retired.
func TestCrashChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("runs as the crash-test child process only")
	}
	ctx := context.Background()
	store, err := open(ctx, os.Getenv(dbEnv), os.Getenv(pgEnv))
	if err != nil {
		t.Fatal(err)
	}
	g, err := turnGraph(store)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		id := fmt.Sprintf("s%d", i%sessions)
		// A turn interrupted while suspended is resumed first.
		paused, err := store.records.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(paused.Records) > 0 {
			if _, err := g.Resume(ctx, paused.Records[0].InvocationID, approved.Set(true), graph.RefuseStaleResume()); err != nil && !errors.Is(err, graph.ErrStaleResume) {
				t.Fatal(err)
			}
			continue
		}
		n, err := turns(ctx, store.sessions, id)
		if err != nil {
			t.Fatal(err)
		}
		msg := fmt.Sprintf("%s turn %d", id, n)
		if n%approvalN == approvalN-1 {
			msg += " !approval"
		}
		res, err := g.Invoke(ctx, messages.Add(msg), graph.WithSessionID(id))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == graph.Suspended {
			if _, err := g.Resume(ctx, res.InvocationID, approved.Set(true), graph.RefuseStaleResume()); err != nil && !errors.Is(err, graph.ErrStaleResume) {
				t.Fatal(err)
			}
		}
	}
}

// turns returns how many whole turns a session holds.
func turns(ctx context.Context, store session.Store, id string) (int, error) {
	msgs, err := stored(ctx, store, id)
	return len(msgs) / perTurn, err
}

func stored(ctx context.Context, store session.Store, id string) ([]string, error) {
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: id})
	if errors.Is(err, session.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var msgs []string
	if raw, ok := rec.State["messages"]; ok {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			return nil, err
		}
	}
	return msgs, nil
}

func TestKillDuringTurns(t *testing.T) {
	killDuringTurns(t, filepath.Join(t.TempDir(), "crash.db"), "")
}

// TestKillDuringTurnsPostgres is TestKillDuringTurns on the PostgreSQL
// store: the child's connections die with it, mid-transaction or not.
func TestKillDuringTurnsPostgres(t *testing.T) {
	if testing.Short() || os.Getenv(childEnv) != "" {
		t.Skip("slow: kills a child process many times")
	}
	_, url := pgtest.Schema(t)
	killDuringTurns(t, "", url)
}

// killDuringTurns starts the child on the store (db, or url when set)
// and kills it with SIGKILL at random moments, checking the store after
// every kill. ARMATURE_CRASHTEST_KILLS sets the number of kills,
// ARMATURE_CRASHTEST_SEED the seed (printed).
func killDuringTurns(t *testing.T, db, url string) {
	if testing.Short() {
		t.Skip("slow: kills a child process many times")
	}
	if os.Getenv(childEnv) != "" {
		t.Skip("parent only")
	}
	kills := 25
	if s := os.Getenv("ARMATURE_CRASHTEST_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	seed := uint64(1)
	if s := os.Getenv("ARMATURE_CRASHTEST_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (ARMATURE_CRASHTEST_SEED), %d kills", seed, kills)
	rng := rand.New(rand.NewPCG(seed, 2))
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", dbEnv+"="+db, pgEnv+"="+url)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(50+rng.IntN(250)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		check(t, db, url, k)
	}
}

// check verifies the invariants after a kill.
func check(t *testing.T, db, url string, k int) {
	t.Helper()
	ctx := context.Background()
	store, err := open(ctx, db, url)
	if err != nil {
		t.Fatalf("kill %d: the store does not reopen: %v", k, err)
	}
	defer store.close()
	total := 0
	for i := range sessions {
		id := fmt.Sprintf("s%d", i)
		// The killed child's last transaction may still be committing on
		// the database server (PostgreSQL finishes a COMMIT it received
		// from a client that died): read the session around the listing
		// of its paused records until both reads agree, so that the two
		// come from one state.
		var (
			msgs   []string
			paused checkpoint.ListResponse
		)
		for attempt := 0; ; attempt++ {
			before, err := stored(ctx, store.sessions, id)
			if err != nil {
				t.Fatalf("kill %d: session %s does not load: %v", k, id, err)
			}
			if paused, err = store.records.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: id}); err != nil {
				t.Fatal(err)
			}
			if msgs, err = stored(ctx, store.sessions, id); err != nil {
				t.Fatalf("kill %d: session %s does not load: %v", k, id, err)
			}
			if slices.Equal(before, msgs) {
				break
			}
			if attempt == 40 {
				t.Fatalf("kill %d: session %s keeps changing after the kill", k, id)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// A paused turn's session holds its user message without a reply.
		if len(paused.Records) > 0 {
			if len(msgs)%perTurn != 1 || !strings.HasSuffix(msgs[len(msgs)-1], "!approval") {
				t.Fatalf("kill %d: session %s has a paused record but its state is %q", k, id, msgs)
			}
			msgs = msgs[:len(msgs)-1]
		}
		if len(msgs)%perTurn != 0 {
			t.Fatalf("kill %d: session %s holds a torn turn: %q", k, id, msgs)
		}
		for n := 0; n < len(msgs)/perTurn; n++ {
			want := fmt.Sprintf("%s turn %d", id, n)
			if n%approvalN == approvalN-1 {
				want += " !approval"
			}
			if msgs[2*n] != want || msgs[2*n+1] != "reply to "+want {
				t.Fatalf("kill %d: session %s turn %d = %q, %q", k, id, n, msgs[2*n], msgs[2*n+1])
			}
		}
		total += len(msgs) / perTurn
	}
	t.Logf("after kill %d: %d whole turns stored", k, total)
}
