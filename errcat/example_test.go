package errcat_test

import (
	"errors"
	"fmt"

	"github.com/armature-go/armature/errcat"
)

func Example() {
	err := fmt.Errorf("calling the model: %w",
		errcat.Wrap(errcat.NodeException, "node \"b\"", errors.New("boom")))

	fmt.Println(errcat.Of(err))
	fmt.Println(errors.Is(err, errcat.NodeException))
	fmt.Println(errors.Is(err, errcat.RoutingError))
	// Output:
	// node_exception
	// true
	// false
}

// A package's sentinel that carries a category: its message keeps the
// package's prefix, errors.Is finds it through wrapping, and Of reads
// its category.
func ExampleSentinel() {
	ErrGone := errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "mypkg: the approval's state is gone")
	err := fmt.Errorf("resume call-7: %w", ErrGone)
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrGone), errcat.Of(err))
	// Output:
	// resume call-7: mypkg: the approval's state is gone
	// true harness_signal_correlation_failed
}
