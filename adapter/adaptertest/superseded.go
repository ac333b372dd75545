package adaptertest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/llm"
)

// CheckClosedCalls checks that an adapter of backend, built by f with
// the script's Model, tells the model what became of a call awaiting
// approval that nobody approved, as a native agent does: a suspended
// turn superseded by a new message, or cancelled, leaves its call
// answered in the history (chat.DefaultSupersededResult,
// chat.DefaultCancelledResult), and the next message's model call is
// sent that answer, once, and nothing an upstream recorded while the
// call waited ("requires confirmation, please approve or reject"): a
// model told the call still awaits a decision asks for one again. It
// runs once per backend-native section given (none: once without).
func CheckClosedCalls(t *testing.T, backend string, f adapter.Factory, sections ...string) {
	t.Helper()
	if len(sections) == 0 {
		sections = []string{""}
	}
	for i, section := range sections {
		checkClosedCalls(t, fmt.Sprint("section", i), backend, f, section)
	}
}

func checkClosedCalls(t *testing.T, name, backend string, f adapter.Factory, section string) {
	for _, tc := range []struct {
		name, want string
		close      func(ctx context.Context, h *chat.Harness, s *chat.Suspended) error
	}{
		{"superseded", chat.DefaultSupersededResult, nil},
		{"cancelled", chat.DefaultCancelledResult, func(ctx context.Context, h *chat.Harness, s *chat.Suspended) error {
			return h.CancelSuspended(ctx, "acme/cancelled", s.InvocationID)
		}},
	} {
		t.Run(name+"/"+tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := NewModel()
			h := sectionHarness(t, backend, f, m, section)
			id := "acme/" + tc.name
			out, err := h.Send(ctx, id, llm.UserText("refund order 5"))
			s, ok := out.(*chat.Suspended)
			if !ok {
				t.Fatalf("the refund's turn: %#v, %v", out, err)
			}
			if tc.close != nil {
				if err := tc.close(ctx, h, s); err != nil {
					t.Fatalf("cancel: %v", err)
				}
			}
			if out, err := h.Send(ctx, id, llm.UserText("hello again")); !isCompleted(out) {
				t.Fatalf("the next message: %#v, %v", out, err)
			}
			var answers []string
			for _, msg := range m.LastTranscript() {
				if msg.Role == llm.RoleTool {
					answers = append(answers, msg.Text())
				}
			}
			if len(answers) != 1 || !strings.Contains(answers[0], tc.want) {
				t.Fatalf("the next message's model call was told of the refund %q, want %q once", answers, tc.want)
			}
		})
	}
}
