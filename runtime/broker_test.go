package runtime_test

import (
	"testing"

	"github.com/armature-go/armature/runtime"
)

func TestBrokerDisconnectsASlowSubscriber(t *testing.T) {
	b := runtime.NewBroker(runtime.BrokerConfig{Buffer: 2})
	slow, cancelSlow := b.Subscribe("t", "s")
	fast, cancelFast := b.Subscribe("t", "s")
	defer cancelFast()
	for i := range 3 {
		b.Publish(runtime.Event{ID: int64(i + 1), Tenant: "t", SessionID: "s"})
		<-fast
	}
	var got []int64
	for e := range slow { // closed after the two it could hold
		got = append(got, e.ID)
	}
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("slow subscriber got %v, want [1 2] then a closed channel", got)
	}
	if b.Disconnected() != 1 {
		t.Errorf("Disconnected = %d, want 1", b.Disconnected())
	}
	cancelSlow() // idempotent after a disconnect
	cancelSlow()
	if !b.Subscribed("t", "s") {
		t.Error("the fast subscriber was dropped")
	}
}

func TestBrokerScopesAndCloses(t *testing.T) {
	b := runtime.NewBroker(runtime.BrokerConfig{})
	a, cancelA := b.Subscribe("t1", "s")
	defer cancelA()
	other, cancelOther := b.Subscribe("t2", "s")
	b.Publish(runtime.Event{ID: 1, Tenant: "t1", SessionID: "s"}, runtime.Event{ID: 2, Tenant: "t1", SessionID: "x"})
	if e := <-a; e.ID != 1 {
		t.Errorf("got %d", e.ID)
	}
	select {
	case e := <-other:
		t.Errorf("tenant t2 received %+v", e)
	case e := <-a:
		t.Errorf("session s received %+v", e)
	default:
	}
	cancelOther()
	if _, ok := <-other; ok {
		t.Error("channel open after cancel")
	}
	if b.Subscribed("t2", "s") {
		t.Error("Subscribed after cancel")
	}
	b.Close()
	b.Close()
	if _, ok := <-a; ok {
		t.Error("channel open after Close")
	}
	late, cancelLate := b.Subscribe("t1", "s")
	cancelLate()
	if _, ok := <-late; ok {
		t.Error("a subscription after Close is open")
	}
}
