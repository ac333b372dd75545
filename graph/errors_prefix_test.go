package graph_test

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/graph"
)

func TestSentinelPrefixes(t *testing.T) {
	for _, err := range []error{graph.ErrInvalidOption, graph.ErrNilGraph} {
		if !strings.HasPrefix(err.Error(), "graph: ") {
			t.Errorf("sentinel %q lacks the package prefix", err)
		}
	}
}
