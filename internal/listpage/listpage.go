// Package listpage computes the windows of session.Pager and cuts them
// out of a list field stored whole, for every session store alike.
package listpage

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/armature-go/armature/internal/jsonvalid"
)

// Window returns the bounds [lo, hi) of the page of at most limit items
// (limit > 0) that ends before index before of a list of n items: hi is
// before clipped to n, or n when before is negative.
func Window(n, before, limit int) (lo, hi int) {
	hi = n
	if before >= 0 && before < n {
		hi = before
	}
	return max(hi-limit, 0), hi
}

// Split returns the items of a list field stored as one JSON value. A
// missing or null value, or one that is not a JSON array, has none.
func Split(raw []byte) []json.RawMessage {
	if raw == nil {
		return nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	return items
}

// Cut returns the page of a list field stored as one JSON value: its
// items [lo, hi), as Window bounds them, and the list's length.
func Cut(raw []byte, before, limit int) (items []json.RawMessage, lo, n int) {
	all := Split(raw)
	lo, hi := Window(len(all), before, limit)
	return all[lo:hi:hi], lo, len(all)
}

// ErrMalformed marks stored data a page query read that the stores never
// write (a gap in a list's item numbers, a field stored both whole and as
// items, invalid JSON, rows out of order): the caller reports it as
// corrupt.
var ErrMalformed = errors.New("malformed stored list")

// Result is a page as a store's page query read it.
type Result struct {
	// Found reports whether the record exists.
	Found                     bool
	Schema                    string
	Version, Created, Updated int64
	// Items are the page's items, Offset the index of the first, Length
	// the list's length.
	Items          []json.RawMessage
	Offset, Length int
}

// Scan reads the rows of a store's page query (see the stores'
// loadPageSQL), ordered by their kind k and then a: the header (k 0: a
// the version, then the creation and update times, the list's item count
// n, the page's end hi and the schema version), the field's value when
// it is stored whole (k 1) and the page's items (k 2: a their seq). next
// advances to a row and scan reads it, into a value slice of its own
// (database/sql and pgx copy a scanned []byte), which the page keeps. An
// error of scan is returned as it is; one about the data wraps
// ErrMalformed.
func Scan(next func() bool, scan func(k *int, a, c, u, n, hi *int64, schema *string, value *[]byte) error, before, limit int) (Result, error) {
	var (
		res     Result
		k       int
		a, c, u int64
		n, hi   int64 // as scanned, meaningful on the header row
		lo, end int64 // the page's bounds, from the header
		value   []byte
		whole   []byte
		items   []json.RawMessage
	)
	for next() {
		if err := scan(&k, &a, &c, &u, &n, &hi, &res.Schema, &value); err != nil {
			return Result{}, err
		}
		var bad string
		switch {
		case k == 0 && !res.Found && (hi < 0 || hi > n):
			bad = fmt.Sprintf("a page ending at %d of %d items", hi, n)
		case k == 0 && !res.Found:
			res.Found, res.Version, res.Created, res.Updated, res.Length = true, a, c, u, int(n)
			lo, end = max(hi-int64(limit), 0), hi
		case !res.Found || k == 0 || k > 2:
			bad = "rows out of order"
		case k == 1 && res.Length > 0:
			bad = "stored both as a value and as list items"
		case k == 1:
			whole = value
		case a != lo+int64(len(items)):
			bad = fmt.Sprintf("a gap in its item numbers at %d (%d expected)", a, lo+int64(len(items)))
		case !jsonvalid.Valid(value):
			bad = "an item is not valid JSON"
		default:
			items = append(items, value)
		}
		if bad != "" {
			return Result{}, fmt.Errorf("%w: %s", ErrMalformed, bad)
		}
	}
	switch {
	case !res.Found:
		return res, nil
	case whole != nil && !jsonvalid.Valid(whole):
		return Result{}, fmt.Errorf("%w: not valid JSON", ErrMalformed)
	case whole != nil:
		res.Items, res.Offset, res.Length = Cut(whole, before, limit)
	case int64(len(items)) != end-lo:
		return Result{}, fmt.Errorf("%w: items %d to %d are missing", ErrMalformed, lo+int64(len(items)), end-1)
	default:
		res.Items, res.Offset = items, int(lo)
	}
	if res.Items == nil {
		res.Items = []json.RawMessage{}
	}
	return res, nil
}
