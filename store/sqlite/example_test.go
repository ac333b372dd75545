package sqlite_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/armature-go/armature/checkpoint"
	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/session"
	"github.com/armature-go/armature/store/sqlite"
)

func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "armature-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	// First turn: create the record.
	w, err := store.Save(ctx, session.SaveRequest{
		SessionID: "user-42", SchemaVersion: "v1",
		State: map[string]json.RawMessage{"messages": json.RawMessage(`["hi"]`)},
	})
	if err != nil {
		log.Fatal(err)
	}
	// Next turn: write only the new message, conditional on the version.
	w, err = store.Append(ctx, session.AppendRequest{
		SessionID: "user-42", ExpectedVersion: w.Version,
		Append: map[string][]json.RawMessage{"messages": {json.RawMessage(`"hello!"`)}},
	})
	if err != nil {
		log.Fatal(err)
	}
	rec, err := store.Load(ctx, session.LoadRequest{SessionID: "user-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.Version, string(rec.State["messages"]))
	// A caller holding version 2 is current: nothing is read.
	_, err = store.Load(ctx, session.LoadRequest{SessionID: "user-42", IfVersionNot: w.Version})
	fmt.Println(err)
	// Output:
	// 2 ["hi","hello!"]
	// sqlite: load: session: not modified
}

// A suspended invocation's paused record is saved on one worker and taken
// by whichever worker receives the signal first: a second Take finds
// nothing.
func ExampleStore_Checkpoints() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "armature-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	records := store.Checkpoints()

	err = records.Save(ctx, checkpoint.Record{
		InvocationID: "inv-7", Kind: checkpoint.KindSuspended, CorrelationID: "order-123",
		SignalID: "approval-123", SchemaVersion: "v1", CompletedNodeCount: 2,
		Data: json.RawMessage(`{"state":{"order":123}}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	// The signal coordinator finds the invocation waiting for a signal.
	page, err := records.List(ctx, checkpoint.ListRequest{Kind: checkpoint.KindSuspended, SignalID: "approval-123"})
	if err != nil {
		log.Fatal(err)
	}
	k := checkpoint.Key{InvocationID: page.Records[0].InvocationID, Kind: checkpoint.KindSuspended}
	rec, err := records.Take(ctx, k)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(rec.InvocationID, string(rec.Data))
	_, err = records.Take(ctx, k)
	fmt.Println(errors.Is(err, checkpoint.ErrNotFound))
	// Output:
	// inv-7 {"state":{"order":123}}
	// true
}

// Recording turns into the file, recovering runs a crash left started,
// and replaying a session's events after an SSE Last-Event-ID.
func ExampleStore_Runs() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "armature-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlite.Open(ctx, sqlite.Config{Path: filepath.Join(dir, "armature.db")})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store.Runs()})
	if err != nil {
		log.Fatal(err)
	}
	defer rec.Close(ctx)                        // on shutdown, before the store closes: writes what is queued
	if _, err := rec.Recover(ctx); err != nil { // at startup, before serving
		log.Fatal(err)
	}
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "assistant"})
	if err != nil {
		log.Fatal(err)
	}
	_ = turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "Hel"})
	_ = turn.Adapter(tctx, runtime.PhaseOutputDelta, map[string]any{"text": "lo"})
	if err := turn.Complete(tctx, "Hello"); err != nil {
		log.Fatal(err)
	}
	if err := rec.Flush(ctx); err != nil { // the turn was group-committed: wait for it
		log.Fatal(err)
	}

	lastEventID := int64(1) // the client saw the started event
	events, err := store.Runs().Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s1", AfterID: lastEventID})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range events {
		fmt.Println(e.ID, e.Type, string(e.Data))
	}
	// Output:
	// 2 runtime.adapter.event {"event":{"adapter":"armature","phase":"agent.output.delta","text":"Hel"}}
	// 3 runtime.adapter.event {"event":{"adapter":"armature","phase":"agent.output.delta","text":"lo"}}
	// 4 runtime.request.completed {"output":"Hello"}
}
