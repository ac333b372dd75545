package session

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Pager is the optional paging capability: a store that implements it
// reads a window of one list field, with the record's header, without
// reading the rest of the record, so a page of a long conversation costs
// what the page holds wherever it stands in the list (a ListTail load
// costs what lies after the page). The memory, SQLite and PostgreSQL
// stores implement it; callers detect it with a type assertion, as
// Appender.
type Pager interface {
	LoadPage(ctx context.Context, req PageRequest) (*Page, error)
}

// PageRequest asks for at most Max items of list field Field that end
// before index Before: with n items in the list, the items [max(b-Max,
// 0), b), where b is Before, or n when Before is negative or past the
// end. A client reading a list backwards asks for the newest page
// (Before -1), then for each earlier one with Before set to the Offset
// of the page it has.
type PageRequest struct {
	SessionID string
	// Field names the list field.
	Field string
	// Before is the index the page ends before; negative for the end.
	Before int
	// Max bounds the page's items; it must be positive.
	Max int
}

// Validate checks a page request: the id, the field name, Max positive.
func (r PageRequest) Validate() error {
	if err := ValidateID(r.SessionID); err != nil {
		return err
	}
	if r.Field == "" {
		return fmt.Errorf("%w: a page names no field", ErrInvalidRequest)
	}
	if err := ValidateText("field name", r.Field); err != nil {
		return err
	}
	if r.Max < 1 {
		return fmt.Errorf("%w: page of %q: max %d is not positive", ErrInvalidRequest, r.Field, r.Max)
	}
	return nil
}

// Page is a window of one list field and the header of its record, read
// from one snapshot of the record. A field that is missing, null or not
// a JSON array has no items (Length 0), whether it was appended to or
// saved whole.
type Page struct {
	SessionID     string
	SchemaVersion string
	Version       int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Items are the page's items, in the list's order; they never alias
	// stored data.
	Items []json.RawMessage
	// Offset is the index of the first item in the list (where the page
	// would start when it has none), Length the list's length.
	Offset, Length int
}
