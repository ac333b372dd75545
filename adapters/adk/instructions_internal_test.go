package adk

import (
	"testing"

	"google.golang.org/genai"
)

// TestSystemInstructionEdits: what the instructions callback leaves of
// ADK-Go's system instruction: per-request instructions appended as
// ADK-Go appends one (agent without an instruction), and no empty text
// left by an empty instruction.
func TestSystemInstructionEdits(t *testing.T) {
	text := func(s ...string) *genai.Content {
		c := &genai.Content{Role: genai.RoleUser}
		for _, p := range s {
			c.Parts = append(c.Parts, genai.NewPartFromText(p))
		}
		return c
	}
	for _, tc := range []struct {
		name string
		got  *genai.Content
		want *genai.Content
	}{
		{"append to none", appendInstruction(nil, "Per."), text("Per.")},
		{"append nothing", appendInstruction(text("Id."), ""), text("Id.")},
		{"append", appendInstruction(text("Id."), "Per."), text("Id.\n\nPer.")},
		{"append after an empty part", appendInstruction(text(""), "Per."), text("", "Per.")},
		{"trim none", trimEmpty(nil), nil},
		{"trim an empty part", trimEmpty(text("", "Id.")), text("Id.")},
		{"trim a separator", trimEmpty(text("Id.\n\n")), text("Id.")},
		{"trim all", trimEmpty(text("")), nil},
		{"trim nothing", trimEmpty(text("Id.")), text("Id.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if (tc.got == nil) != (tc.want == nil) {
				t.Fatalf("got %+v, want %+v", tc.got, tc.want)
			}
			if tc.got == nil {
				return
			}
			if len(tc.got.Parts) != len(tc.want.Parts) {
				t.Fatalf("got %d parts, want %d", len(tc.got.Parts), len(tc.want.Parts))
			}
			for i := range tc.got.Parts {
				if g, w := tc.got.Parts[i].Text, tc.want.Parts[i].Text; g != w {
					t.Errorf("part %d: %q, want %q", i, g, w)
				}
			}
		})
	}
	// The content edited is a copy.
	si := text("Id.\n\n")
	_ = trimEmpty(si)
	_ = appendInstruction(si, "Per.")
	if si.Parts[0].Text != "Id.\n\n" {
		t.Errorf("the original changed: %q", si.Parts[0].Text)
	}
}
