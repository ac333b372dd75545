package runtime_test

import (
	"strings"
	"testing"

	"github.com/armature-go/armature/runtime"
)

func TestSentinelPrefixes(t *testing.T) {
	for _, err := range []error{runtime.ErrNotFound, runtime.ErrInvalidRequest, runtime.ErrConflict,
		runtime.ErrTurnEnded, runtime.ErrInvalidConfig, runtime.ErrCancelled} {
		if !strings.HasPrefix(err.Error(), "runtime: ") {
			t.Errorf("sentinel %q lacks the package prefix", err)
		}
	}
}
