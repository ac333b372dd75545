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
