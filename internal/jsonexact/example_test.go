package jsonexact_test

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/armature-go/armature/internal/jsonexact"
)

func ExampleFilter() {
	type req struct {
		SessionID string `json:"session_id"`
	}
	body := []byte(`{"session_id":"mine","Session_ID":"theirs"}`)
	var plain, exact req
	_ = json.Unmarshal(body, &plain)
	_ = json.Unmarshal(jsonexact.Filter(body, reflect.TypeFor[req]()), &exact)
	fmt.Println(plain.SessionID, exact.SessionID)
	// Output: theirs mine
}
