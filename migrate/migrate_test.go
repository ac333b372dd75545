package migrate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/migrate"
)

func add(field string, n int) migrate.Func {
	return func(s map[string]any) (map[string]any, error) {
		v, _ := s[field].(int)
		s[field] = v + n
		return s, nil
	}
}

func mig(from, to string, fn migrate.Func) migrate.Migration {
	return migrate.Migration{From: from, To: to, Fn: fn}
}

func TestResolve(t *testing.T) {
	noop := add("x", 0)
	tests := []struct {
		name     string
		ms       []migrate.Migration
		from, to string
		want     string // the chain, or the error category
	}{
		{"same version", nil, "v1", "v1", ""},
		{"one step", []migrate.Migration{mig("v1", "v2", noop)}, "v1", "v2", "v1→v2"},
		{"chain", []migrate.Migration{mig("v2", "v3", noop), mig("v1", "v2", noop)}, "v1", "v3", "v1→v2 v2→v3"},
		{"shortest wins", []migrate.Migration{mig("v1", "v2", noop), mig("v2", "v3", noop), mig("v1", "v3", noop)}, "v1", "v3", "v1→v3"},
		{"missing", []migrate.Migration{mig("v1", "v2", noop)}, "v1", "v3", string(errcat.SessionStateMigrationMissing)},
		{"no registry edges", nil, "v0", "v1", string(errcat.SessionStateMigrationMissing)},
		{"two shortest paths", []migrate.Migration{mig("v1", "a", noop), mig("v1", "b", noop), mig("a", "v2", noop), mig("b", "v2", noop)}, "v1", "v2", string(errcat.SessionStateMigrationChainAmbiguous)},
		{"ambiguity off the shortest path is fine", []migrate.Migration{mig("v1", "a", noop), mig("v1", "b", noop), mig("a", "c", noop), mig("b", "c", noop), mig("v1", "c2", noop), mig("c2", "v2", noop), mig("c", "v2", noop)}, "v1", "v2", "v1→c2 c2→v2"},
		{"cycle", []migrate.Migration{mig("v1", "v2", noop), mig("v2", "v1", noop)}, "v2", "v1", "v2→v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := migrate.NewRegistry(migrate.Session, tt.ms...)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := r.Resolve(tt.from, tt.to)
			got := ""
			if err != nil {
				got = string(errcat.Of(err))
			} else {
				var parts []string
				for _, m := range chain {
					parts = append(parts, m.From+"→"+m.To)
				}
				got = strings.Join(parts, " ")
			}
			if got != tt.want {
				t.Errorf("Resolve(%s, %s) = %q, want %q", tt.from, tt.to, got, tt.want)
			}
		})
	}
}

func TestRegistrationErrors(t *testing.T) {
	noop := add("x", 0)
	for _, tc := range []struct {
		name string
		kind migrate.Kind
		ms   []migrate.Migration
		want errcat.Category
	}{
		{"duplicate pair (session)", migrate.Session, []migrate.Migration{mig("v1", "v2", noop), mig("v1", "v2", noop)}, errcat.SessionStateMigrationChainAmbiguous},
		{"duplicate pair (checkpoint)", migrate.Checkpoint, []migrate.Migration{mig("v1", "v2", noop), mig("v1", "v2", noop)}, errcat.CheckpointStateMigrationChainAmbiguous},
		{"nil function", migrate.Session, []migrate.Migration{mig("v1", "v2", nil)}, errcat.SessionStateMigrationChainAmbiguous},
		{"empty version", migrate.Session, []migrate.Migration{mig("", "v2", noop)}, errcat.SessionStateMigrationChainAmbiguous},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := migrate.NewRegistry(tc.kind, tc.ms...)
			if !errors.Is(err, tc.want) {
				t.Fatalf("NewRegistry error = %v, want %s", err, tc.want)
			}
			var me *migrate.Error
			if !errors.As(err, &me) || me.FromVersion() != tc.ms[len(tc.ms)-1].From || me.RegisteredMigrationsCount() != len(tc.ms) {
				t.Errorf("error fields = %+v", me)
			}
			if !strings.HasPrefix(err.Error(), "migrate: ") {
				t.Errorf("message %q lacks the package prefix", err)
			}
		})
	}
}

func TestApply(t *testing.T) {
	boom := errors.New("KeyError: value")
	var ran []string
	track := func(name string, fn migrate.Func) migrate.Func {
		return func(s map[string]any) (map[string]any, error) {
			ran = append(ran, name)
			return fn(s)
		}
	}
	r, err := migrate.NewRegistry(migrate.Checkpoint,
		mig("v1", "v2", track("add10", add("value", 10))),
		mig("v2", "v3", track("double", func(s map[string]any) (map[string]any, error) {
			s["value"] = s["value"].(int) * 2
			return s, nil
		})),
		mig("v3", "v4", track("fail", func(map[string]any) (map[string]any, error) { return nil, boom })),
		mig("v4", "v5", track("never", add("value", 1))),
		mig("p1", "p2", func(map[string]any) (map[string]any, error) { panic("bad migration") }),
	)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.Apply(map[string]any{"value": 1}, "v1", "v3")
	if err != nil || got["value"] != 22 {
		t.Fatalf("Apply = %v, %v; want value 22", got, err)
	}
	ran = nil
	_, err = r.Apply(map[string]any{"value": 1}, "v1", "v5")
	if !errors.Is(err, errcat.CheckpointStateMigrationFailed) || !errors.Is(err, boom) {
		t.Fatalf("Apply error = %v, want checkpoint_state_migration_failed wrapping the cause", err)
	}
	if fmt.Sprint(ran) != "[add10 double fail]" {
		t.Errorf("migrations run = %v; later ones must not run after a failure", ran)
	}
	if _, err := r.Apply(map[string]any{}, "p1", "p2"); !errors.Is(err, errcat.CheckpointStateMigrationFailed) {
		t.Errorf("a panicking migration must fail with migration_failed, got %v", err)
	}
	if d := r.Describe(); !strings.Contains(d, "v1→v2") || r.Len() != 5 {
		t.Errorf("Describe = %q, Len = %d", d, r.Len())
	}
}

func FuzzResolve(f *testing.F) {
	f.Add("v1>v2,v2>v3,v1>v3", "v1", "v3")
	f.Add("a>b,b>a,a>c,b>c", "a", "c")
	f.Fuzz(func(t *testing.T, edges, from, to string) {
		var ms []migrate.Migration
		for _, e := range strings.Split(edges, ",") {
			if a, b, ok := strings.Cut(e, ">"); ok {
				ms = append(ms, mig(a, b, add("x", 1)))
			}
		}
		r, err := migrate.NewRegistry(migrate.Session, ms...)
		if err != nil {
			if errcat.Of(err) == "" {
				t.Fatalf("uncategorized error %v", err)
			}
			return
		}
		chain, err := r.Resolve(from, to)
		if err != nil {
			if c := errcat.Of(err); c != errcat.SessionStateMigrationMissing && c != errcat.SessionStateMigrationChainAmbiguous {
				t.Fatalf("unexpected category %q", c)
			}
			return
		}
		at := from
		for _, m := range chain {
			if m.From != at {
				t.Fatalf("broken chain %v", chain)
			}
			at = m.To
		}
		if at != to {
			t.Fatalf("chain %v does not reach %q", chain, to)
		}
	})
}
