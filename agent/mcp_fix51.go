package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxMCPRequestBytes bounds the tools/call request an MCP tool sends,
// its arguments encoded as they go on the wire: 4 MiB, the request
// bound of the official SDKs' streamable HTTP servers (a TypeScript
// stdio server closes its connection on a message over 10 MiB). A
// server that refuses a request over its bound may take the session
// down with it, and every later call of its tools would fail; a call
// whose request would be longer fails instead, with an *ArgumentsError,
// before it is sent.
const MaxMCPRequestBytes = 4 << 20

// mcpEnvelopeBytes is what a tools/call request adds to its params
// ({"jsonrpc":"2.0","id":…,"method":"tools/call","params":…}, and the
// _meta the SDK puts in the params: the protocol version, the client's
// information and capabilities), with room to spare.
const mcpEnvelopeBytes = 4 << 10

// checkMCPRequestSize fails when the tools/call request for params would
// be over MaxMCPRequestBytes as the SDK encodes it (encoding/json, which
// escapes <, > and & in strings, so that its size is not args' own).
func checkMCPRequestSize(offered string, params *mcp.CallToolParams) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return &ArgumentsError{Tool: offered, Err: err}
	}
	if n := len(raw) + mcpEnvelopeBytes; n > MaxMCPRequestBytes {
		return &ArgumentsError{Tool: offered, Err: fmt.Errorf("the arguments are too long: the request would be %d bytes, over the %d an MCP request may have", n, MaxMCPRequestBytes)}
	}
	return nil
}

// errMCPLost is the error of a call whose connection to the MCP server
// was lost (the server closed it, a stdio server's process exited, a
// streamable HTTP server no longer knows the session, or refused a
// request in a way that ended it). It matches mcp.ErrConnectionClosed.
type errMCPLost struct{ err error }

func (e *errMCPLost) Error() string {
	return "the connection to the MCP server was lost: " + e.err.Error()
}

func (e *errMCPLost) Unwrap() error { return e.err }

func (e *errMCPLost) Is(target error) bool { return target == mcp.ErrConnectionClosed }

// mcpConnectionLost reports whether err, a call's, says that the
// session's connection is gone.
func mcpConnectionLost(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// mcpUnsent reports whether err, a call's on a connection that is lost,
// shows that the request never reached a server that could act on it:
// the SDK refused to send it on a connection already broken
// (mcp.ErrConnectionClosed), or the write found the stdio server's
// process gone (a broken pipe, EPIPE). Such a call can be made again on
// a new connection.
//
// Not mcp.ErrSessionMissing (a 404 for the session): the SDK also
// fails every call in flight with it when a response stream it resumes,
// or its standalone stream, is answered 404, after the server took
// those calls. Not io.ErrClosedPipe: an in-memory transport's (net.Pipe)
// read returns it for a call that was sent when the session is closed
// under it (a concurrent call's failure dropped it). A call that may
// have run must not run twice.
func mcpUnsent(err error) bool {
	return errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, syscall.EPIPE)
}

// mcpTransient reports whether err is a streamable HTTP server's
// transient refusal of the call (429, 502, 503, 504): the session is
// kept, with no ping (which a rate-limited server would refuse the same
// way, dropping a session the server still serves). The SDK (v1.8.0)
// wraps these in an error of its own package, recognizable by the
// status text it ends with.
func mcpTransient(err error) bool {
	msg := err.Error()
	for _, code := range []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout} {
		if strings.HasSuffix(msg, ": "+http.StatusText(code)) {
			return true
		}
	}
	return false
}

// mcpProbeTimeout bounds the ping that tells whether a session a call
// failed on still works.
const mcpProbeTimeout = 5 * time.Second

// mcpAlive pings cs after a call on it failed in a way its error does
// not explain (a streamable HTTP server that was restarted answers the
// old session's requests with a 400, a server that stopped refuses the
// connection): false when the ping fails too, so that the session is
// dropped and the next call connects again. A ping the server answers
// with "method not found" (a server without ping), or that ran out of
// the caller's time, leaves the session be.
func mcpAlive(ctx context.Context, cs *mcp.ClientSession) bool {
	pctx, cancel := context.WithTimeout(ctx, mcpProbeTimeout)
	defer cancel()
	err := cs.Ping(pctx, nil)
	if err == nil || pctx.Err() != nil {
		return true
	}
	var we *jsonrpc.Error
	return errors.As(err, &we) && we.Code == jsonrpc.CodeMethodNotFound
}

// mcpResultText renders a tool result for the model: its text content,
// with a note in brackets for each block of another kind (an image or
// audio clip is described, not passed on; a resource link is named with
// its URI; an embedded resource's text is passed on under its URI, its
// binary content described), so that the model learns what came back
// rather than get an empty result. A result with no content at all
// renders its structured content as JSON.
func mcpResultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			parts = append(parts, c.Text)
		case *mcp.ImageContent:
			parts = append(parts, fmt.Sprintf("[image: %s, %d bytes, not shown]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio: %s, %d bytes, not played]", orUnknown(c.MIMEType), len(c.Data)))
		case *mcp.ResourceLink:
			parts = append(parts, resourceLinkText(c))
		case *mcp.EmbeddedResource:
			parts = append(parts, embeddedResourceText(c.Resource))
		case nil:
		default:
			parts = append(parts, fmt.Sprintf("[content of type %T, not shown]", c))
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil {
			return string(raw)
		}
	}
	return strings.Join(parts, "\n")
}

func orUnknown(mimeType string) string {
	if mimeType == "" {
		return "type unknown"
	}
	return mimeType
}

func resourceLinkText(l *mcp.ResourceLink) string {
	var b strings.Builder
	b.WriteString("[resource link: ")
	name := l.Title
	if name == "" {
		name = l.Name
	}
	if name != "" {
		b.WriteString(name + " ")
	}
	b.WriteString("<" + l.URI + ">")
	if l.MIMEType != "" {
		b.WriteString(", " + l.MIMEType)
	}
	if l.Size != nil {
		fmt.Fprintf(&b, ", %d bytes", *l.Size)
	}
	if l.Description != "" {
		b.WriteString(": " + l.Description)
	}
	b.WriteString("]")
	return b.String()
}

func embeddedResourceText(r *mcp.ResourceContents) string {
	switch {
	case r == nil:
		return "[resource: empty]"
	case r.Blob != nil:
		return fmt.Sprintf("[resource <%s>: %s, %d bytes, not shown]", r.URI, orUnknown(r.MIMEType), len(r.Blob))
	}
	head := "[resource <" + r.URI + ">"
	if r.MIMEType != "" {
		head += ", " + r.MIMEType
	}
	return head + "]\n" + r.Text
}

// mcpErrorText is the error of a result the server marked as one: its
// rendered content, or a note that it said nothing more.
func mcpErrorText(res *mcp.CallToolResult) string {
	if text := mcpResultText(res); strings.TrimSpace(text) != "" {
		return text
	}
	return "the MCP tool reported an error and gave no message"
}
