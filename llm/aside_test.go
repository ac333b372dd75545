package llm_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/armature-go/armature/llm"
)

func call(id string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: "get_weather", Arguments: weatherArgs}
}

func TestAsideFilter(t *testing.T) {
	for _, tc := range []struct {
		name string
		msgs []llm.Message
		want string // one letter per message: a for an aside, - otherwise
	}{
		{"no tools", []llm.Message{llm.UserText("hi"), llm.AssistantText("hello")}, "--"},
		{"aside before the result", []llm.Message{llm.UserText("go"), llm.AssistantToolCalls(call("a")),
			llm.AssistantText("approve?"), llm.ToolResult("a", "ok"), llm.AssistantText("done")}, "--a--"},
		{"aside between two results", []llm.Message{llm.UserText("go"), llm.AssistantToolCalls(call("a"), call("b")),
			llm.ToolResult("a", "ok"), llm.AssistantText("approve b?"), llm.AssistantText("still?"), llm.ToolResult("b", "ok"),
			llm.AssistantText("done")}, "---aa--"},
		{"open group at the end", []llm.Message{llm.UserText("go"), llm.AssistantToolCalls(call("a")), llm.AssistantText("approve?")}, "--a"},
		{"a user message inside the group is no aside", []llm.Message{llm.UserText("go"), llm.AssistantToolCalls(call("a")),
			llm.UserText("wait"), llm.ToolResult("a", "ok")}, "----"},
		{"a new group replaces an open one", []llm.Message{llm.AssistantToolCalls(call("a"), call("b")), llm.ToolResult("a", "x"),
			llm.AssistantToolCalls(call("c")), llm.ToolResult("c", "y"), llm.AssistantText("after")}, "-----"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f llm.AsideFilter
			var got strings.Builder
			for i := range tc.msgs {
				if f.Aside(&tc.msgs[i]) {
					got.WriteByte('a')
				} else {
					got.WriteByte('-')
				}
			}
			if got.String() != tc.want {
				t.Errorf("asides %s, want %s", got.String(), tc.want)
			}
		})
	}
}

func TestRequestTranscript(t *testing.T) {
	msgs := []llm.Message{llm.UserText("go"), llm.AssistantToolCalls(call("a")), llm.AssistantText("approve?"), llm.ToolResult("a", "ok")}
	req := &llm.Request{System: "Be brief.", Messages: msgs}
	want := []llm.Message{llm.SystemText("Be brief."), msgs[0], msgs[1], msgs[3]}
	if diff := cmp.Diff(want, req.Transcript()); diff != "" {
		t.Errorf("Transcript (-want +got):\n%s", diff)
	}
	req.System = ""
	if diff := cmp.Diff(want[1:], req.Transcript()); diff != "" {
		t.Errorf("Transcript without System (-want +got):\n%s", diff)
	}
	if len(msgs) != 4 || msgs[2].Text() != "approve?" {
		t.Error("Transcript modified Messages")
	}
}

func TestRequestValidateSystem(t *testing.T) {
	for _, tc := range []struct {
		name  string
		req   llm.Request
		field string // "" when valid
	}{
		{"system and a user message", llm.Request{System: "s", Messages: []llm.Message{llm.UserText("hi")}}, ""},
		{"system then an assistant message", llm.Request{System: "s", Messages: []llm.Message{llm.AssistantText("hello"), llm.UserText("hi")}}, ""},
		{"no system, assistant first", llm.Request{Messages: []llm.Message{llm.AssistantText("hello"), llm.UserText("hi")}}, "messages[0].role"},
		{"system twice", llm.Request{System: "s", Messages: []llm.Message{llm.SystemText("t"), llm.UserText("hi")}}, "messages[0].role"},
		{"system and no messages", llm.Request{System: "s"}, "messages"},
		{"asides are accepted", llm.Request{System: "s", Messages: []llm.Message{llm.UserText("go"),
			llm.AssistantToolCalls(call("a")), llm.AssistantText("approve?"), llm.ToolResult("a", "ok")}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Validate()
			var ve *llm.ValidationError
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.field != "" && !errors.As(err, &ve):
				t.Fatalf("Validate: %v, want a *ValidationError", err)
			case tc.field != "" && ve.Field != tc.field:
				t.Errorf("Field %q, want %q (%v)", ve.Field, tc.field, err)
			}
		})
	}
}

// approvedEmail is a history whose tool call was approved: the approval
// request stands between the call and its result.
func approvedEmail() []llm.Message {
	return []llm.Message{
		llm.UserText("Email Bob the report."),
		llm.AssistantToolCalls(llm.ToolCall{ID: "c1", Name: "send_email", Arguments: []byte(`{"to":"bob"}`)}),
		llm.AssistantText("I need your approval to call send_email."),
		llm.ToolResult("c1", "sent"),
	}
}

// A chat history goes to the provider as it is stored, its system prompt
// in System; the approval request standing between the tool call and its
// result is an aside, which the wire mappings leave out.
func ExampleRequest_Transcript() {
	history := approvedEmail()
	req := &llm.Request{System: "You are an assistant.", Messages: history}
	for _, m := range req.Transcript() {
		fmt.Printf("%s %q %d\n", m.Role, m.Text(), len(m.ToolCalls))
	}
	// Output:
	// system "You are an assistant." 0
	// user "Email Bob the report." 0
	// assistant "" 1
	// tool "sent" 0
}

func ExampleAsideFilter() {
	history := append(approvedEmail(), llm.AssistantText("Done."))
	var asides llm.AsideFilter
	for i := range history {
		fmt.Println(i, asides.Aside(&history[i]))
	}
	// Output:
	// 0 false
	// 1 false
	// 2 true
	// 3 false
	// 4 false
}
