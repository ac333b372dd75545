package server

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/runtime"
)

// The typed events of a streamed response (stream: true), each sent as
// "event: <type>" and "data: <event>" with its sequence number.

// eventHead starts every streamed event: its type and its place in the
// stream (from 0).
type eventHead struct {
	Type           string `json:"type"`
	SequenceNumber int    `json:"sequence_number"`
}

type lifecycleEvent struct {
	eventHead
	Response *responseJSON `json:"response"`
}

type itemEvent struct {
	eventHead
	OutputIndex int             `json:"output_index"`
	Item        *outputItemJSON `json:"item"`
}

type partEvent struct {
	eventHead
	ItemID       string         `json:"item_id"`
	OutputIndex  int            `json:"output_index"`
	ContentIndex int            `json:"content_index"`
	Part         outputTextJSON `json:"part"`
}

type textEvent struct {
	eventHead
	ItemID       string            `json:"item_id"`
	OutputIndex  int               `json:"output_index"`
	ContentIndex int               `json:"content_index"`
	Delta        *string           `json:"delta,omitempty"`
	Text         *string           `json:"text,omitempty"`
	Logprobs     []json.RawMessage `json:"logprobs"`
}

// mcpEvent is an mcp_call's progress (response.mcp_call.in_progress,
// .completed, .failed) or its arguments (response.mcp_call_arguments.done).
type mcpEvent struct {
	eventHead
	ItemID      string  `json:"item_id"`
	OutputIndex int     `json:"output_index"`
	Arguments   *string `json:"arguments,omitempty"`
}

type errorEvent struct {
	eventHead
	Code    string  `json:"code"`
	Message string  `json:"message"`
	Param   *string `json:"param"`
}

// responseStream writes a response's typed events.
type responseStream struct {
	sw  *sseWriter
	seq int
}

func (rs *responseStream) head(typ string) eventHead {
	h := eventHead{Type: typ, SequenceNumber: rs.seq}
	rs.seq++
	return h
}

func (rs *responseStream) lifecycle(typ string, r *responseJSON) {
	if rs.sw != nil {
		rs.sw.json(typ, lifecycleEvent{rs.head(typ), r})
	}
}

func (rs *responseStream) item(typ string, i int, it outputItemJSON) {
	if rs.sw != nil {
		rs.sw.json(typ, itemEvent{rs.head(typ), i, &it})
	}
}

func (rs *responseStream) part(typ string, i int, itemID string, part outputTextJSON) {
	if rs.sw != nil {
		rs.sw.json(typ, partEvent{rs.head(typ), itemID, i, 0, part})
	}
}

func (rs *responseStream) text(typ string, i int, itemID string, delta, text *string) {
	if rs.sw != nil {
		rs.sw.json(typ, textEvent{rs.head(typ), itemID, i, 0, delta, text, []json.RawMessage{}})
	}
}

func (rs *responseStream) mcp(typ string, i int, itemID string, args *string) {
	if rs.sw != nil {
		rs.sw.json(typ, mcpEvent{rs.head(typ), itemID, i, args})
	}
}

// streamState is a streamed response's output so far. With a quiet
// responseStream (sw nil) it only builds the items: how GET rebuilds a
// failed or cancelled response's output from its run's events, as the
// stream built it from the turn's chunks (partialOutput).
type streamState struct {
	rs      *responseStream
	rt      *responseTurn
	runID   string           // the run's id, once begun
	items   []outputItemJSON // the items added so far
	openMsg int              // the index of the message being streamed, or -1
	text    strings.Builder  // the open message's text so far
	begun   bool             // response.created was sent
	// meta is what the response echoes of its request, when it is not
	// this request's own (a replay echoes the first request's; nil:
	// rt.meta).
	meta *responseMeta
}

// begin sends response.created and response.in_progress, once.
func (st *streamState) begin() {
	if st.rs.sw == nil || st.begun {
		return
	}
	st.begun = true
	if st.runID == "" {
		st.runID = st.rt.c.runID
	}
	m := st.meta
	if m == nil {
		m = st.rt.meta
	}
	obj := m.object(st.runID, st.rt.c.model, st.rt.c.created, statusInProgress)
	st.rs.lifecycle("response.created", obj)
	st.rs.lifecycle("response.in_progress", obj)
}

