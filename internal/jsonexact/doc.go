// Package jsonexact makes encoding/json's field matching exact.
//
// encoding/json matches an object's keys to a struct's fields without
// regard to case ("Session_ID" sets the field tagged "session_id"), and
// the last of two keys naming one field wins. The wire protocols Armature
// serves name their fields exactly and ignore unknown ones, so a key that
// differs from a field's name only in case is an unknown field: Filter
// drops it before the body is decoded, and a gateway that checks the
// exact names sees what the server uses.
//
//	body = jsonexact.Filter(body, reflect.TypeFor[request]())
//	err := json.Unmarshal(body, &req)
package jsonexact
