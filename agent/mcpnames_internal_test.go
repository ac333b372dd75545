package agent

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// offeredMCPNames keeps a name a model API takes, makes one the MCP
// specification allows into one a model API takes, and leaves out the
// rest, saying why.
func TestOfferedMCPNames(t *testing.T) {
	long := strings.Repeat("x.", 50) // 100 characters
	tests := []struct {
		name  string
		in    []string
		want  []string // "" for left out
		skips int
	}{
		{"kept", []string{"get_weather", "a-b"}, []string{"get_weather", "a-b"}, 0},
		{"dots", []string{"github.create_issue", "fs.read"}, []string{"github_create_issue", "fs_read"}, 0},
		{"clash with a kept name", []string{"a.b", "a_b"}, []string{"a_b_" + fnvHex("a.b"), "a_b"}, 0},
		{"two dotted names alike", []string{"a.b", "a_b", "a.b_"}, []string{"a_b_" + fnvHex("a.b"), "a_b", "a_b_"}, 0},
		{"too long", []string{long}, []string{strings.ReplaceAll(long, ".", "_")[:55] + "_" + fnvHex(long)}, 0},
		{"65 characters, no dot", []string{strings.Repeat("n", 65)}, []string{strings.Repeat("n", 55) + "_" + fnvHex(strings.Repeat("n", 65))}, 0},
		{"not allowed", []string{"x\u202eevil", "a b", "", strings.Repeat("n", 129), "ok"}, []string{"", "", "", "", "ok"}, 4},
		{"listed twice", []string{"dup", "dup"}, []string{"dup", ""}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skipped := offeredMCPNames(toolsNamed(tt.in))
			if !slices.Equal(got, tt.want) {
				t.Errorf("offered %q, want %q", got, tt.want)
			}
			if len(skipped) != tt.skips {
				t.Errorf("skipped %v, want %d", skipped, tt.skips)
			}
		})
	}
}

// fnvHex is the 32-bit FNV-1a hash of s in eight hex digits, written out
// here so that the test does not share the code it checks.
func fnvHex(s string) string {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	const digits = "0123456789abcdef"
	var b [8]byte
	for i := 7; i >= 0; i-- {
		b[i] = digits[h&15]
		h >>= 4
	}
	return string(b[:])
}

// Whatever a server lists, in whatever order: each offered name is one a
// model API takes, no two tools share one, and a tool's offered name
// does not depend on the order of the list.
func TestOfferedMCPNamesRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0))
	alphabet := []byte("ab._-")
	for range 2000 {
		n := 1 + r.IntN(8)
		in := make([]string, n)
		for i := range in {
			l := 1 + r.IntN(4)
			if r.IntN(10) == 0 {
				l = 60 + r.IntN(70)
			}
			b := make([]byte, l)
			for j := range b {
				b[j] = alphabet[r.IntN(len(alphabet))]
			}
			in[i] = string(b)
		}
		checkOffered(t, in, seed)
		perm := slices.Clone(in)
		r.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
		if a, b := offeredByName(in), offeredByName(perm); !mapsEqual(a, b) {
			t.Fatalf("seed %d: %q offered %v, in another order %v", seed, in, a, b)
		}
	}
}

// FuzzOfferedMCPNames: any list of names yields offered names a model
// API takes, all different.
func FuzzOfferedMCPNames(f *testing.F) {
	f.Add("a.b\na_b\na.b_")
	f.Add("github.create_issue\n\u202e\n" + strings.Repeat("q.", 64))
	f.Fuzz(func(t *testing.T, list string) {
		checkOffered(t, strings.Split(list, "\n"), 0)
	})
}

func checkOffered(t *testing.T, in []string, seed uint64) {
	t.Helper()
	names, skipped := offeredMCPNames(toolsNamed(in))
	seen := map[string]bool{}
	for i, name := range names {
		if name == "" {
			if _, ok := skipped[in[i]]; !ok {
				t.Fatalf("seed %d: %q left out without a reason", seed, in[i])
			}
			continue
		}
		if !toolName.MatchString(name) {
			t.Fatalf("seed %d: %q offered as %q, which a model API refuses", seed, in[i], name)
		}
		if seen[name] {
			t.Fatalf("seed %d: two tools offered as %q (%q)", seed, name, in)
		}
		seen[name] = true
		if toolName.MatchString(in[i]) && name != in[i] {
			t.Fatalf("seed %d: %q renamed %q", seed, in[i], name)
		}
	}
}

func offeredByName(in []string) map[string]string {
	names, _ := offeredMCPNames(toolsNamed(in))
	m := map[string]string{}
	for i, n := range names {
		if _, dup := m[in[i]]; !dup {
			m[in[i]] = n
		}
	}
	return m
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// An input schema the validator cannot resolve is left to the server.
func TestArgumentsSchemaUnresolvable(t *testing.T) {
	for _, raw := range []string{
		`{"type":"object","properties":{"a":{"$ref":"https://schemas.example/a.json"}}}`,
		`{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}`,
	} {
		if argumentsSchema(json.RawMessage(raw)) != nil {
			t.Errorf("%s resolved", raw)
		}
	}
	if argumentsSchema(json.RawMessage(`{"type":"object","required":["a"]}`)) == nil {
		t.Error("a plain object schema not resolved")
	}
}

func toolsNamed(names []string) []*mcp.Tool {
	listed := make([]*mcp.Tool, len(names))
	for i, n := range names {
		listed[i] = &mcp.Tool{Name: n}
	}
	return listed
}