// add announces a new item (its content empty, in progress) and returns
// its index.
func (st *streamState) add(it outputItemJSON) int {
	i := len(st.items)
	st.items = append(st.items, it)
	st.rs.item("response.output_item.added", i, it)
	if it.Type == "message" {
		st.rs.part("response.content_part.added", i, it.ID, outputTextPart(""))
	}
	return i
}

// delta streams text into the open message, opening one if needed.
func (st *streamState) delta(t string) {
	if t == "" {
		return
	}
	st.begin()
	if st.openMsg < 0 {
		st.text.Reset()
		st.openMsg = st.add(outputItemJSON{Type: "message", ID: messageItemID(st.runID, len(st.items)), Status: statusInProgress,
			Role: "assistant", Content: []outputTextJSON{}})
	}
	st.text.WriteString(t)
	st.rs.text("response.output_text.delta", st.openMsg, st.items[st.openMsg].ID, &t, nil)
}

// closeMessage ends the open message with text (the final one, which
// may hold text that was not streamed) in status: completed, or
// incomplete for a message the turn's failure cut short.
func (st *streamState) closeMessage(text, status string) {
	i := st.openMsg
	if i < 0 {
		return
	}
	st.openMsg = -1
	it := st.items[i]
	it.Status, it.Content = status, []outputTextJSON{outputTextPart(text)}
	st.items[i] = it
	st.rs.text("response.output_text.done", i, it.ID, nil, &text)
	st.rs.part("response.content_part.done", i, it.ID, it.Content[0])
	st.rs.item("response.output_item.done", i, it)
}

// tool streams a tool's progress as an mcp_call item. A call reported
// completed or failed without having been reported running (a native
// agent's call of an undeclared tool fails at once) opens its item
// first, so the stream's items stay those of the final response, in
// its order.
func (st *streamState) tool(t *chat.ToolProgress) {
	id := mcpCallPrefix + t.CallID
	switch t.Status {
	case chat.ToolRunning:
		st.startTool(t)
	case chat.ToolCompleted, chat.ToolFailed:
		i := len(st.items) - 1
		for ; i >= 0 && st.items[i].ID != id; i-- {
		}
		switch {
		case i < 0:
			i = st.startTool(t)
		case st.items[i].Status != statusInProgress:
			return // reported already
		}
		it := st.items[i]
		res := t.Result
		if t.Status == chat.ToolFailed {
			it.Status, it.Error = statusFailed, &res
			st.rs.mcp("response.mcp_call.failed", i, id, nil)
		} else {
			it.Status, it.Output = statusCompleted, &res
			st.rs.mcp("response.mcp_call.completed", i, id, nil)
		}
		st.items[i] = it
		st.rs.item("response.output_item.done", i, it)
	}
}

// startTool opens the mcp_call item of t's call, in progress, and
// returns its index.
func (st *streamState) startTool(t *chat.ToolProgress) int {
	id := mcpCallPrefix + t.CallID
	st.begin()
	st.closeMessage(st.text.String(), statusCompleted)
	args := string(t.Arguments)
	if args == "" {
		args = "{}"
	}
	i := st.add(outputItemJSON{Type: "mcp_call", ID: id, Status: statusInProgress, ServerLabel: ResponsesServerLabel,
		Name: t.Name, Arguments: &args})
	st.rs.mcp("response.mcp_call_arguments.done", i, id, &args)
	st.rs.mcp("response.mcp_call.in_progress", i, id, nil)
	return i
}

// finish completes the stream with the final response: the open
// message gets its final text, the items the stream did not carry (text
// that was not streamed, an approval request, a replayed turn's output)
// are sent whole, then response.completed (or response.incomplete).
func (st *streamState) finish(resp *responseJSON) {
	st.begin()
	if i := st.openMsg; i >= 0 {
		text := st.text.String()
		if i < len(resp.Output) && resp.Output[i].Type == "message" && len(resp.Output[i].Content) > 0 {
			text = resp.Output[i].Content[0].Text
		}
		st.closeMessage(text, statusCompleted)
	}
	for i := len(st.items); i < len(resp.Output); i++ {
		it := resp.Output[i]
		switch it.Type {
		case "message":
			text := it.Content[0].Text
			opened := it
			opened.Status, opened.Content = statusInProgress, []outputTextJSON{}
			st.add(opened)
			st.rs.text("response.output_text.delta", i, it.ID, &text, nil)
			st.rs.text("response.output_text.done", i, it.ID, nil, &text)
			st.rs.part("response.content_part.done", i, it.ID, it.Content[0])
		case "mcp_call":
			opened := it
			opened.Status, opened.Output, opened.Error = statusInProgress, nil, nil
			st.add(opened)
			st.rs.mcp("response.mcp_call_arguments.done", i, it.ID, it.Arguments)
			st.rs.mcp("response.mcp_call.in_progress", i, it.ID, nil)
			if it.Status == statusFailed {
				st.rs.mcp("response.mcp_call.failed", i, it.ID, nil)
			} else {
				st.rs.mcp("response.mcp_call.completed", i, it.ID, nil)
			}
		default:
			st.add(it)
		}
		st.items[i] = it
		st.rs.item("response.output_item.done", i, it)
	}
	typ := "response.completed"
	if resp.Status == statusIncomplete {
		typ = "response.incomplete"
	}
	st.rs.lifecycle(typ, resp)
}

