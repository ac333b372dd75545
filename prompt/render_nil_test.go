package prompt_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/prompt"
)

// TestRenderNilStringerIsRenderError: a variable holding a nil pointer
// whose type has a String method (a *url.URL the caller did not set)
// never makes Render panic: it is a prompt_render_error naming the
// variable (prompt-management §11: the value is not coercible to text),
// not "<nil>" sent to the model as if it were the value.
func TestRenderNilStringerIsRenderError(t *testing.T) {
	p := &prompt.Prompt{Name: "p", Version: "1", Label: "production",
		Template: prompt.MustParseTemplate("Link: {{ link }}")}
	var link *url.URL
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Render panicked on a nil *url.URL variable: %v", r)
			}
		}()
		_, err = prompt.Render(p, map[string]any{"link": link}, prompt.RenderOptions{})
	}()
	if err != nil && !errors.Is(err, errcat.PromptRenderError) {
		t.Fatalf("err = %v, not prompt_render_error", err)
	}
	if err == nil || !strings.Contains(err.Error(), `"link"`) {
		t.Fatalf("err = %v, want a render error naming the variable", err)
	}
	// A String method that handles a nil receiver renders; one that
	// panics otherwise is an error too.
	res, err := prompt.Render(p, map[string]any{"link": nilSafe(nil)}, prompt.RenderOptions{})
	if err != nil || res.Messages[0].Text() != "Link: none" {
		t.Fatalf("nil-safe Stringer: %v %+v", err, res)
	}
	if _, err := prompt.Render(p, map[string]any{"link": panicky{}}, prompt.RenderOptions{}); !errors.Is(err, errcat.PromptRenderError) {
		t.Fatalf("panicking Stringer: %v", err)
	}
}

type nilSafeT struct{}

func (n *nilSafeT) String() string {
	if n == nil {
		return "none"
	}
	return "some"
}

func nilSafe(p *nilSafeT) fmt.Stringer { return p }

type panicky struct{}

func (panicky) String() string { panic("boom") }
