package runtime_test

import (
	"testing"

	"github.com/armature-go/armature/runtime"
)

// Subscribed and Publish answer without the Broker's lock while nobody
// subscribes; the count they read follows every way a subscriber goes
// (cancel, cancel again, overflow, Close), so a session is never
// reported watched when it is not, nor missed when it is.
func TestBrokerSubscribedFollowsEverySubscriber(t *testing.T) {
	b := runtime.NewBroker(runtime.BrokerConfig{Buffer: 1})
	if b.Subscribed("t", "s") {
		t.Fatal("subscribed with no subscriber")
	}
	b.Publish(runtime.Event{Tenant: "t", SessionID: "s", ID: 1}) // nobody: nothing to do
	ch1, cancel1 := b.Subscribe("t", "s")
	ch2, cancel2 := b.Subscribe("t", "s")
	_, cancel3 := b.Subscribe("t", "other")
	if !b.Subscribed("t", "s") || !b.Subscribed("t", "other") || b.Subscribed("u", "s") {
		t.Fatal("Subscribed does not follow the subscriptions")
	}
	cancel1()
	cancel1() // idempotent: counted once
	if !b.Subscribed("t", "s") {
		t.Fatal("the session's second subscriber is not seen")
	}
	if _, ok := <-ch1; ok {
		t.Fatal("a cancelled subscriber's channel is open")
	}
	// The second subscriber overflows (buffer 1) and is dropped.
	b.Publish(runtime.Event{Tenant: "t", SessionID: "s", ID: 2}, runtime.Event{Tenant: "t", SessionID: "s", ID: 3})
	if b.Subscribed("t", "s") || b.Disconnected() != 1 {
		t.Fatalf("after the overflow: subscribed %v, disconnected %d", b.Subscribed("t", "s"), b.Disconnected())
	}
	if e := <-ch2; e.ID != 2 {
		t.Fatalf("first event %d", e.ID)
	}
	cancel2() // already dropped: no double count
	ch4, _ := b.Subscribe("t", "s")
	b.Publish(runtime.Event{Tenant: "t", SessionID: "s", ID: 4})
	if e := <-ch4; e.ID != 4 {
		t.Fatalf("a new subscriber got %d", e.ID)
	}
	b.Close()
	cancel3()
	if b.Subscribed("t", "s") || b.Subscribed("t", "other") {
		t.Fatal("subscribed after Close")
	}
}
