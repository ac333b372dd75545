package chat

import "testing"

func TestIdemCacheEviction(t *testing.T) {
	c := newIdemCache(2)
	a, b, d := &Completed{}, &Completed{}, &Completed{}
	c.put("s", "a", a)
	c.put("s", "b", b)
	c.put("s", "a", a) // an update does not take a second slot
	c.put("s", "d", d)
	for key, want := range map[string]bool{"a": false, "b": true, "d": true} {
		if _, ok := c.get("s", key); ok != want {
			t.Errorf("get(%q) found = %v, want %v", key, ok, want)
		}
	}
	c.put("t", "b", b)
	c.dropSession("s")
	if _, ok := c.get("s", "b"); ok {
		t.Error("an entry of a dropped session is still found")
	}
	if _, ok := c.get("t", "b"); !ok {
		t.Error("dropping one session forgot another's entry")
	}
}
