package adk

import (
	"context"
	"reflect"
	"strings"

	"google.golang.org/adk/v2/session"
)

// nulFree is ADK-Go's session service on PostgreSQL, whose JSONB and
// text columns cannot hold U+0000: it replaces U+0000 in every string an
// event or a new session's state carries (text, call arguments and
// responses, state changes, metadata) with U+FFFD, the replacement
// character, before they are stored. Without it a message holding one
// failed at every turn that stored it (a seeded history holding one,
// every turn of the session), with an error the client was told to
// retry.
type nulFree struct{ session.Service }

func (s nulFree) Create(ctx context.Context, req *session.CreateRequest) (*session.CreateResponse, error) {
	if req != nil && req.State != nil {
		scrub(reflect.ValueOf(&req.State).Elem(), 0)
	}
	return s.Service.Create(ctx, req)
}

func (s nulFree) AppendEvent(ctx context.Context, sess session.Session, ev *session.Event) error {
	scrubEvent(ev)
	return s.Service.AppendEvent(ctx, sess, ev)
}

// scrubEvent replaces U+0000 in the strings ev holds with U+FFFD, in
// place.
func scrubEvent(ev *session.Event) {
	if ev != nil {
		scrub(reflect.ValueOf(ev).Elem(), 0)
	}
}

// nul is U+0000, and its replacement.
const nul, replacement = "\x00", "\uFFFD"

// scrub replaces U+0000 in the strings v holds (its exported fields,
// elements, map keys and values, what its pointers and interfaces hold)
// with U+FFFD, setting them in place where v is settable; it reports
// whether v held any. depth bounds the walk.
func scrub(v reflect.Value, depth int) bool {
	if depth > 64 || !v.IsValid() {
		return false
	}
	switch v.Kind() {
	case reflect.String:
		s := v.String()
		if !strings.Contains(s, nul) {
			return false
		}
		if v.CanSet() {
			v.SetString(strings.ReplaceAll(s, nul, replacement))
		}
		return true
	case reflect.Pointer:
		return !v.IsNil() && scrub(v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		// What an interface holds is not settable: scrub a copy and put
		// it back.
		c := reflect.New(v.Elem().Type()).Elem()
		c.Set(v.Elem())
		if !scrub(c, depth+1) {
			return false
		}
		if v.CanSet() {
			v.Set(c)
		}
		return true
	case reflect.Struct:
		found := false
		t := v.Type()
		for i := range v.NumField() {
			if t.Field(i).IsExported() && scrub(v.Field(i), depth+1) {
				found = true
			}
		}
		return found
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return false // bytes are stored encoded (base64)
		}
		found := false
		for i := range v.Len() {
			if scrub(v.Index(i), depth+1) {
				found = true
			}
		}
		return found
	case reflect.Map:
		if v.IsNil() {
			return false
		}
		found := false
		it := v.MapRange()
		type entry struct{ old, k, val reflect.Value }
		var changed []entry
		for it.Next() {
			k := reflect.New(v.Type().Key()).Elem()
			k.Set(it.Key())
			val := reflect.New(v.Type().Elem()).Elem()
			val.Set(it.Value())
			kc, vc := scrub(k, depth+1), scrub(val, depth+1)
			if kc || vc {
				found = true
				changed = append(changed, entry{it.Key(), k, val})
			}
		}
		for _, e := range changed {
			v.SetMapIndex(e.old, reflect.Value{})
			v.SetMapIndex(e.k, e.val)
		}
		return found
	}
	return false
}
