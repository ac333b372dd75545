package adapter

import "github.com/armature-go/armature/graph"

// CompileIndexed is Compile, also returning a function that counts the
// sessions whose tool-call index the graph keeps (nil for a
// GraphAdapter's graph).
func CompileIndexed(a Adapter, ws *Workspace, ag *Agent, opts ...graph.CompileOption) (*graph.Graph, func() int, error) {
	g, r, err := compile(a, ws, ag, opts)
	if err != nil || r == nil {
		return g, nil, err
	}
	return g, r.calls.Len, nil
}
