package listpage

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestWindow(t *testing.T) {
	for _, tc := range []struct{ n, before, limit, lo, hi int }{
		{0, -1, 5, 0, 0},
		{10, -1, 3, 7, 10},
		{10, 10, 3, 7, 10},
		{10, 99, 3, 7, 10},
		{10, 5, 3, 2, 5},
		{10, 2, 3, 0, 2},
		{10, 0, 3, 0, 0},
		{10, -1, 20, 0, 10},
	} {
		if lo, hi := Window(tc.n, tc.before, tc.limit); lo != tc.lo || hi != tc.hi {
			t.Errorf("Window(%d, %d, %d) = %d, %d; want %d, %d", tc.n, tc.before, tc.limit, lo, hi, tc.lo, tc.hi)
		}
	}
}

func TestCut(t *testing.T) {
	for _, tc := range []struct {
		raw           string
		before, limit int
		want          string
		lo, n         int
	}{
		{`[1,2,3,4]`, -1, 2, `3 4`, 2, 4},
		{`[1,2,3,4]`, 1, 2, `1`, 0, 4},
		{`[]`, -1, 2, ``, 0, 0},
		{`null`, -1, 2, ``, 0, 0},
		{`{"a":1}`, -1, 2, ``, 0, 0},
		{`"x"`, -1, 2, ``, 0, 0},
	} {
		items, lo, n := Cut([]byte(tc.raw), tc.before, tc.limit)
		var got []string
		for _, it := range items {
			got = append(got, string(it))
		}
		if strings.Join(got, " ") != tc.want || lo != tc.lo || n != tc.n {
			t.Errorf("Cut(%s, %d, %d) = %v, %d, %d", tc.raw, tc.before, tc.limit, got, lo, n)
		}
	}
	if items, _, n := Cut(nil, -1, 1); items != nil || n != 0 {
		t.Errorf("Cut(nil) = %v, %d", items, n)
	}
}

// FuzzCut: whatever the stored value, a page lies within the list and
// holds at most limit items, each valid JSON.
func FuzzCut(f *testing.F) {
	f.Add([]byte(`[1,{"a":[2]},"x"]`), 1, 2)
	f.Add([]byte(`null`), -1, 1)
	f.Fuzz(func(t *testing.T, raw []byte, before, limit int) {
		if limit < 1 {
			limit = 1
		}
		items, lo, n := Cut(raw, before, limit)
		if len(items) > limit || lo < 0 || lo+len(items) > n {
			t.Fatalf("Cut(%q, %d, %d) = %d items at %d of %d", raw, before, limit, len(items), lo, n)
		}
		for _, it := range items {
			if !json.Valid(it) {
				t.Fatalf("item %q is not JSON", it)
			}
		}
	})
}

// row is one row of a page query.
type row struct {
	k         int
	a, n, hi  int64
	value     string
	null      bool
	scanFails bool
}

func scanRows(rows []row, before, limit int) (Result, error) {
	i := -1
	return Scan(func() bool { i++; return i < len(rows) }, func(k *int, a, c, u, n, hi *int64, schema *string, value *[]byte) error {
		r := rows[i]
		if r.scanFails {
			return errors.New("driver failed")
		}
		*k, *a, *c, *u, *n, *hi, *schema = r.k, r.a, 1, 2, r.n, r.hi, "v1"
		*value = nil
		if !r.null {
			*value = []byte(r.value)
		}
		return nil
	}, before, limit)
}

