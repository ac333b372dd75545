package langfuse_test

import (
	"context"
	"math"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/observe/langfuse"
)

// graph.NewMetadata accepts non-finite floats as invocation metadata (an
// OTel attribute value), which encoding/json refuses: the observer
// copies them into the trace and observation metadata in string form,
// so that the client does not drop every event of the invocation as
// "not encodable".
func TestNonFiniteMetadataKeepsTrace(t *testing.T) {
	h := newHarness(t, langfuseConfigZero())
	g := linear(t)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil,
		graph.WithMetadata(map[string]any{"score": math.Inf(1), "tenantId": "acme"})); err != nil {
		t.Fatal(err)
	}
	trs := h.traces(t, g)
	st := h.client.Stats()
	if len(trs) != 1 || st.Dropped != 0 {
		t.Fatalf("an invocation whose metadata the graph accepted (score=+Inf) reached Langfuse as %d traces; client stats %+v (want 1 trace, 0 dropped)", len(trs), st)
	}
}

func langfuseConfigZero() langfuse.Config { return langfuse.Config{} }