// stream answers a stream: true request: response.created and
// response.in_progress, then the output items as the turn produces them
// (a message's text as response.output_text.delta events; each tool the
// agent runs as an mcp_call item with response.mcp_call.* progress),
// the items the turn produced without streaming them, and
// response.completed (or response.incomplete). The stream opens with
// the turn's first output or at its end: a turn that errors before
// producing any is an HTTP error, as for chat completions; one that
// errors later ends with response.failed and an error event, as does one
// whose stream a quiet turn opened (Config.StreamKeepAlive: the headers
// and ": keep-alive" comment lines, before response.created). The events
// go through an sseWriter: a client too slow for the turn loses its
// stream, and never holds the turn back.
func (rt *responseTurn) stream(w http.ResponseWriter, r *http.Request) error {
	s := rt.e.s
	release, err := s.streams.acquire(r.Context(), rt.tenant)
	if err != nil {
		return err
	}
	defer release()
	sw := newSSEWriter(w)
	defer s.closeStream(r, sw)
	st := &streamState{rs: &responseStream{sw: sw}, rt: rt, openMsg: -1}
	stopKeepAlive := sw.keepAlive(s.cfg.StreamKeepAlive)
	defer stopKeepAlive()
	out := rt.run(r.Context(), func(id string) { st.runID = id }, func(ch chat.Chunk) {
		switch ch.Kind {
		case chat.ChunkText:
			st.delta(ch.Text)
		case chat.ChunkTool:
			if ch.Tool != nil {
				st.tool(ch.Tool)
			}
		}
	})
	stopKeepAlive()
	behind := sw.afterTurn()
	turnEnded(r)
	if behind {
		// The response completed or failed as its run says, but the
		// stream lost events: it ends with the error alone, and the
		// client reads the response (GET /v1/responses/{id}) or retries.
		e := streamDropped(st.runID)
		st.rs.sw.json("error", errorEvent{eventHead: st.rs.head("error"), Code: e.Code, Message: e.Message})
		return nil
	}
	if te := rt.turnError(r.Context(), out); te != nil {
		if !sw.isOpen() {
			return te
		}
		s.log.WarnContext(r.Context(), "server: streamed response errored", "code", te.Code, "error", te.Err)
		st.begin() // a stream the keep-alive opened has sent no event yet
		// The final response is the one GET answers later: its status
		// and error as the run's record tells (cancelled, or failed
		// with the run's error), and the output the stream carried.
		status, rerr := statusFailed, &responseErrorJSON{Code: te.Code, Message: te.Message}
		if o, ok := out.(*chat.Errored); ok && o.Category == errcat.InvocationCancelled {
			status = statusCancelled
		}
		if st.runID != "" {
			if run, err := s.runs.Store().Run(r.Context(), rt.tenant, st.runID); err == nil && run != nil && (run.Status == runtime.StatusFailed || run.Status == runtime.StatusCancelled) {
				status, rerr = endedResponse(run)
			}
		}
		resp := rt.meta.object(st.runID, rt.c.model, rt.c.created, status)
		resp.Error = rerr
		if st.openMsg >= 0 {
			// The turn was cut mid-message: what was sent is all there
			// is, incomplete.
			st.closeMessage(st.text.String(), statusIncomplete)
		}
		resp.Output = st.items
		st.rs.lifecycle("response.failed", resp)
		st.rs.sw.json("error", errorEvent{eventHead: st.rs.head("error"), Code: rerr.Code, Message: rerr.Message})
		return nil
	}
	st.meta = rt.echoed(r.Context(), out)
	st.finish(final(r.Context(), rt.a, rt.tenant, rt.c, st.meta, rt.c.created, out))
	return nil
}
