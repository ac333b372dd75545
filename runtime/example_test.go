package runtime_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/armature-go/armature/runtime"
)

// A turn that calls a tool and completes, recorded and listed.
func Example() {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, NewID: func() string { return "run-1" }})
	if err != nil {
		panic(err)
	}
	defer rec.Close(ctx) // on shutdown: writes what is still queued
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1", AgentID: "assistant"})
	if err != nil {
		panic(err)
	}
	_ = turn.Adapter(tctx, runtime.PhaseToolStart, map[string]any{"toolId": "search", "args": map[string]string{"q": "go"}})
	_ = turn.Adapter(tctx, runtime.PhaseToolResult, map[string]any{"toolId": "search", "output": "found"})
	if err := turn.Complete(tctx, map[string]string{"text": "Go is a language."}); err != nil {
		panic(err)
	}
	// Nobody watched the session live: the turn was handed to the
	// Recorder's flusher. Wait for it to be in the store.
	if err := rec.Flush(ctx); err != nil {
		panic(err)
	}

	events, _ := store.Events(ctx, runtime.EventsRequest{Tenant: "acme", SessionID: "s1"})
	for _, e := range events {
		fmt.Println(strings.TrimSpace(fmt.Sprint(e.ID, " ", e.Seq, " ", e.Type, " ", string(e.Data))))
	}
	run, _ := store.Run(ctx, "acme", "run-1")
	fmt.Println(run.Status, string(run.Output))
	// Output:
	// 1 1 runtime.request.started
	// 2 2 runtime.adapter.event {"event":{"adapter":"armature","args":{"q":"go"},"phase":"agent.tool.start","toolId":"search"}}
	// 3 3 runtime.adapter.event {"event":{"adapter":"armature","output":"found","phase":"agent.tool.result","toolId":"search"}}
	// 4 4 runtime.request.completed {"output":{"text":"Go is a language."}}
	// completed {"text":"Go is a language."}
}

// Cancelling a live turn from another request (e.g. a DELETE on the run).
func ExampleRecorder_Cancel() {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, _ := runtime.NewRecorder(runtime.RecorderConfig{Store: store})
	turn, tctx, _ := rec.Begin(ctx, runtime.BeginRequest{Tenant: "acme", SessionID: "s1"})

	fmt.Println(rec.Cancel(ctx, "acme", turn.ID()))
	<-tctx.Done() // the engine, running under tctx, stops
	_ = turn.Fail(tctx, runtime.RunError{Message: tctx.Err().Error()})
	_ = rec.Flush(ctx)
	run, _ := store.Run(ctx, "acme", turn.ID())
	fmt.Println(run.Status)
	// Output:
	// true
	// cancelled
}

// The events a server records for every turn, written from fields
// rather than a map: the same payloads as Turn.Adapter's.
func ExampleTurn_AdapterFields() {
	ctx := context.Background()
	store := runtime.NewMemoryStore(runtime.MemoryConfig{})
	rec, err := runtime.NewRecorder(runtime.RecorderConfig{Store: store, NewID: func() string { return "run-1" }})
	if err != nil {
		panic(err)
	}
	defer rec.Close(ctx)
	turn, tctx, err := rec.Begin(ctx, runtime.BeginRequest{SessionID: "s1", Adapter: "adk"})
	if err != nil {
		panic(err)
	}
	_ = turn.AdapterFields(tctx, runtime.PhaseToolStart, runtime.TextField("toolId", "call-1"), runtime.TextField("name", "search"),
		runtime.JSONField("args", []byte(`{"q": "go"}`)))
	_ = turn.AdapterFields(tctx, runtime.PhaseOutputDelta, runtime.TextField("text", "Go is a language."))
	if err := turn.Complete(tctx, nil); err != nil {
		panic(err)
	}
	if err := rec.Flush(ctx); err != nil {
		panic(err)
	}
	events, _ := store.Events(ctx, runtime.EventsRequest{RunID: "run-1"})
	for _, e := range events[1 : len(events)-1] {
		fmt.Println(string(e.Data))
	}
	// Output:
	// {"event":{"adapter":"adk","args":{"q":"go"},"name":"search","phase":"agent.tool.start","toolId":"call-1"}}
	// {"event":{"adapter":"adk","phase":"agent.output.delta","text":"Go is a language."}}
}