func TestScan(t *testing.T) {
	header := func(n, hi int64) row { return row{k: 0, a: 3, n: n, hi: hi, null: true} }
	item := func(seq int64) row { return row{k: 2, a: seq, value: fmt.Sprintf(`{"n":%d}`, seq)} }
	for _, tc := range []struct {
		name          string
		rows          []row
		before, limit int
		want          string // items joined, then @offset/length; or "malformed", "scan", "missing"
	}{
		{"none", nil, -1, 2, "missing"},
		{"empty list", []row{header(0, 0)}, -1, 2, "[]@0/0"},
		{"newest", []row{header(5, 5), item(3), item(4)}, -1, 2, `[{"n":3} {"n":4}]@3/5`},
		{"middle", []row{header(5, 3), item(1), item(2)}, 3, 2, `[{"n":1} {"n":2}]@1/5`},
		{"whole", []row{header(0, 0), {k: 1, value: `[1,2,3]`}}, 1, 2, `[1]@0/3`},
		{"whole not a list", []row{header(0, 0), {k: 1, value: `{"a":1}`}}, -1, 2, `[]@0/0`},
		{"gap", []row{header(5, 5), item(3), item(5)}, -1, 2, "malformed"},
		{"short", []row{header(5, 5), item(3)}, -1, 2, "malformed"},
		{"starts late", []row{header(5, 5), item(4)}, -1, 2, "malformed"},
		{"item not JSON", []row{header(5, 5), item(3), {k: 2, a: 4, value: `{`}}, -1, 2, "malformed"},
		{"whole not JSON", []row{header(0, 0), {k: 1, value: `[1,`}}, -1, 2, "malformed"},
		{"both", []row{header(2, 2), {k: 1, value: `[1]`}, item(0), item(1)}, -1, 2, "malformed"},
		{"no header first", []row{item(0), header(1, 1)}, -1, 2, "malformed"},
		{"two headers", []row{header(1, 1), header(1, 1)}, -1, 2, "malformed"},
		{"unknown kind", []row{header(1, 1), {k: 7}}, -1, 2, "malformed"},
		{"end past the list", []row{header(1, 3)}, -1, 2, "malformed"},
		{"end before 0", []row{header(1, -1)}, -1, 2, "malformed"},
		{"scan fails", []row{header(1, 1), {scanFails: true}}, -1, 2, "scan"},
	} {
		res, err := scanRows(tc.rows, tc.before, tc.limit)
		var got string
		switch {
		case errors.Is(err, ErrMalformed):
			got = "malformed"
		case err != nil:
			got = "scan"
		case !res.Found:
			got = "missing"
		default:
			var parts []string
			for _, it := range res.Items {
				parts = append(parts, string(it))
			}
			got = fmt.Sprintf("[%s]@%d/%d", strings.Join(parts, " "), res.Offset, res.Length)
			if res.Version != 3 || res.Created != 1 || res.Updated != 2 || res.Schema != "v1" {
				t.Errorf("%s: header %+v", tc.name, res)
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s (%v), want %s", tc.name, got, err, tc.want)
		}
	}
}

// FuzzScan: whatever rows a page query answers, Scan does not panic, and
// a page it accepts lies within the list, holds at most limit items,
// each valid JSON.
func FuzzScan(f *testing.F) {
	f.Add([]byte{0, 5, 5, 2, 3, 2, 4}, 2)
	f.Add([]byte{0, 0, 0, 1, 0}, 1)
	values := []string{`{"n":1}`, `[1,2,3]`, `{`, `null`, `"x"`, ``}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		if limit < 1 || limit > 100 {
			limit = 1 + limit&63
			if limit < 1 {
				limit = 1
			}
		}
		var rows []row
		for i := 0; i+2 < len(b); i += 3 {
			r := row{k: int(b[i] % 4), a: int64(b[i+1]) - 2, n: int64(b[i+1] % 16), hi: int64(b[i+2]%20) - 2, value: values[int(b[i+2])%len(values)]}
			r.null = r.value == ""
			rows = append(rows, r)
		}
		before := -1
		if len(b) > 0 {
			before = int(b[len(b)-1]%24) - 2
		}
		res, err := scanRows(rows, before, limit)
		if err != nil || !res.Found {
			return
		}
		if res.Offset < 0 || res.Offset+len(res.Items) > res.Length || len(res.Items) > limit {
			t.Fatalf("rows %+v: %d items at %d of %d (limit %d)", rows, len(res.Items), res.Offset, res.Length, limit)
		}
		for _, it := range res.Items {
			if !json.Valid(it) {
				t.Fatalf("rows %+v: item %q is not JSON", rows, it)
			}
		}
	})
}
