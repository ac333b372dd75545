package errcat

// Carrier is implemented by engine wrapper errors that carry another
// failure across a boundary (a graph-engine §4 node_exception wrapping a
// subgraph, fan-out instance or branch failure). Carrier links are skipped
// when a chain's derived category is computed (pipeline-utilities §6.4).
type Carrier interface {
	error
	Carrier() bool
}

// Messager is implemented by errors whose own message differs from
// Error(): Error() includes the cause, Message() does not.
type Messager interface {
	Message() string
}

// Diagnoser is implemented by a categorized error whose diagnostic for
// the user (harness §7.3, harness-chat §10.3: what the caller can act
// on) is narrower than its message: a provider's own message, without
// the mapping's prefixes. harness.Diagnostic prefers it for the chain's
// derived category.
type Diagnoser interface {
	error
	Diagnostic() string
}

// maxChain bounds a cause chain walk: a backstop for cycles through
// uncomparable error values, which cannot be remembered.
const maxChain = 256

// Link is one error of a cause chain (pipeline-utilities §6.3).
type Link struct {
	// Category is the link's category, or "" when it has none.
	Category Category `json:"category"`
	// Message is the link's own message.
	Message string `json:"message"`
	// Carrier is true for engine carrier wrappers.
	Carrier bool `json:"carrier"`
}

// CauseChain walks err's cause chain from err (outermost) to the
// originating error (innermost), one link per error. For an error that
// wraps several (errors.Join), the walk follows the first. It stops on a
// repeated error, so cyclic chains terminate (and, for uncomparable error
// values, after 256 links).
func CauseChain(err error) []Link {
	var out []Link
	seen := map[error]bool{}
	for err != nil && len(out) < maxChain {
		if hashableErr(err) {
			if seen[err] {
				break
			}
			seen[err] = true
		}
		l := Link{Message: ownMessage(err)}
		if c, ok := err.(Categorized); ok {
			l.Category = c.Category()
		}
		if c, ok := err.(Carrier); ok && c.Carrier() {
			l.Carrier = true
		}
		out = append(out, l)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				err = errs[0]
			} else {
				err = nil
			}
		default:
			err = nil
		}
	}
	return out
}

// Derived returns a chain's derived category and message (pipeline-
// utilities §6.3): the category and message of the outermost non-carrier
// link that has a category; when none has one, "" and the outermost
// non-carrier link's message.
func Derived(err error) (Category, string) {
	return DerivedFrom(CauseChain(err))
}

// DerivedFrom is Derived over an already computed chain.
func DerivedFrom(chain []Link) (Category, string) {
	msg, found := "", false
	for _, l := range chain {
		if l.Carrier {
			continue
		}
		if l.Category != "" {
			return l.Category, l.Message
		}
		if !found {
			msg, found = l.Message, true
		}
	}
	return "", msg
}

// ownMessage returns an error's own message: Message() when implemented,
// otherwise Error() with the cause's text trimmed from its end when the
// error wraps one (as fmt.Errorf("...: %w") does).
func ownMessage(err error) string {
	if m, ok := err.(Messager); ok {
		return m.Message()
	}
	s := err.Error()
	if u, ok := err.(interface{ Unwrap() error }); ok {
		if inner := u.Unwrap(); inner != nil {
			is := inner.Error()
			if len(s) > len(is)+2 && s[len(s)-len(is):] == is && s[len(s)-len(is)-2:len(s)-len(is)] == ": " {
				return s[:len(s)-len(is)-2]
			}
		}
	}
	return s
}

func hashableErr(err error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_ = map[error]bool{err: true}
	return true
}
