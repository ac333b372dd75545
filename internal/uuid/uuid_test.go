package uuid

import "testing"

func TestNew(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New()
		if !Valid(id) {
			t.Fatalf("New() = %q is not a canonical UUIDv4", id)
		}
		if seen[id] {
			t.Fatalf("duplicate id %q", id)
		}
		seen[id] = true
	}
}

func TestValid(t *testing.T) {
	tests := map[string]bool{
		"0b37d810-613b-4496-833e-291cc1060c31": true,
		"0B37D810-613B-4496-833E-291CC1060C31": false, // canonical form is lowercase
		"0b37d810-613b-1496-833e-291cc1060c31": false, // version 1
		"0b37d810-613b-4496-c33e-291cc1060c31": false, // variant
		"0b37d810613b4496833e291cc1060c31":     false,
		"":                                     false,
		"0b37d810-613b-4496-833e-291cc1060c3g": false,
	}
	for s, want := range tests {
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v, want %v", s, got, want)
		}
	}
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		_ = New()
	}
}
