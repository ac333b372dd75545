package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// TestEmptyTenantIsDefaultTenant: an embedded caller drives
// *server.Server through the adapter.Runtime interfaces with the zero
// tenant "" everywhere. "" means server.DefaultTenant on every
// interface: Submit runs and records the turn under it, and Run,
// Events, Runs, Cancel and Subscribe find that run and its events.
// Before, only Submit mapped "": the run it returned was
// runtime.ErrNotFound from Run, its events were empty, Runs listed
// nothing, Cancel of it was ErrNotFound, and a Subscribe(ctx, "",
// session) made before the turn received none of its events.
func TestEmptyTenantIsDefaultTenant(t *testing.T) {
	ctx := context.Background()
	var rt adapter.Runtime = newRuntime(t)
	events, cancel := rt.Subscribe(ctx, "", "e1")
	defer cancel()
	resp, err := rt.Submit(ctx, adapter.SubmitRequest{SessionID: "e1", Message: llm.UserText("where is order 12?")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Run(ctx, "", resp.RunID); err != nil {
		t.Errorf("Run(\"\", %s) of the run Submit(Tenant \"\") returned: %v", resp.RunID, err)
	}
	if evs, err := rt.Events(ctx, runtime.EventsRequest{RunID: resp.RunID}); err != nil || len(evs) == 0 {
		t.Errorf("Events(tenant \"\") of that run: %d events, %v", len(evs), err)
	}
	if l, err := rt.Runs(ctx, runtime.ListRunsRequest{SessionID: "e1"}); err != nil || len(l.Runs) == 0 {
		t.Errorf("Runs(tenant \"\", session e1): %d runs, %v", len(l.Runs), err)
	}
	if _, err := rt.Cancel(ctx, "", resp.RunID); err != nil {
		t.Errorf("Cancel(\"\", %s): %v", resp.RunID, err)
	}
	select {
	case e := <-events:
		_ = e
	case <-time.After(time.Second):
		t.Errorf("Subscribe(\"\", e1) made before the turn received none of its events")
	}
}
