package uuid_test

import (
	"fmt"

	"github.com/armature-go/armature/internal/uuid"
)

func ExampleNew() {
	id := uuid.New()
	fmt.Println(len(id), uuid.Valid(id))
	// Output: 36 true
}
