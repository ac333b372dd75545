package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/checkpoint/checkpointtest"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func TestCheckpointStore(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.Store {
		s, _ := openStore(t, sqlite.Config{})
		return s.Checkpoints()
	})
}

func suspended(id string) checkpoint.Record {
	return checkpoint.Record{InvocationID: id, Kind: checkpoint.KindSuspended, CorrelationID: "corr-" + id,
		SessionID: "sess", SignalID: "sig-" + id, SchemaVersion: "v1", Data: json.RawMessage(`{"id":"` + id + `"}`),
		CompletedNodeCount: 3}
}

func key(id string) checkpoint.Key {
	return checkpoint.Key{InvocationID: id, Kind: checkpoint.KindSuspended}
}

// TestCheckpointMigrationFromV1 opens a file an older release left at
// schema version 1 (sessions only): Open adds checkpoint_records and the
// sessions survive.
func TestCheckpointMigrationFromV1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	if err := sqlite.MigrateFileTo(ctx, path, 1); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var tables int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'checkpoint_records'`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("a version 1 file has checkpoint_records (%d, %v)", tables, err)
	}
	// A session as version 1 code wrote it: a saved field and appended
	// list items.
	exec(t, db, `INSERT INTO sessions (id, schema_version, version, created_at, updated_at) VALUES ('s', 'v1', 2, 10, 20)`)
	exec(t, db, `INSERT INTO session_fields (session_id, field, value) VALUES ('s', 'n', CAST('{"a":1}' AS BLOB))`)
	exec(t, db, `INSERT INTO session_items (session_id, field, seq, value) VALUES ('s', 'log', 0, CAST('1' AS BLOB)), ('s', 'log', 1, CAST('"two"' AS BLOB))`)
	_ = db.Close()

	s, _ := openStore(t, sqlite.Config{Path: path})
	rec, err := s.Load(ctx, session.LoadRequest{SessionID: "s"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, v := range rec.State {
		got[k] = string(v)
	}
	if diff := cmp.Diff(map[string]string{"n": `{"a":1}`, "log": `[1,"two"]`}, got); diff != "" || rec.Version != 2 ||
		rec.SchemaVersion != "v1" || rec.CreatedAt.UnixNano() != 10 || rec.UpdatedAt.UnixNano() != 20 {
		t.Errorf("session after the upgrade: %+v (-want +got):\n%s", rec, diff)
	}
	if _, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: 2,
		Append: map[string][]json.RawMessage{"log": {json.RawMessage(`3`)}}}); err != nil {
		t.Fatalf("Append after the upgrade: %v", err)
	}
	cp := s.Checkpoints()
	if err := cp.Save(ctx, suspended("inv")); err != nil {
		t.Fatal(err)
	}
	if r, err := cp.Load(ctx, key("inv")); err != nil || string(r.Data) != `{"id":"inv"}` {
		t.Fatalf("Load after the upgrade = %v, %v", r, err)
	}
	var versions []int64
	rows, err := rawDB(t, path).Query(`SELECT version FROM schema_migrations ORDER BY version`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v int64
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		versions = append(versions, v)
	}
	if diff := cmp.Diff(sqlite.SchemaVersions(), versions); diff != "" {
		t.Errorf("schema_migrations (-want +got):\n%s", diff)
	}
}

func TestCheckpointReopen(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "armature.db")
	clock := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	in := suspended("inv")
	explicit := suspended("explicit")
	explicit.Kind = checkpoint.KindCheckpoint
	explicit.SavedAt = time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
	for _, r := range []checkpoint.Record{in, explicit} {
		if err := s.Checkpoints().Save(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s2, _ := openStore(t, sqlite.Config{Path: path})
	got, err := s2.Checkpoints().Load(ctx, key("inv"))
	if err != nil {
		t.Fatal(err)
	}
	in.SavedAt = clock
	if diff := cmp.Diff(&in, got); diff != "" {
		t.Errorf("record after reopen (-want +got):\n%s", diff)
	}
	got, err = s2.Checkpoints().Load(ctx, checkpoint.Key{InvocationID: "explicit", Kind: checkpoint.KindCheckpoint})
	if err != nil {
		t.Fatal(err)
	}
	if !got.SavedAt.Equal(explicit.SavedAt) || got.SavedAt.Location() != time.UTC {
		t.Errorf("SavedAt = %v, want %v in UTC", got.SavedAt, explicit.SavedAt)
	}
	resp, err := s2.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended})
	if err != nil || len(resp.Records) != 1 {
		t.Fatalf("List = %+v, %v", resp, err)
	}
	want := checkpoint.Summary{InvocationID: "inv", Kind: checkpoint.KindSuspended, CorrelationID: "corr-inv",
		SessionID: "sess", SignalID: "sig-inv", CompletedNodeCount: 3, SavedAt: clock}
	if diff := cmp.Diff(want, resp.Records[0]); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
}

func TestCheckpointList(t *testing.T) {
	ctx := t.Context()
	s, _ := openStore(t, sqlite.Config{})
	cp := s.Checkpoints()
	ids := []string{"a%", "a_", "ab", "b", "\u00ff", "\U0010ffff"}
	for i, id := range ids {
		r := suspended(id)
		r.CorrelationID = fmt.Sprint("corr-", i%2)
		if i == 0 {
			r.SessionID, r.SignalID = "", ""
		}
		if err := cp.Save(ctx, r); err != nil {
			t.Fatal(err)
		}
		r.Kind = checkpoint.KindCheckpoint
		if err := cp.Save(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req checkpoint.ListRequest) []string {
		t.Helper()
		resp, err := cp.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, r := range resp.Records {
			if r.Kind != req.Kind {
				t.Errorf("listed a %s record for kind %s", r.Kind, req.Kind)
			}
			out = append(out, r.InvocationID)
		}
		return out
	}
	k := checkpoint.KindSuspended
	for _, tc := range []struct {
		req  checkpoint.ListRequest
		want []string
	}{
		{checkpoint.ListRequest{Kind: k}, ids},
		{checkpoint.ListRequest{Kind: k, CorrelationID: "corr-1"}, []string{"a_", "b", "\U0010ffff"}},
		{checkpoint.ListRequest{Kind: k, CorrelationID: "corr-0", SessionID: "sess"}, []string{"ab", "\u00ff"}},
		{checkpoint.ListRequest{Kind: k, SignalID: "sig-b", SessionID: "sess", CorrelationID: "corr-1"}, []string{"b"}},
		{checkpoint.ListRequest{Kind: k, SignalID: "sig-b", CorrelationID: "corr-0"}, []string{}},
		{checkpoint.ListRequest{Kind: k, SignalID: "sig-a%"}, []string{}}, // saved without a signal
		{checkpoint.ListRequest{Kind: k, SignalID: "%"}, []string{}},
		{checkpoint.ListRequest{Kind: k, PageToken: session.EncodePageToken("b")}, []string{"\u00ff", "\U0010ffff"}},
		{checkpoint.ListRequest{Kind: k, PageToken: session.EncodePageToken("\U0010ffff")}, []string{}},
	} {
		if diff := cmp.Diff(tc.want, list(tc.req)); diff != "" {
			t.Errorf("List(%+v) (-want +got):\n%s", tc.req, diff)
		}
	}
	// Exact page boundary: no token when nothing follows.
	resp, err := cp.List(ctx, checkpoint.ListRequest{Kind: k, PageSize: len(ids)})
	if err != nil || len(resp.Records) != len(ids) || resp.NextPageToken != "" {
		t.Errorf("List(PageSize=all) = %d records, token %q, %v", len(resp.Records), resp.NextPageToken, err)
	}
	resp, err = cp.List(ctx, checkpoint.ListRequest{Kind: k, PageSize: len(ids) - 1})
	if err != nil || resp.NextPageToken != session.EncodePageToken(ids[len(ids)-2]) {
		t.Errorf("List(PageSize=all-1) token %q, %v", resp.NextPageToken, err)
	}
	if _, err := cp.List(ctx, checkpoint.ListRequest{Kind: k, PageToken: "%%"}); !errors.Is(err, checkpoint.ErrInvalidRequest) {
		t.Errorf("List with a malformed token = %v", err)
	}
}

// TestCheckpointTakeAcrossStores races takers on two Stores sharing a
// file (two writers contending for the file lock, as two processes do):
// every record is taken exactly once.
func TestCheckpointTakeAcrossStores(t *testing.T) {
	ctx := t.Context()
	s1, path := openStore(t, sqlite.Config{})
	s2, _ := openStore(t, sqlite.Config{Path: path})
	const records, workers = 50, 16
	for i := range records {
		if err := s1.Checkpoints().Save(ctx, suspended(fmt.Sprintf("r%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	won := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		cp := []*sqlite.Store{s1, s2}[w%2].Checkpoints()
		wg.Go(func() {
			for i := range records {
				id := fmt.Sprintf("r%03d", (i+w*7)%records) // workers start at different records
				r, err := cp.Take(ctx, key(id))
				switch {
				case err == nil:
					if string(r.Data) != `{"id":"`+id+`"}` {
						t.Errorf("took %s with data %s", id, r.Data)
					}
					mu.Lock()
					won[id]++
					mu.Unlock()
				case !errors.Is(err, checkpoint.ErrNotFound):
					t.Errorf("Take(%s): %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	for i := range records {
		if id := fmt.Sprintf("r%03d", i); won[id] != 1 {
			t.Errorf("%s was taken %d times", id, won[id])
		}
	}
	if resp, err := s2.Checkpoints().List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended}); err != nil || len(resp.Records) != 0 {
		t.Errorf("records left after the takes: %+v, %v", resp.Records, err)
	}
}

const takeHelperEnv = "ARMATURE_SQLITE_TAKE_HELPER"

// TestCheckpointTakeAcrossProcesses races this process against child
// processes (this test binary, re-run as TestCheckpointTakeHelper) taking
// the same records from one file: every record is taken exactly once.
func TestCheckpointTakeAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	ctx := t.Context()
	s, path := openStore(t, sqlite.Config{Shared: true})
	const records, children = 400, 3
	for i := range records {
		if err := s.Checkpoints().Save(ctx, suspended(fmt.Sprintf("p%03d", i))); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Dir(path)
	outs := make([]bytes.Buffer, children)
	cmds := make([]*osexec.Cmd, children)
	for c := range children {
		cmd := osexec.CommandContext(ctx, os.Args[0], "-test.run=^TestCheckpointTakeHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d", takeHelperEnv, path, c, records))
		cmd.Stdout, cmd.Stderr = &outs[c], &outs[c]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[c] = cmd
	}
	// Start everyone at once: wait for the children to be ready.
	deadline := time.Now().Add(30 * time.Second)
	for c := 0; c < children; {
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("ready-", c))); err == nil {
			c++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatal("the helper processes did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	won := map[string]int{}
	mine := takeAll(ctx, s, children, records)
	for _, id := range mine {
		won[id]++
	}
	perProcess := []int{len(mine)}
	for c, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", c, err, outs[c].String())
		}
		sc := bufio.NewScanner(&outs[c])
		n := 0
		for sc.Scan() {
			if id, ok := strings.CutPrefix(sc.Text(), "won "); ok {
				won[id]++
				n++
			}
		}
		perProcess = append(perProcess, n)
	}
	t.Logf("records won per process (this one first): %v", perProcess)
	for i := range records {
		if id := fmt.Sprintf("p%03d", i); won[id] != 1 {
			t.Errorf("%s was taken %d times", id, won[id])
		}
	}
}

// takeAll takes every record from a starting offset, returning the ids
// won; a failure other than ErrNotFound panics (the helper has no t to
// report to that the parent would see otherwise).
func takeAll(ctx context.Context, s *sqlite.Store, offset, records int) []string {
	var won []string
	for i := range records {
		id := fmt.Sprintf("p%03d", (i+offset*records/4)%records)
		_, err := s.Checkpoints().Take(ctx, key(id))
		switch {
		case err == nil:
			won = append(won, id)
		case !errors.Is(err, checkpoint.ErrNotFound):
			panic(fmt.Sprintf("Take(%s): %v", id, err))
		}
	}
	return won
}

// TestCheckpointTakeHelper is the child process of
// TestCheckpointTakeAcrossProcesses; it does nothing in a normal run.
func TestCheckpointTakeHelper(t *testing.T) {
	env := os.Getenv(takeHelperEnv)
	if env == "" {
		t.Skip("run by TestCheckpointTakeAcrossProcesses")
	}
	var path string
	var child, records int
	parts := strings.Split(env, "|")
	if len(parts) != 3 {
		t.Fatalf("bad %s %q", takeHelperEnv, env)
	}
	path = parts[0]
	if _, err := fmt.Sscan(parts[1]+" "+parts[2], &child, &records); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s, err := sqlite.Open(ctx, sqlite.Config{Path: path, BusyTimeout: 30 * time.Second, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	dir := filepath.Dir(path)
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("ready-", child)), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "go")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no go signal")
		}
	}
	for _, id := range takeAll(ctx, s, child, records) {
		fmt.Println("won", id)
	}
}

func TestCheckpointCorruptRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage string
	}{
		{"data not JSON", `UPDATE checkpoint_records SET data = X'7b6e6f7065'`},
		{"truncated data", `UPDATE checkpoint_records SET data = substr(data, 1, 3)`},
		{"empty data", `UPDATE checkpoint_records SET data = X''`},
		{"data smuggling two values", `UPDATE checkpoint_records SET data = CAST('1 2' AS BLOB)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, path := openStore(t, sqlite.Config{})
			cp := s.Checkpoints()
			if err := cp.Save(ctx, suspended("inv")); err != nil {
				t.Fatal(err)
			}
			exec(t, rawDB(t, path), tc.damage)
			_, err := cp.Load(ctx, key("inv"))
			checkCorrupt(t, "Load", err)
			_, err = cp.Take(ctx, key("inv"))
			checkCorrupt(t, "Take", err)
			// The failed Take left the record for inspection; Delete
			// clears it.
			var n int
			if err := rawDB(t, path).QueryRow(`SELECT count(*) FROM checkpoint_records`).Scan(&n); err != nil || n != 1 {
				t.Errorf("after a failed Take: %d rows (%v), want 1", n, err)
			}
			if err := cp.Delete(ctx, key("inv")); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		damage string
	}{
		{"empty invocation id", `UPDATE checkpoint_records SET invocation_id = ''`},
		{"control character in invocation id", `UPDATE checkpoint_records SET invocation_id = 'a' || char(1)`},
		{"invocation id not UTF-8", `UPDATE checkpoint_records SET invocation_id = CAST(X'ff' AS TEXT)`},
	} {
		t.Run("List/"+tc.name, func(t *testing.T) {
			s, path := openStore(t, sqlite.Config{})
			if err := s.Checkpoints().Save(t.Context(), suspended("inv")); err != nil {
				t.Fatal(err)
			}
			exec(t, rawDB(t, path), tc.damage)
			_, err := s.Checkpoints().List(t.Context(), checkpoint.ListRequest{Kind: checkpoint.KindSuspended})
			checkCorrupt(t, "List", err)
		})
	}
	t.Run("unknown kind", func(t *testing.T) {
		// A record of a kind this code does not know is invisible: no
		// key or listing can name it.
		ctx := t.Context()
		s, path := openStore(t, sqlite.Config{})
		cp := s.Checkpoints()
		if err := cp.Save(ctx, suspended("inv")); err != nil {
			t.Fatal(err)
		}
		exec(t, rawDB(t, path), `UPDATE checkpoint_records SET kind = 'from the future'`)
		if _, err := cp.Load(ctx, key("inv")); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("Load = %v, want ErrNotFound", err)
		}
		if _, err := cp.Take(ctx, key("inv")); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Errorf("Take = %v, want ErrNotFound", err)
		}
		if resp, err := cp.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended}); err != nil || len(resp.Records) != 0 {
			t.Errorf("List = %+v, %v", resp.Records, err)
		}
	})
}

