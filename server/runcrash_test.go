package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/internal/demo"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/server"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// The run-record crash test: a child process serves the demo agent over
// one SQLite file (sessions and runs), clients drive turns from several
// goroutines, and the child is killed with SIGKILL at random points,
// then restarted (reconciling the runs left started) on the same file.
// The crash is the process's; the turn path is the server's own.
//
//	ARMATURE_RUNCRASH_KILLS   how many kills (default 3)
//	ARMATURE_RUNCRASH_SEED    the seed to replay (printed by every run)
//	ARMATURE_RUNCRASH_WORKERS client goroutines (default 8)
//	ARMATURE_RUNCRASH_DUMP    on failure, log every session's history and runs
const (
	runCrashChildEnv = "ARMATURE_RUNCRASH_CHILD"
	runCrashDBEnv    = "ARMATURE_RUNCRASH_DB"
	runCrashAddrEnv  = "ARMATURE_RUNCRASH_ADDR"
)

// openCrashServer builds the server the child runs (and the harness the
// parent reads the marks with).
func openCrashServer(ctx context.Context, db string) (*server.Server, *chat.Harness, *sqlite.Store, error) {
	store, err := sqlite.Open(ctx, sqlite.Config{Path: db})
	if err != nil {
		return nil, nil, nil, err
	}
	// The demo agent, whose order lookup takes a few milliseconds: turns
	// are in flight, their runs started, when the process dies.
	tools := demo.Tools()
	tools[0] = agent.MustTool("lookup_order", "Look an order up by number",
		func(ctx context.Context, a struct {
			Order string `json:"order"`
		}) (string, error) {
			time.Sleep(time.Duration(1+len(a.Order)%4) * 2 * time.Millisecond)
			return fmt.Sprintf("order %s: shipped, arriving Thursday", a.Order), nil
		})
	a, err := agent.New(agent.Config{Provider: demo.Model{}, Tools: tools})
	if err != nil {
		return nil, nil, nil, err
	}
	g, err := a.Compile(graph.WithSessions(graph.SessionConfig{Store: store}), graph.WithCheckpointStore(store.Checkpoints()))
	if err != nil {
		return nil, nil, nil, err
	}
	h, err := chat.New(chat.Config{Graph: g, Coordinator: harness.NewStoreCoordinator(store.Checkpoints())})
	if err != nil {
		return nil, nil, nil, err
	}
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		return nil, nil, nil, err
	}
	srv, err := server.New(server.Config{Agents: []*server.Agent{{ID: "demo", Chat: h, Model: demo.ModelName}},
		Sessions: store, Runs: rec, DisableWebUI: true})
	if err != nil {
		return nil, nil, nil, err
	}
	return srv, h, store, nil
}

