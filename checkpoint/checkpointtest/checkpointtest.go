// Package checkpointtest is the conformance suite every checkpoint.Store
// backend runs: round trips per record kind, kind isolation, the atomic
// Take, idempotent Delete, filtered and paginated listing, and input
// validation.
//
//	func TestStore(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) checkpoint.Store { return openTestStore(t) })
//	}
package checkpointtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/checkpoint"
)

// Run runs the suite; newStore returns a fresh, empty store per subtest.
func Run(t *testing.T, newStore func(t *testing.T) checkpoint.Store) {
	t.Helper()
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s checkpoint.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"KindsAreIndependent", testKinds},
		{"TakeIsExactlyOnce", testTake},
		{"Delete", testDelete},
		{"List", testList},
		{"InvalidInput", testInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func rec(id string, kind checkpoint.Kind, data string) checkpoint.Record {
	return checkpoint.Record{InvocationID: id, Kind: kind, CorrelationID: "corr-" + id, SessionID: "sess",
		SignalID: "sig-" + id, SchemaVersion: "v1", Data: json.RawMessage(data), CompletedNodeCount: 2}
}

func testRoundTrip(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	in := rec("inv-1", checkpoint.KindSuspended, `{"positions":[{"node":"gate","state":{"n":1}}]}`)
	if err := s.Save(ctx, in); err != nil {
		t.Fatal(err)
	}
	in.Data[2] = 'X' // the store must have copied it
	got, err := s.Load(ctx, checkpoint.Key{InvocationID: "inv-1", Kind: checkpoint.KindSuspended})
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Data) != `{"positions":[{"node":"gate","state":{"n":1}}]}` || got.CorrelationID != "corr-inv-1" ||
		got.SessionID != "sess" || got.SignalID != "sig-inv-1" || got.SchemaVersion != "v1" || got.CompletedNodeCount != 2 || got.SavedAt.IsZero() {
		t.Errorf("loaded %+v", got)
	}
	if err := s.Save(ctx, rec("inv-1", checkpoint.KindSuspended, `{"v":2}`)); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Load(ctx, checkpoint.Key{InvocationID: "inv-1", Kind: checkpoint.KindSuspended})
	if string(got.Data) != `{"v":2}` {
		t.Errorf("a save replaces the record: got %s", got.Data)
	}
}

func testKinds(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	if err := s.Save(ctx, rec("inv", checkpoint.KindCheckpoint, `{"c":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(ctx, checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindSuspended}); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("a checkpoint record must not load as a paused record: %v", err)
	}
	if err := s.Save(ctx, rec("inv", checkpoint.KindSuspended, `{"p":1}`)); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Load(ctx, checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindCheckpoint})
	p, _ := s.Load(ctx, checkpoint.Key{InvocationID: "inv", Kind: checkpoint.KindSuspended})
	if c == nil || p == nil || string(c.Data) != `{"c":1}` || string(p.Data) != `{"p":1}` {
		t.Fatalf("kinds overwrote each other: %v / %v", c, p)
	}
}

func testTake(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	k := checkpoint.Key{InvocationID: "paused", Kind: checkpoint.KindSuspended}
	if err := s.Save(ctx, rec("paused", checkpoint.KindSuspended, `{}`)); err != nil {
		t.Fatal(err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Take(ctx, k)
			switch {
			case err == nil && r.InvocationID == "paused":
				wins.Add(1)
			case !errors.Is(err, checkpoint.ErrNotFound):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d concurrent takes succeeded, want exactly 1", wins.Load())
	}
	if _, err := s.Load(ctx, k); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("a taken record must be gone: %v", err)
	}
}

func testDelete(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	k := checkpoint.Key{InvocationID: "d", Kind: checkpoint.KindCheckpoint}
	if err := s.Save(ctx, rec("d", checkpoint.KindCheckpoint, `{}`)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatalf("Delete must be idempotent: %v", err)
		}
	}
	if _, err := s.Load(ctx, k); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("Load after Delete = %v", err)
	}
}

func testList(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	for i := range 12 {
		r := rec(fmt.Sprintf("i%02d", i), checkpoint.KindSuspended, `{}`)
		if i%3 == 0 {
			r.SessionID = "other"
		}
		if err := s.Save(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(ctx, rec("cp", checkpoint.KindCheckpoint, `{}`)); err != nil {
		t.Fatal(err)
	}
	var ids []string
	tok := ""
	for page := 0; ; page++ {
		resp, err := s.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, PageSize: 5, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.Records {
			ids = append(ids, r.InvocationID)
		}
		if tok = resp.NextPageToken; tok == "" || page > 10 {
			break
		}
	}
	if len(ids) != 12 || ids[0] != "i00" || ids[11] != "i11" {
		t.Errorf("paged listing = %v", ids)
	}
	resp, err := s.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SignalID: "sig-i04"})
	if err != nil || len(resp.Records) != 1 || resp.Records[0].InvocationID != "i04" {
		t.Errorf("list by signal id = %+v, %v", resp.Records, err)
	}
	resp, _ = s.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SessionID: "other"})
	if len(resp.Records) != 4 {
		t.Errorf("list by session = %d records, want 4", len(resp.Records))
	}
	resp, _ = s.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindCheckpoint})
	if len(resp.Records) != 1 || resp.Records[0].InvocationID != "cp" {
		t.Errorf("list of checkpoints = %+v", resp.Records)
	}
}

func testInvalid(t *testing.T, s checkpoint.Store) {
	ctx := t.Context()
	for _, r := range []checkpoint.Record{
		rec("", checkpoint.KindSuspended, `{}`),
		rec("x", "weird", `{}`),
		rec("x", checkpoint.KindSuspended, `{not json`),
		// Metadata every store keeps as text: refused alike by every
		// store (PostgreSQL cannot keep NUL bytes or invalid UTF-8).
		func() checkpoint.Record {
			r := rec("x", checkpoint.KindSuspended, `{}`)
			r.SignalID = "a\x00b"
			return r
		}(),
		func() checkpoint.Record {
			r := rec("x", checkpoint.KindSuspended, `{}`)
			r.SessionID = "bad\xffutf8"
			return r
		}(),
		func() checkpoint.Record {
			r := rec("x", checkpoint.KindSuspended, `{}`)
			r.CorrelationID = "a\x00"
			return r
		}(),
		func() checkpoint.Record {
			r := rec("x", checkpoint.KindSuspended, `{}`)
			r.SchemaVersion = "\xfe"
			return r
		}(),
		func() checkpoint.Record {
			r := rec("x", checkpoint.KindSuspended, `{}`)
			r.CompletedNodeCount = -1
			return r
		}(),
	} {
		if err := s.Save(ctx, r); !errors.Is(err, checkpoint.ErrInvalidRequest) {
			t.Errorf("Save(%+v) = %v, want ErrInvalidRequest", r, err)
		}
	}
	if _, err := s.List(ctx, checkpoint.ListRequest{}); !errors.Is(err, checkpoint.ErrInvalidRequest) {
		t.Errorf("List without a kind = %v", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Save(canceled, rec("c", checkpoint.KindSuspended, `{}`)); err == nil {
		t.Error("Save with a canceled context succeeded")
	}
}
