package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/bench"
	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

// message returns a chat message of about 100 bytes of JSON.
func message(role string, i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"role":%q,"content":"message number %08d, padded to about one hundred bytes....."}`, role, i))
}

// filledStore opens a store in b's temp dir holding session "s" with
// history items in "messages", and returns it with its version.
func filledStore(b *testing.B, history int) (*sqlite.Store, int64) {
	b.Helper()
	ctx := context.Background()
	s, _ := openStore(b, sqlite.Config{})
	w, err := s.Save(ctx, session.SaveRequest{SessionID: "s", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`), "turns": json.RawMessage(`0`)}})
	if err != nil {
		b.Fatal(err)
	}
	const batch = 500
	for i := 0; i < history; i += batch {
		var items []json.RawMessage
		for j := i; j < min(i+batch, history); j++ {
			items = append(items, message("user", j))
		}
		if w, err = s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: w.Version,
			Append: map[string][]json.RawMessage{"messages": items}}); err != nil {
			b.Fatal(err)
		}
	}
	return s, w.Version
}

// BenchmarkB0 is the storage floor: the bare transaction a durable chat
// turn needs (two message rows and a conditional version bump), through
// database/sql with prepared statements, on the same schema and settings
// as the Store (WAL, synchronous=NORMAL, BEGIN IMMEDIATE). It is the
// workload of package bench, which every comparison measures.
func BenchmarkB0(b *testing.B) {
	bench.B0(b, filepath.Join(b.TempDir(), "b0.db"), sqlite.DurabilityNormal)
}

// BenchmarkAppendTurn is one Store.Append of a chat turn (user message
// plus assistant reply) to a session holding history messages.
func BenchmarkAppendTurn(b *testing.B) {
	for _, history := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			ctx := context.Background()
			s, version := filledStore(b, history)
			user, assistant := message("user", 1), message("assistant", 2)
			b.ReportAllocs()
			for b.Loop() {
				w, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: version,
					Append: map[string][]json.RawMessage{"messages": {user, assistant}}})
				if err != nil {
					b.Fatal(err)
				}
				version = w.Version
			}
		})
	}
}

// BenchmarkAppendTurnMarked is BenchmarkAppendTurn with a mark recorded
// with every turn (an idempotency key and its outcome), preceded by the
// lookup of that key a retransmission check makes.
func BenchmarkAppendTurnMarked(b *testing.B) {
	for _, lookup := range []bool{false, true} {
		b.Run(fmt.Sprintf("lookup=%v", lookup), func(b *testing.B) { appendTurnMarked(b, lookup) })
	}
}

func appendTurnMarked(b *testing.B, lookup bool) {
	ctx := context.Background()
	s, version := filledStore(b, 1000)
	user, assistant := message("user", 1), message("assistant", 2)
	outcome := json.RawMessage(`{"kind":"completed","invocation_id":"0b9f6f3e-4a7c-4d53-9d35-0f7c2a1f7e11","path":"3.2","replies":[` + string(assistant) + `]}`)
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		key := "m:msg-" + strconv.Itoa(n)
		if !lookup {
		} else if _, err := s.LoadMark(ctx, "s", key); !errors.Is(err, session.ErrNotFound) {
			b.Fatal(err)
		}
		w, err := s.Append(ctx, session.AppendRequest{SessionID: "s", ExpectedVersion: version,
			Append: map[string][]json.RawMessage{"messages": {user, assistant}},
			Marks:  []session.Mark{{Key: key, Value: outcome}}})
		if err != nil {
			b.Fatal(err)
		}
		version = w.Version
	}
}

