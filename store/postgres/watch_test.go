package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/postgres"
)

// Watch announcements reach every other replica of the schema, not the
// announcing one, nor another schema's; sessions more than one NOTIFY
// payload holds go in several, none lost; tenant and session ids come
// back as they went, each session once per announcement.
func TestWatchAnnouncementsReachOtherReplicas(t *testing.T) {
	a := open(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	b := replica(t, a)
	other := open(t)
	heard := make(chan string, 4096)
	asked := make(chan string, 64)
	for name, st := range map[string]*postgres.Store{"a": a, "b": b, "other": other} {
		go func() {
			_ = st.ListenWatches(ctx, func(tenant, sessionID string) {
				if tenant == "" && sessionID == "" {
					select { // another replica's listener connected
					case asked <- name:
					default:
					}
					return
				}
				select {
				case heard <- name + " " + tenant + "/" + sessionID:
				case <-ctx.Done():
				}
			})
		}()
	}
	// The listeners connect in the background: announce until b heard.
	probe := []runtime.SessionRef{{Tenant: "acme", SessionID: "probe"}}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if time.Now().After(deadline) {
			t.Fatal("b never heard a's announcement")
		}
		if err := a.AnnounceWatch(ctx, probe); err != nil {
			t.Fatal(err)
		}
		select {
		case h := <-heard:
			if h != "b acme/probe" {
				t.Fatalf("heard %q, want only replica b", h)
			}
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	// 300 sessions with 200-byte ids: several payloads' worth.
	var refs []runtime.SessionRef
	want := map[string]bool{}
	for i := range 300 {
		ref := runtime.SessionRef{Tenant: fmt.Sprintf("tenant-%d", i%3), SessionID: fmt.Sprintf("s-%03d-%s-ü", i, strings.Repeat("x", 190))}
		refs = append(refs, ref)
		want["b "+ref.Tenant+"/"+ref.SessionID] = true
	}
	if err := a.AnnounceWatch(ctx, refs); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for len(seen) < len(want) {
		select {
		case h := <-heard:
			if !want[h] || seen[h] {
				t.Fatalf("heard %q: not announced to this replica, or twice", h)
			}
			seen[h] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("heard %d of %d sessions", len(seen), len(want))
		}
	}
	// Nothing else arrives: not a's own, not the other schema's.
	select {
	case h := <-heard:
		t.Fatalf("heard %q more", h)
	case <-time.After(200 * time.Millisecond):
	}
	// Nothing to announce sends nothing, and fails not.
	if err := a.AnnounceWatch(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Each listener, once connected, asked the others of its schema to
	// announce again: a heard b's (or b a's) ask, the other schema
	// neither.
	got := map[string]bool{}
	for len(asked) > 0 {
		got[<-asked] = true
	}
	if (!got["a"] && !got["b"]) || got["other"] {
		t.Fatalf("asks heard by %v, want a's or b's, not the other schema's", got)
	}
}
