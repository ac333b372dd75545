package errcat

import "errors"

// Category is a spec error category identifier, such as "node_exception".
//
// A Category is itself an error, so it can be the target of [errors.Is]:
// every categorized error type in Armature reports a match when the target
// is its own category, which lets callers write
//
//	if errors.Is(err, errcat.NodeException) { ... }
//
// Category values are wire identifiers taken from the OpenArmature
// specification; they must not change.
type Category string

// Error returns the category identifier, so a Category can be used as an
// [errors.Is] target.
func (c Category) Error() string { return string(c) }

// String returns the category identifier.
func (c Category) String() string { return string(c) }

// Categorized is implemented by errors that carry a spec category.
type Categorized interface {
	error
	Category() Category
}

// Of returns the category of the outermost categorized error in err's
// chain, or "" when no error in the chain carries one.
func Of(err error) Category {
	var c Categorized
	if errors.As(err, &c) {
		return c.Category()
	}
	return ""
}

// Chain returns the categories found along err's chain, outermost first.
// Errors without a category are skipped. Joined errors are walked depth
// first in order.
func Chain(err error) []Category {
	var out []Category
	walk(err, func(e error) {
		if c, ok := e.(Categorized); ok {
			out = append(out, c.Category())
		}
	})
	return out
}

func walk(err error, visit func(error)) {
	for err != nil {
		visit(err)
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e, visit)
			}
			return
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		default:
			return
		}
	}
}

// Error is a general-purpose categorized error: a category, a message and
// an optional cause. Packages with richer failure information define their
// own types; Error serves the rest (and errors decoded from the wire).
type Error struct {
	Cat Category
	Msg string
	Err error
}

// New returns an *Error with the given category and message.
func New(c Category, msg string) *Error { return &Error{Cat: c, Msg: msg} }

// Sentinel returns a sentinel error of category c whose message is msg
// alone (an *Error's message starts with its category): for a package's
// errors.Is sentinels that carry a category, their messages keeping the
// package's own prefix.
func Sentinel(c Category, msg string) error { return &sentinel{msg: msg, cat: c} }

// sentinel is the error Sentinel returns.
type sentinel struct {
	msg string
	cat Category
}

func (e *sentinel) Error() string { return e.msg }

// Category implements Categorized.
func (e *sentinel) Category() Category { return e.cat }

// Wrap returns an *Error with the given category and message wrapping cause.
func Wrap(c Category, msg string, cause error) *Error { return &Error{Cat: c, Msg: msg, Err: cause} }

// Category reports the error's category.
func (e *Error) Category() Category {
	if e == nil {
		return ""
	}
	return e.Cat
}

// Error formats the error as "<category>: <message>: <cause>".
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	s := string(e.Cat)
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Message returns the error's own message, without the cause.
func (e *Error) Message() string {
	if e == nil {
		return ""
	}
	return e.Msg
}

// Transient reports whether the error's category is transient.
func (e *Error) Transient() bool { return e != nil && e.Cat.Transient() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Is reports whether target is this error's category, or an *Error with
// the same category.
func (e *Error) Is(target error) bool {
	if e == nil {
		return false
	}
	return Matches(e.Cat, target)
}

// Matches reports whether target denotes category c: either the Category
// value itself or a categorized error of that category. Error types use it
// to implement Is.
func Matches(c Category, target error) bool {
	switch t := target.(type) {
	case Category:
		return t == c
	case Categorized:
		return t.Category() == c
	}
	return false
}
