package checkpoint_test

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/checkpoint"
)

func TestSentinelPrefixes(t *testing.T) {
	for _, err := range []error{checkpoint.ErrNotFound, checkpoint.ErrInvalidRequest} {
		if !strings.HasPrefix(err.Error(), "checkpoint: ") {
			t.Errorf("sentinel %q lacks the package prefix", err)
		}
	}
}