func checkCorrupt(t *testing.T, op string, err error) {
	t.Helper()
	if errcat.Of(err) != errcat.CheckpointRecordInvalid || !errors.Is(err, sqlite.ErrCorrupt) {
		t.Fatalf("%s of a damaged record = %v, want checkpoint_record_invalid wrapping ErrCorrupt", op, err)
	}
	if !strings.HasPrefix(err.Error(), "sqlite: ") {
		t.Errorf("error %q lacks the sqlite: prefix", err)
	}
}

func TestCheckpointErrors(t *testing.T) {
	s, _ := openStore(t, sqlite.Config{})
	cp := s.Checkpoints()
	ctx := t.Context()
	if err := cp.Save(ctx, suspended("inv")); err != nil {
		t.Fatal(err)
	}
	_, e1 := cp.Load(ctx, key("missing"))
	_, e2 := cp.Take(ctx, key("missing"))
	e3 := cp.Save(ctx, checkpoint.Record{InvocationID: "x", Kind: checkpoint.KindCheckpoint})
	_, e4 := cp.List(ctx, checkpoint.ListRequest{Kind: "weird"})
	e5 := cp.Delete(ctx, checkpoint.Key{InvocationID: "x\n", Kind: checkpoint.KindCheckpoint})
	_, e6 := cp.Load(ctx, checkpoint.Key{InvocationID: strings.Repeat("x", session.MaxIDLength+1), Kind: checkpoint.KindCheckpoint})
	for i, tc := range []struct {
		err  error
		want error
	}{{e1, checkpoint.ErrNotFound}, {e2, checkpoint.ErrNotFound}, {e3, checkpoint.ErrInvalidRequest},
		{e4, checkpoint.ErrInvalidRequest}, {e5, checkpoint.ErrInvalidRequest}, {e6, checkpoint.ErrInvalidRequest}} {
		if !errors.Is(tc.err, tc.want) || !strings.HasPrefix(tc.err.Error(), "sqlite: ") {
			t.Errorf("error %d = %v, want %v with the sqlite: prefix", i, tc.err, tc.want)
		}
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, c1 := cp.Load(canceled, key("inv"))
	_, c2 := cp.Take(canceled, key("inv"))
	c3 := cp.Save(canceled, suspended("inv"))
	c4 := cp.Delete(canceled, key("inv"))
	_, c5 := cp.List(canceled, checkpoint.ListRequest{Kind: checkpoint.KindSuspended})
	for i, err := range []error{c1, c2, c3, c4, c5} {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("op %d with a canceled context = %v, want context.Canceled", i, err)
		}
	}
	if _, err := cp.Load(ctx, key("inv")); err != nil {
		t.Errorf("canceled operations changed the record: %v", err)
	}

	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	_, d1 := cp.Load(ctx, key("inv"))
	_, d2 := cp.Take(ctx, key("inv"))
	d3 := cp.Save(ctx, suspended("inv"))
	d4 := cp.Delete(ctx, key("inv"))
	_, d5 := cp.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended})
	for i, err := range []error{d1, d2, d3, d4, d5} {
		if !errors.Is(err, session.ErrClosed) {
			t.Errorf("op %d on a closed store = %v, want session.ErrClosed", i, err)
		}
	}
}

