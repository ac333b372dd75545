package main

import (
	"strings"
	"testing"
)

func TestRunExample(t *testing.T) {
	var out strings.Builder
	if err := run(t.Context(), []string{"example", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{
		"completed via classify → escalate: Paging the on-call engineer now.",
		"completed via classify → auto_reply: Thanks",
		"step 0 started   classify",
		`"trail":["classified as urgent","escalated"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{nil, {"nope"}, {"example", "-bogus"}} {
		if err := run(t.Context(), args, &strings.Builder{}); err == nil {
			t.Errorf("run(%q) succeeded, want an error", args)
		}
	}
}
