// Package jsonexact makes encoding/json's field matching exact.
//
// encoding/json matches an object's keys to a struct's fields without
// regard to case ("Session_ID" sets the field tagged "session_id"), and
// the last of two keys naming one field wins. The wire protocols Armature
// serves name their fields exactly and ignore unknown ones, so a key that
// differs from a field's name only in case is an unknown field: Filter
// drops it before the body is decoded, at every depth the type given
// describes, and a gateway that checks the exact names sees what the
// server uses.
//
//	body = jsonexact.Filter(body, reflect.TypeFor[request]())
//	err := json.Unmarshal(body, &req)
//
// A part of the body decoded later from a json.RawMessage is described
// by a shape: a struct that embeds the request and shadows the raw field
// with the type it is decoded as, so that one pass filters it all.
//
//	type shape struct {
//		request
//		Messages []message `json:"messages"` // request.Messages is []json.RawMessage
//	}
package jsonexact