// TestCheckpointSaveFailure makes the file unwritable under the store:
// a failed write is categorized checkpoint_save_failed, a failed read is
// not categorized.
func TestCheckpointSaveFailure(t *testing.T) {
	ctx := t.Context()
	s, path := openStore(t, sqlite.Config{BusyTimeout: 50 * time.Millisecond})
	cp := s.Checkpoints()
	if err := cp.Save(ctx, suspended("inv")); err != nil {
		t.Fatal(err)
	}
	// Another connection holds the write lock past the busy timeout.
	db := rawDB(t, path)
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck
	for op, err := range map[string]error{
		"Save":   cp.Save(ctx, suspended("inv")),
		"Delete": cp.Delete(ctx, key("inv")),
		"Take": func() error {
			_, err := cp.Take(ctx, key("inv"))
			return err
		}(),
	} {
		if errcat.Of(err) != errcat.CheckpointSaveFailed || !strings.HasPrefix(err.Error(), "sqlite: ") {
			t.Errorf("%s while the file is locked = %v, want checkpoint_save_failed", op, err)
		}
	}
	// Reads do not wait for the writer (WAL).
	if _, err := cp.Load(ctx, key("inv")); err != nil {
		t.Errorf("Load while the file is locked: %v", err)
	}
}

// FuzzLoadCheckpoint writes arbitrary values straight into
// checkpoint_records (as a damaged or foreign-written file would hold
// them) and checks that Load, Take, List and Delete never panic, fail
// only with errors a caller can act on, and return only valid JSON.
func FuzzLoadCheckpoint(f *testing.F) {
	f.Add("inv", "suspended", []byte(`{"a":1}`), []byte("v1"), int64(3), int64(1), "sig")
	f.Add("inv", "checkpoint", []byte(`{bad`), []byte("\xff"), int64(-1), int64(-1<<63), "")
	f.Add("", "suspended", []byte(``), []byte(""), int64(1<<62), int64(1<<63-1), "sig")
	f.Add("a\x00b", "suspended", []byte("\x00\x01"), []byte("\x00"), int64(0), int64(0), "\xff")
	f.Add("\xff", "suspended", []byte(`null`), []byte("v"), int64(0), int64(0), "s")
	f.Add("ok", "SUSPENDED", []byte(`[]`), []byte("v"), int64(0), int64(0), "s")

	s, path := openStore(f, sqlite.Config{})
	cp := s.Checkpoints()
	db := rawDB(f, path)
	n := 0
	f.Fuzz(func(t *testing.T, id, kind string, data, schemaVersion []byte, count, savedAt int64, signal string) {
		n++
		ctx := t.Context()
		signal = fmt.Sprintf("%s-%d", signal, n) // this run's rows only
		// STRICT tables refuse values of the wrong type; CASTs make every
		// byte string storable in its column.
		if _, err := db.Exec(`INSERT INTO checkpoint_records (invocation_id, kind, correlation_id, session_id,
			signal_id, schema_version, completed_node_count, saved_at, data)
			VALUES (CAST(? AS TEXT), CAST(? AS TEXT), '', '', CAST(? AS TEXT), CAST(? AS TEXT), ?, ?, CAST(? AS BLOB))`,
			id, kind, signal, schemaVersion, count, savedAt, data); err != nil {
			t.Skip(err)
		}
		defer func() {
			if _, err := db.Exec(`DELETE FROM checkpoint_records WHERE signal_id = CAST(? AS TEXT)`, signal); err != nil {
				t.Fatal(err)
			}
		}()
		acceptable := func(err error) bool {
			return err == nil || errcat.Of(err) == errcat.CheckpointRecordInvalid ||
				errors.Is(err, checkpoint.ErrNotFound) || errors.Is(err, checkpoint.ErrInvalidRequest)
		}
		k := checkpoint.Key{InvocationID: id, Kind: checkpoint.Kind(kind)}
		loaded, err := cp.Load(ctx, k)
		if !acceptable(err) {
			t.Fatalf("Load = %v", err)
		}
		if err == nil && (!json.Valid(loaded.Data) || loaded.InvocationID != id || string(loaded.Kind) != kind) {
			t.Fatalf("Load returned %+v", loaded)
		}
		for _, kd := range []checkpoint.Kind{checkpoint.KindSuspended, checkpoint.KindCheckpoint} {
			resp, err := cp.List(ctx, checkpoint.ListRequest{Kind: kd, SignalID: signal})
			if !acceptable(err) {
				t.Fatalf("List = %v", err)
			}
			for _, r := range resp.Records {
				if r.Kind != kd || r.SignalID != signal {
					t.Fatalf("List(%s, %q) returned %+v", kd, signal, r)
				}
			}
		}
		taken, err := cp.Take(ctx, k)
		if !acceptable(err) {
			t.Fatalf("Take = %v", err)
		}
		if (taken == nil) != (loaded == nil) {
			t.Fatalf("Load returned %v but Take %v (%v)", loaded, taken, err)
		}
		if taken != nil && !cmp.Equal(loaded, taken) {
			t.Fatalf("Take returned %+v, Load %+v", taken, loaded)
		}
		if err := cp.Delete(ctx, k); !acceptable(err) {
			t.Fatalf("Delete = %v", err)
		}
	})
}
