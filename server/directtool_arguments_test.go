package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"testing"
	"unicode/utf8"
)

// A direct call's arguments are recorded as the tool got them: the
// request's arguments decoded and encoded again, so that its
// runtime.tool.direct.started event is valid UTF-8 JSON whatever the
// request held (invalid UTF-8 inside a string is U+FFFD, as the tool
// decoding it would see it), and GET /v1/runs/{id}/events serves it to
// strict clients. Numbers keep their text (an id past 2^53 is not
// rounded).
func TestDirectToolRecordsTheArgumentsTheToolGot(t *testing.T) {
	var got json.RawMessage
	_, ts := directToolServer(t, directToolGatewayTool("echo_args", func(_ context.Context, args json.RawMessage) (string, error) {
		got = append(json.RawMessage(nil), args...)
		return "ok", nil
	}))
	status, raw, err := directToolPost(ts, "/v1/agents/demo/tools/echo_args",
		"{\"arguments\":{\"order\":\"7\xff\xfe\",\"id\":12345678901234567890,\"note\":\"<b>&\"},\"session_id\":\"u1\"}")
	if err != nil || status != http.StatusOK {
		t.Fatalf("direct call: %d %s %v", status, raw, err)
	}
	const want = `{"id":12345678901234567890,"note":"<b>&","order":"7` + "\uFFFD\uFFFD" + `"}`
	if string(got) != want {
		t.Errorf("the tool got %s, want %s", got, want)
	}
	var resp struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(raw, &resp); err != nil {
		t.Fatal(err)
	}
	r, err := http.Get(ts.URL + "/v1/runs/" + resp.RunID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var page struct {
		Events []struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		} `json:"events"`
	}
	body, _ := io.ReadAll(r.Body)
	if !utf8.Valid(body) {
		t.Fatalf("GET /v1/runs/{id}/events answers invalid UTF-8: %q", body)
	}
	if err := json.Unmarshal(body, &page); err != nil {
		t.Fatalf("events: %v: %s", err, body)
	}
	found := false
	for _, e := range page.Events {
		if e.Type != "runtime.tool.direct.started" {
			continue
		}
		found = true
		var data struct {
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(e.Data, &data); err != nil || !sameJSON(data.Args, got) {
			t.Errorf("runtime.tool.direct.started records args %s, the tool got %s", data.Args, got)
		}
	}
	if !found {
		t.Errorf("no runtime.tool.direct.started event in %s", body)
	}
}

// sameJSON reports whether a and b are the same JSON value, numbers
// compared by their text.
func sameJSON(a, b json.RawMessage) bool {
	decode := func(raw json.RawMessage) (any, error) {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		err := dec.Decode(&v)
		return v, err
	}
	va, errA := decode(a)
	vb, errB := decode(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}