// BenchmarkLoad is a full Load of a session holding history messages.
func BenchmarkLoad(b *testing.B) {
	for _, history := range []int{10, 1000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			ctx := context.Background()
			s, _ := filledStore(b, history)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Load(ctx, session.LoadRequest{SessionID: "s"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadNotModified is a conditional Load that hits: the caller's
// copy is current, so only the version is read.
func BenchmarkLoadNotModified(b *testing.B) {
	ctx := context.Background()
	s, version := filledStore(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(ctx, session.LoadRequest{SessionID: "s", IfVersionNot: version}); err == nil {
			b.Fatal("conditional load of the current version returned a record")
		}
	}
}

// checkpointRecord returns a paused-invocation record whose Data is
// about size bytes of JSON.
func checkpointRecord(id string, size int) checkpoint.Record {
	var data []byte
	data = append(data, `{"positions":[`...)
	for i := 0; len(data) < size-2; i++ {
		if i > 0 {
			data = append(data, ',')
		}
		data = fmt.Appendf(data, `{"namespace":["outer"],"node":"node-%04d","step":%d,"attempt_index":0}`, i, i)
	}
	data = append(data, "]}"...)
	return checkpoint.Record{InvocationID: id, Kind: checkpoint.KindSuspended, CorrelationID: "corr-" + id,
		SessionID: "user-42", SignalID: "approval-" + id, SchemaVersion: "v1", Data: data, CompletedNodeCount: 12}
}

// BenchmarkCheckpointSave is one Save replacing an invocation's ~4 KB
// record, as the engine does at every completed node.
func BenchmarkCheckpointSave(b *testing.B) {
	ctx := context.Background()
	s, _ := openStore(b, sqlite.Config{})
	cp := s.Checkpoints()
	r := checkpointRecord("inv", 4096)
	b.SetBytes(int64(len(r.Data)))
	b.ReportAllocs()
	for b.Loop() {
		r.CompletedNodeCount++
		if err := cp.Save(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckpointTake is one Take of a ~4 KB paused-invocation
// record (the resume of a suspended invocation). Records are saved in
// batches outside the timer.
func BenchmarkCheckpointTake(b *testing.B) {
	ctx := context.Background()
	s, _ := openStore(b, sqlite.Config{})
	cp := s.Checkpoints()
	proto := checkpointRecord("", 4096)
	var ids []string
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		if len(ids) == 0 {
			b.StopTimer()
			for range 1000 {
				r := proto
				r.InvocationID = fmt.Sprintf("inv-%09d", next)
				next++
				if err := cp.Save(ctx, r); err != nil {
					b.Fatal(err)
				}
				ids = append(ids, r.InvocationID)
			}
			b.StartTimer()
		}
		if _, err := cp.Take(ctx, checkpoint.Key{InvocationID: ids[0], Kind: checkpoint.KindSuspended}); err != nil {
			b.Fatal(err)
		}
		ids = ids[1:]
	}
}

// BenchmarkAppendConcurrent is Store.Append of a chat turn from 64
// goroutines at once, each appending to its own session: the writes
// contend for the one writer, which commits what is queued together.
// ns/op is the time per write, not per call.
func BenchmarkAppendConcurrent(b *testing.B) {
	const writers = 64
	ctx := context.Background()
	s, _ := openStore(b, sqlite.Config{})
	versions := make([]int64, writers)
	for i := range writers {
		w, err := s.Save(ctx, session.SaveRequest{SessionID: fmt.Sprintf("s%d", i),
			State: map[string]json.RawMessage{"messages": json.RawMessage(`[]`)}})
		if err != nil {
			b.Fatal(err)
		}
		versions[i] = w.Version
	}
	user, assistant := message("user", 1), message("assistant", 2)
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism((writers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		i := int(next.Add(1) - 1)
		if i >= writers {
			b.Error("more goroutines than sessions")
			return
		}
		id, version := fmt.Sprintf("s%d", i), versions[i]
		for pb.Next() {
			w, err := s.Append(ctx, session.AppendRequest{SessionID: id, ExpectedVersion: version,
				Append: map[string][]json.RawMessage{"messages": {user, assistant}}})
			if err != nil {
				b.Error(err)
				return
			}
			version = w.Version
		}
	})
}