// TestRunCrashChild is the child process's body: it reconciles the runs
// left started, as armature serve does at startup, writes its address
// and serves until it is killed.
func TestRunCrashChild(t *testing.T) {
	if os.Getenv(runCrashChildEnv) == "" {
		t.Skip("runs as the run-crash child process only")
	}
	ctx := context.Background()
	srv, _, _, err := openCrashServer(ctx, os.Getenv(runCrashDBEnv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.RecoverRuns(ctx); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := os.Getenv(runCrashAddrEnv)
	if err := os.WriteFile(addr+".tmp", []byte(ln.Addr().String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(addr+".tmp", addr); err != nil {
		t.Fatal(err)
	}
	t.Fatal(srv.Serve(ctx, ln, time.Second)) // until killed
}

// crashRequest is one request a client sent: what it asked, and what it
// was answered, if it was.
type crashRequest struct {
	cid     string
	session string
	signal  bool
	order   int
	refund  bool
	// acked: the client received the response; outcome is its outcome.
	acked   bool
	outcome string
	errCat  string
}

// committedIn reports whether the request's turn is in the session's
// history.
func (r *crashRequest) committedIn(msgs []llm.Message) bool {
	for i, m := range msgs {
		switch {
		case r.signal && m.Role == llm.RoleTool && m.Text() == fmt.Sprintf("refunded $30.00 for order %d", r.order):
			// The refund's result is saved as soon as it ran (a turn
			// killed after it keeps it); the turn committed when the
			// answer follows it.
			return i+1 < len(msgs) && msgs[i+1].Role == llm.RoleAssistant && len(msgs[i+1].ToolCalls) == 0
		case !r.signal && m.Role == llm.RoleUser && m.Text() == r.text():
			return true
		}
	}
	return false
}

func (r *crashRequest) text() string {
	switch {
	case r.signal:
		return fmt.Sprintf("approve the refund of order %d", r.order)
	case r.refund:
		return fmt.Sprintf("refund order %d", r.order)
	}
	return fmt.Sprintf("where is order %d?", r.order)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func TestRunRecordsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a child process several times")
	}
	if os.Getenv(runCrashChildEnv) != "" {
		t.Skip("parent only")
	}
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("ARMATURE_RUNCRASH_SEED"), 10, 64); err == nil {
		seed = v
	}
	kills, workers := envInt("ARMATURE_RUNCRASH_KILLS", 3), envInt("ARMATURE_RUNCRASH_WORKERS", 8)
	t.Logf("seed %d, %d kills, %d workers (ARMATURE_RUNCRASH_SEED=%d replays the schedule)", seed, kills, workers, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	dir := t.TempDir()
	db := filepath.Join(dir, "armature.db")

	var (
		mu       sync.Mutex
		requests []*crashRequest
		orders   atomic.Int64
		cids     atomic.Int64
	)
	const sessionsPerWorker = 3
	pending := make([]map[string]string, workers) // per worker: session → signal id awaiting approval
	for w := range pending {
		pending[w] = map[string]string{}
	}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

	// do sends one request and records it and its answer.
	do := func(ctx context.Context, url string, req *crashRequest, body string) (map[string]any, bool) {
		mu.Lock()
		requests = append(requests, req)
		mu.Unlock()
		hr, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header.Set("X-Correlation-ID", req.cid)
		resp, err := client.Do(hr)
		if err != nil {
			return nil, false
		}
		defer resp.Body.Close()
		var out map[string]any
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
			return nil, false
		}
		mu.Lock()
		req.acked, req.outcome = true, out["outcome"].(string)
		if e, ok := out["error"].(map[string]any); ok {
			req.errCat, _ = e["category"].(string)
		}
		mu.Unlock()
		return out, true
	}
	worker := func(ctx context.Context, w int, base string, wrng *rand.Rand) {
		for i := 0; ctx.Err() == nil; i++ {
			sid := fmt.Sprintf("w%d-s%d", w, i%sessionsPerWorker)
			req := &crashRequest{cid: fmt.Sprintf("c%d", cids.Add(1)), session: sid, order: int(orders.Add(1))}
			if sig := pending[w][sid]; sig != "" {
				delete(pending[w], sid)
				req.signal = true
				mu.Lock()
				// the refund's order, to find its result in the history
				for _, r := range requests {
					if r.session == sid && r.refund && r.acked && r.outcome == "suspended" {
						req.order = r.order
					}
				}
				mu.Unlock()
				do(ctx, base+"/v1/sessions/"+sid+"/signals", req,
					`{"signal_id":"`+sig+`","payload":{"approval":{"approved":true}}}`)
				continue
			}
			req.refund = wrng.IntN(4) == 0
			out, ok := do(ctx, base+"/v1/sessions/"+sid+"/messages", req, `{"content":"`+req.text()+`"}`)
			if ok && out["outcome"] == "suspended" {
				pending[w][sid] = out["signal"].(map[string]any)["signal_id"].(string)
			}
		}
	}

	for gen := 0; gen <= kills; gen++ {
		addrFile := filepath.Join(dir, fmt.Sprintf("addr-%d", gen))
		cmd := exec.Command(os.Args[0], "-test.run=^TestRunCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), runCrashChildEnv+"=1", runCrashDBEnv+"="+db, runCrashAddrEnv+"="+addrFile)
		var output bytes.Buffer
		cmd.Stdout, cmd.Stderr = &output, &output
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var addr []byte
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			var err error
			if addr, err = os.ReadFile(addrFile); err == nil {
				break
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("generation %d: the child did not start:\n%s", gen, output.String())
			}
		}
		if gen == kills {
			// The last start only reconciles what the last kill left.
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			break
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range workers {
			wrng := rand.New(rand.NewPCG(seed, uint64(gen*1000+w+1)))
			wg.Go(func() { worker(ctx, w, "http://"+string(addr), wrng) })
		}
		time.Sleep(time.Duration(150+rng.IntN(450)) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		stop()
		wg.Wait()
	}

	// The file as the last start left it.
	ctx := context.Background()
	_, h, store, err := openCrashServer(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close(ctx)
	byCID := map[string]*crashRequest{}
	histories := map[string][]llm.Message{}
	acked := 0
	for _, r := range requests {
		byCID[r.cid] = r
		if r.acked {
			acked++
		}
		if _, ok := histories[r.session]; ok {
			continue
		}
		rec, err := store.Load(ctx, session.LoadRequest{SessionID: server.DefaultTenant + "/" + r.session})
		var msgs []llm.Message
		switch {
		case errors.Is(err, session.ErrNotFound):
		case err != nil:
			t.Fatal(err)
		default:
			if err := json.Unmarshal(rec.State[chat.MessagesField], &msgs); err != nil {
				t.Fatal(err)
			}
		}
		histories[r.session] = msgs
	}
	runsOf := map[string]runtime.Run{}
	var all []runtime.Run
	for tok := ""; ; {
		page, err := store.Runs().ListRuns(ctx, runtime.ListRunsRequest{Tenant: server.DefaultTenant, PageSize: runtime.MaxPageSize, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Runs...)
		if tok = page.NextPageToken; tok == "" {
			break
		}
	}
	stats := map[string]int{}
	for _, run := range all {
		req := byCID[run.CorrelationID]
		if req == nil {
			t.Errorf("run %s has an unknown correlation id %q", run.ID, run.CorrelationID)
			continue
		}
		if run.ParentID != "" && !req.signal {
			// The end of a suspended run the request's message
			// superseded, recorded beside the request's own run.
			if run.Status != runtime.StatusCancelled {
				t.Errorf("run %s, the end of suspended run %s superseded by %s (%s), is %s", run.ID, run.ParentID, req.cid, req.text(), run.Status)
			}
			stats["superseded"]++
			continue
		}
		runsOf[req.cid] = run
		committed := req.committedIn(histories[req.session])
		_, rerr := h.Recorded(ctx, server.DefaultTenant+"/"+req.session, server.RunRecordKeyPrefix+run.ID)
		if recorded := rerr == nil; recorded != committed {
			t.Errorf("run %s (%s): the session history says committed=%t, the turn's record says %t (%v)", run.ID, req.text(), committed, recorded, rerr)
		}
		switch {
		case run.Status == runtime.StatusStarted:
			t.Errorf("run %s is still started after the restart", run.ID)
		case committed && run.Status != runtime.StatusCompleted && run.Status != runtime.StatusSuspended:
			t.Errorf("run %s of a committed turn (%s, acked %t) is %s %+v", run.ID, req.text(), req.acked, run.Status, run.Error)
		case committed && (run.Status == runtime.StatusSuspended) != (req.refund && !req.signal):
			t.Errorf("run %s of a committed turn (%s) is %s", run.ID, req.text(), run.Status)
		case !committed && !req.acked && (run.Status != runtime.StatusFailed || run.Error == nil || run.Error.Category != runtime.CategoryInterrupted):
			t.Errorf("run %s of a turn that did not commit (%s) is %s %+v, want failed %s", run.ID, req.text(), run.Status, run.Error, runtime.CategoryInterrupted)
		case !committed && req.acked && run.Status != runtime.StatusFailed:
			t.Errorf("run %s of an answered turn that did not commit (%s: %s) is %s", run.ID, req.text(), req.outcome, run.Status)
		}
		stats[fmt.Sprintf("%s committed=%t", run.Status, committed)]++
	}
	want := map[string]runtime.Status{"completed": runtime.StatusCompleted, "suspended": runtime.StatusSuspended, "errored": runtime.StatusFailed}
	for _, req := range requests {
		if !req.acked {
			continue
		}
		run, ok := runsOf[req.cid]
		switch {
		case !ok:
			t.Errorf("the answered turn %s (%s, %s) has no run record", req.cid, req.text(), req.outcome)
		case run.Status != want[req.outcome]:
			t.Errorf("the answered turn %s (%s) was %s; its run is %s", req.cid, req.text(), req.outcome, run.Status)
		case req.outcome == "errored" && (run.Error == nil || run.Error.Category != req.errCat):
			t.Errorf("the answered turn %s failed with %q; its run with %+v", req.cid, req.errCat, run.Error)
		}
		if req.outcome != "errored" && !req.committedIn(histories[req.session]) {
			t.Errorf("the answered turn %s (%s, %s) is not in its session: a lost turn", req.cid, req.text(), req.outcome)
		}
	}
	// A turn runs once its run's start is durable: every turn in a
	// session has a run, answered or not.
	for _, req := range requests {
		if _, ok := runsOf[req.cid]; !ok && req.committedIn(histories[req.session]) {
			t.Errorf("the turn %s (%s) committed without a run record", req.cid, req.text())
		}
	}
	if t.Failed() && os.Getenv("ARMATURE_RUNCRASH_DUMP") != "" {
		// Each session's history and runs, to see what happened.
		for sid, msgs := range histories {
			var lines []string
			for _, m := range msgs {
				lines = append(lines, fmt.Sprintf("  %s %q %s", m.Role, m.Text(), m.ToolCallID))
			}
			for _, run := range all {
				if q := byCID[run.CorrelationID]; q != nil && q.session == sid {
					lines = append(lines, fmt.Sprintf("  run %s %s %q acked=%t %s → %s", run.ID, q.cid, q.text(), q.acked, q.outcome, run.Status))
				}
			}
			t.Logf("session %s:\n%s", sid, strings.Join(lines, "\n"))
		}
	}
	t.Logf("%d requests, %d answered, %d runs: %v", len(requests), acked, len(all), stats)
	if acked == 0 || len(all) == 0 {
		t.Errorf("the workload answered nothing")
	}
}
