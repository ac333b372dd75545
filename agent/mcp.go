package agent

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/llm"
)

// MaxMCPResponseBytes bounds what ConnectMCP's streamable HTTP transport
// reads of one JSON response of the server (and, unless the transport
// sets its own, of one server-sent event), the bound the MCP SDK puts on
// a stdio message: 16 MiB. Past it the call fails rather than read on.
const MaxMCPResponseBytes = 16 << 20

// ConnectMCP starts an MCP client session over transport: an
// mcp.CommandTransport runs a stdio server as a child process, an
// mcp.StreamableClientTransport talks to a streamable HTTP server. Close
// the session when the agent no longer needs its tools.
//
// A streamable HTTP transport is used bounded: a JSON response of the
// server is read up to MaxMCPResponseBytes (a longer one fails the
// call), and so is a server-sent event unless the transport's
// MaxEventSize says otherwise; a redirect is followed only within the
// endpoint's origin (scheme, host and port), so that credentials the
// client adds (an Authorization header set by its RoundTripper) never
// go to another server. The transport passed in is not changed. Errors
// name the endpoint without its query, path or user information, which
// may hold a key.
//
// A stdio server's child process inherits the whole environment of this
// process (os/exec's default) unless its exec.Cmd sets Env: set it to
// what the server needs, so that it sees no keys of this process
// (OPENAI_API_KEY, ARMATURE_TOKENS).
//
// On unix, a stdio server's command is started in a process group of
// its own (its exec.Cmd gets SysProcAttr.Setpgid), and closing the
// session ends the whole group, not only the command's process: a
// server started through a launcher (npx, uvx, sh -c, npm exec) is the
// launcher's child, and would otherwise outlive it. Closing closes the
// server's stdin and gives the group the transport's TerminateDuration
// (default 5 s) to exit, then signals it SIGTERM and, as long again
// later, SIGKILL; a server that exits when its stdin closes is not
// waited for longer than it takes. The same happens when the connection
// ends on its own (the server closed it). A SysProcAttr the exec.Cmd
// already has is kept (copied, with Setpgid set): one that already
// gives the process a group of its own (Setpgid, Foreground or Setsid)
// is left as it is, and one that joins another group (a Pgid other than
// 0) too, that group then never being signalled (only the command's own
// process is). Being in a group of its own, the server does not get the
// terminal's Ctrl-C (SIGINT): close the session when the program ends.
// Elsewhere (Windows) the command's own process alone is ended, as the
// SDK does.
func ConnectMCP(ctx context.Context, transport mcp.Transport) (*mcp.ClientSession, error) {
	switch t := transport.(type) {
	case *mcp.StreamableClientTransport:
		if t != nil {
			transport = boundedHTTP(t)
		}
	case *mcp.CommandTransport:
		if t != nil && t.Command != nil {
			transport = groupCommand(t)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "armature", Version: "0"}, nil)
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("agent: connecting to the MCP server: %w", redactURLs(err))
	}
	return cs, nil
}

// boundedHTTP returns a copy of st whose HTTP client reads bounded JSON
// responses and follows redirects only within the endpoint's origin.
func boundedHTTP(st *mcp.StreamableClientTransport) *mcp.StreamableClientTransport {
	c := *st
	client := http.Client{}
	if st.HTTPClient != nil {
		client = *st.HTTPClient
	}
	base := client.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	client.Transport = boundedBodies{base: base, limit: MaxMCPResponseBytes}
	prev := client.CheckRedirect
	origin := originOf(st.Endpoint)
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if o := originOf(req.URL.String()); o == "" || o != origin {
			return fmt.Errorf("agent: the MCP server redirected to another origin (%s)", redactURL(req.URL.String()))
		}
		if prev != nil {
			return prev(req, via)
		}
		if len(via) >= 10 {
			return errors.New("agent: the MCP server redirected more than 10 times")
		}
		return nil
	}
	c.HTTPClient = &client
	if c.MaxEventSize == 0 {
		c.MaxEventSize = MaxMCPResponseBytes
	}
	return &c
}

// originOf is the scheme, host and port of raw ("" when it is no URL).
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// boundedBodies is a RoundTripper whose JSON response bodies fail once
// they pass limit bytes (server-sent event streams are bounded per event
// by the SDK).
type boundedBodies struct {
	base  http.RoundTripper
	limit int64
}

func (b boundedBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		resp.Body = &limitedBody{rc: resp.Body, left: b.limit + 1}
	}
	return resp, nil
}

// limitedBody fails a read past its bound: left is one more than the
// bytes it may read, so that reading exactly the bound reaches its EOF.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.rc.Read(p)
	if l.left -= int64(n); l.left <= 0 {
		return 0, fmt.Errorf("agent: the MCP server's response is over %d bytes", MaxMCPResponseBytes)
	}
	return n, err
}

func (l *limitedBody) Close() error { return l.rc.Close() }

// toolName is what a model API takes as a tool's name (OpenAI's rule,
// the strictest of the vendors').
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// SkippedMCPToolsError is the error MCPTools returns beside the tools it
// could offer when the server listed some it cannot: a name the MCP
// specification does not allow (characters other than letters, digits,
// _, - and the dot, or more than 128 of them; control or bidirectional
// characters could spoof an approval prompt), a name another listed
// tool already has, or an input schema that is not a JSON object schema.
type SkippedMCPToolsError struct {
	// Skipped maps each skipped tool's name (as the server sent it) to
	// why.
	Skipped map[string]string
}

// Error names up to five skipped tools, in name order, and why.
func (e *SkippedMCPToolsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "agent: %d MCP tool(s) skipped:", len(e.Skipped))
	for n, name := range slices.Sorted(maps.Keys(e.Skipped)) {
		if n == 5 {
			b.WriteString(" …")
			break
		}
		why := e.Skipped[name]
		if len(name) > 80 {
			name = name[:80] + "…"
		}
		fmt.Fprintf(&b, " %q (%s);", name, why)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// MCPTools returns the tools an MCP server offers as agent tools: the
// server's name, description and input schema are what the model sees,
// and a call goes to the server (tools/call). The result's text content
// is the tool's result, with a note in brackets for each block of
// another kind: an image or audio clip is described ("[image:
// image/png, 4033 bytes, not shown]"), a resource link named with its
// URI, an embedded resource's text passed on under its URI and its
// binary content described; a result with no content at all gives its
// structured content as JSON. A result the server marks as an error
// becomes a tool error, which the agent reports to the model. The agent
// bounds a call's time and its result's size (Config.ToolTimeout,
// Config.MaxToolResultBytes). A transport error names the server's
// endpoint without its query, path or user information; one that shows
// the connection lost (the server closed it, or no longer knows the
// session) says so and matches mcp.ErrConnectionClosed.
//
// The tools are listed page after page as long as the server gives a
// cursor, up to MaxMCPToolPages pages and MaxMCPTools tools: a list
// that goes past either, or a page whose next cursor the server gave
// before (a list that would go round forever), fails the listing with
// ErrMCPToolListUnbounded.
//
// The arguments of a call are checked against the tool's input schema
// before they go to the server, when the schema compiles (a schema
// referring to another document, or one the validator does not take,
// is left to the server): arguments that do not fit it fail the call
// with an *ArgumentsError, whose message the agent hands to the model,
// which may correct itself, saying where and why (up to 20 lines). The
// check reads the arguments' numbers as the decimals they are written
// as, not as binary doubles, so that multipleOf 0.01 takes 19.99, and
// minimum, maximum, the integer type, enum and const compare exact
// values (the schema's own numbers come as the MCP SDK decodes them,
// binary doubles: exact to 15 significant digits); a schema the exact
// validator does not compile (a required name given twice, a draft-07
// array of items) is checked as before, by jsonschema-go; a
// number of over 400 characters, or with an exponent past ±400, is
// refused (no server holds it). A schema without $schema is read as
// JSON Schema 2020-12, the MCP specification's default; format is
// never asserted (left to the server), whatever the draft. So are
// arguments refused that would make the request longer than
// MaxMCPRequestBytes, which a server would refuse, taking the session
// down with it.
//
// A tool is offered under its own name when a model API takes it (1 to
// 64 letters, digits, _ or -). A name the MCP specification allows but
// a model API refuses (a dot, as in "github.create_issue", or 65 to 128
// characters) is offered with its dots as underscores
// ("github_create_issue"); where that name is too long or another
// tool's, it is cut to 55 characters and ends in "_" and eight hex
// digits of a hash of the server's name. The model, the history, the
// run records and approval prompts show the offered name
// (Tool.Definition.Name), and the call goes to the server under its
// own. The offered names do not depend on the order the server lists
// its tools in.
//
// A tool whose name is not allowed, or whose input schema is not an
// object schema, is left out: MCPTools then returns the other tools
// with a *SkippedMCPToolsError saying which and why (check for it with
// errors.As to go on with the rest). Any other error returns no
// tools. The tools use cs as long as they are used: a session the
// server closed (a stdio server's child that exited) fails every later
// call; [DialMCP]'s tools connect again instead.
func MCPTools(ctx context.Context, cs *mcp.ClientSession) ([]Tool, error) {
	return mcpTools(ctx, cs, func(context.Context) (*mcp.ClientSession, error) { return cs, nil }, nil)
}

// mcpTools lists cs's tools; a call goes through the session current
// returns, and a call whose connection closed under it tells lost (when
// set).
func mcpTools(ctx context.Context, cs *mcp.ClientSession, current func(context.Context) (*mcp.ClientSession, error), lost func(*mcp.ClientSession)) ([]Tool, error) {
	listed, err := listMCPTools(ctx, cs)
	if err != nil {
		return nil, err
	}
	names, skipped := offeredMCPNames(listed)
	var tools []Tool
	for i, t := range listed {
		offered := names[i]
		if offered == "" {
			continue
		}
		schema := t.InputSchema
		if schema == nil {
			schema = map[string]any{"type": "object"}
		}
		params, err := json.Marshal(schema)
		if err != nil {
			skipped[t.Name] = "its input schema is not JSON: " + err.Error()
			continue
		}
		def := llm.Tool{Name: offered, Description: t.Description, Parameters: params}
		if err := def.Validate(); err != nil {
			skipped[t.Name] = err.Error()
			continue
		}
		tools = append(tools, Tool{Definition: def, Call: mcpCall(t.Name, offered, argumentsCheck(params), current, lost)})
	}
	if len(skipped) > 0 {
		return tools, &SkippedMCPToolsError{Skipped: skipped}
	}
	return tools, nil
}

// MaxMCPToolPages and MaxMCPTools bound the listing of an MCP server's
// tools (tools/list, page after page as long as the server gives a
// cursor): a server, buggy or hostile, that always gives one would
// otherwise be listed until the caller's context ends, its tools
// collected again and again. Both are far past what a server offers: the
// Go SDK's servers send 1,000 tools a page.
const (
	// MaxMCPToolPages is the most pages of tools MCPTools reads.
	MaxMCPToolPages = 1000
	// MaxMCPTools is the most tools MCPTools takes from a server.
	MaxMCPTools = 10000
)

// ErrMCPToolListUnbounded is the error of MCPTools (and MCPClient.Tools)
// when the server's list of tools does not end: a page's next cursor is
// one the server gave before (the listing would go round in a loop), or
// the list goes past MaxMCPToolPages pages or MaxMCPTools tools. It is
// the server's fault; no tools are returned.
var ErrMCPToolListUnbounded = errors.New("agent: the MCP server's tool list does not end")

// listMCPTools lists cs's tools, page after page, within MaxMCPToolPages
// and MaxMCPTools, and stops at a cursor the server gave before.
func listMCPTools(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, error) {
	var listed []*mcp.Tool
	seen := map[[sha256.Size]byte]bool{} // the cursors given so far, hashed: a cursor may be long
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			return nil, fmt.Errorf("agent: listing MCP tools: %w", redactURLs(err))
		}
		for _, t := range res.Tools {
			if t != nil { // a null in the list names no tool
				listed = append(listed, t)
			}
		}
		switch sum := sha256.Sum256([]byte(res.NextCursor)); {
		case len(listed) > MaxMCPTools:
			return nil, fmt.Errorf("%w: it lists over %d tools", ErrMCPToolListUnbounded, MaxMCPTools)
		case res.NextCursor == "":
			return listed, nil
		case seen[sum]:
			return nil, fmt.Errorf("%w: page %d gives a next cursor the server gave before", ErrMCPToolListUnbounded, page)
		case page >= MaxMCPToolPages:
			return nil, fmt.Errorf("%w: it lists over %d pages", ErrMCPToolListUnbounded, MaxMCPToolPages)
		default:
			seen[sum] = true
			// Params of their own for each page: the SDK writes the
			// session's _meta into them.
			params = &mcp.ListToolsParams{Cursor: res.NextCursor}
		}
	}
}

// mcpCall is the Call of the MCP tool the server names name, offered to
// the model as offered: the arguments are checked against the tool's
// input schema (when it could be resolved) before they go to the server.
func mcpCall(name, offered string, check func(json.RawMessage) error, current func(context.Context) (*mcp.ClientSession, error), lost func(*mcp.ClientSession)) func(context.Context, json.RawMessage) (string, error) {
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage(`{}`)
		}
		if check != nil {
			if err := check(args); err != nil {
				return "", &ArgumentsError{Tool: offered, Err: err}
			}
		}
		if err := checkMCPRequestSize(offered, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
			return "", err
		}
		for attempt := 0; ; attempt++ {
			cs, err := current(ctx)
			if err != nil {
				return "", fmt.Errorf("agent: MCP tool %s: %w", offered, err)
			}
			// Params of its own for each attempt: the SDK writes the
			// session's _meta into them.
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
			if err == nil {
				if res.IsError {
					return "", errors.New(mcpErrorText(res))
				}
				return mcpResultText(res), nil
			}
			if ctx.Err() != nil {
				return "", fmt.Errorf("agent: MCP tool %s: %w", offered, redactURLs(err))
			}
			gone := mcpConnectionLost(err)
			if lost != nil {
				// A call that failed for a reason its error does not
				// name is followed by a ping: a session the server no
				// longer serves is dropped, so that the next call
				// connects again rather than fail the same way.
				if !gone && !mcpTransient(err) && !mcpAlive(ctx, cs) {
					gone = true
				}
				if gone {
					lost(cs)
					// A request that never reached the server is made
					// again, once, on a new connection.
					if attempt == 0 && mcpUnsent(err) {
						continue
					}
				}
			}
			if gone {
				err = &errMCPLost{err: err}
			}
			return "", fmt.Errorf("agent: MCP tool %s: %w", offered, redactURLs(err))
		}
	}
}

// mcpToolName is what the MCP specification allows in a tool's name:
// 1 to 128 letters, digits, _, - and the dot.
var mcpToolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// offeredMCPNames is the name each listed tool is offered to the model
// under ("" for a tool left out, which skipped says why). A name a
// model API takes is kept. One the MCP specification allows but a model
// API refuses (a dot, as in "github.create_issue", or more than 64
// characters) is offered with its dots as underscores, cut to 55
// characters and given a suffix of its hash where it is too long or
// where that name is another tool's: the names kept are settled first,
// then the others in the order of the server's names, so the result
// does not depend on the order the server lists its tools in. Any other name (spaces, control or bidirectional
// characters, which could spoof an approval prompt) is left out.
func offeredMCPNames(listed []*mcp.Tool) ([]string, map[string]string) {
	names := make([]string, len(listed))
	skipped := map[string]string{}
	taken := map[string]bool{}
	for i, t := range listed {
		if toolName.MatchString(t.Name) && !taken[t.Name] {
			names[i] = t.Name
			taken[t.Name] = true
		}
	}
	order := make([]int, len(listed))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(listed[a].Name, listed[b].Name) })
	for _, i := range order {
		t := listed[i]
		switch {
		case names[i] != "":
			continue
		case toolName.MatchString(t.Name):
			skipped[t.Name] = "the server lists two tools of this name"
			continue
		case !mcpToolName.MatchString(t.Name):
			skipped[t.Name] = "the name must be 1 to 128 letters, digits, _, - or ."
			continue
		}
		name := strings.ReplaceAll(t.Name, ".", "_")
		if len(name) > 64 || taken[name] {
			h := fnv.New32a()
			h.Write([]byte(t.Name))
			name = fmt.Sprintf("%.55s_%08x", name, h.Sum32())
		}
		if taken[name] {
			skipped[t.Name] = "its name, made one a model API takes (" + name + "), is another tool's"
			continue
		}
		names[i] = name
		taken[name] = true
	}
	return names, skipped
}

// ErrMCPClosed is the error of a tool of a closed MCPClient.
var ErrMCPClosed = errors.New("agent: the MCP client is closed")

// MCPClient is a connection to an MCP server that connects again when
// the server closed it: a stdio server's child that exited, or that
// wrote a frame the SDK refused (over 16 MiB), takes its session down
// with it, and with a session of ConnectMCP every later call of its
// tools fails until the process restarts. An MCPClient's tools connect
// again (a new child) at their next call instead; so they do after a
// streamable HTTP server was restarted or stopped (a call that fails
// for a reason its error does not name is followed by a ping, and a
// session that fails it too is dropped). The call the connection failed
// under is not made again: it fails, and the model is told (the server
// may have acted on it), unless it never reached the server (the SDK
// refused to send it on a connection already lost, or the write found a
// stdio server's process gone): it is then made once on a new
// connection. Safe for concurrent use.
type MCPClient struct {
	newTransport func() mcp.Transport

	mu      sync.Mutex
	cs      *mcp.ClientSession
	gone    chan struct{} // closed once cs's connection ended
	dialing chan struct{} // closed when the connect under way ends
	closed  bool
}

// DialMCP connects to the MCP server that newTransport reaches, as
// ConnectMCP does, and calls it again for each new connection: an
// mcp.CommandTransport runs its command once, so it returns a new one
// (with a new exec.Cmd) each time.
func DialMCP(ctx context.Context, newTransport func() mcp.Transport) (*MCPClient, error) {
	if newTransport == nil {
		return nil, fmt.Errorf("%w: DialMCP needs a transport", ErrInvalidConfig)
	}
	c := &MCPClient{newTransport: newTransport}
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// session returns the session, connecting again when the server closed
// the last one. One connect runs at a time, outside the lock; the
// callers that find it under way wait for it as long as their ctx
// lasts, and try their own if it failed.
func (c *MCPClient) session(ctx context.Context) (*mcp.ClientSession, error) {
	for {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, ErrMCPClosed
		}
		if c.cs != nil {
			select {
			case <-c.gone:
				c.dropLocked()
			default:
				cs := c.cs
				c.mu.Unlock()
				return cs, nil
			}
		}
		if err := ctx.Err(); err != nil {
			c.mu.Unlock()
			return nil, err
		}
		if d := c.dialing; d != nil {
			c.mu.Unlock()
			select {
			case <-d:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		d := make(chan struct{})
		c.dialing = d
		c.mu.Unlock()

		cs, err := ConnectMCP(ctx, c.newTransport())
		c.mu.Lock()
		c.dialing = nil
		close(d)
		switch {
		case err != nil:
			c.mu.Unlock()
			return nil, err
		case c.closed:
			c.mu.Unlock()
			_ = cs.Close()
			return nil, ErrMCPClosed
		}
		gone := make(chan struct{})
		go func() {
			_ = cs.Wait()
			close(gone)
		}()
		c.cs, c.gone = cs, gone
		c.mu.Unlock()
		return cs, nil
	}
}

// dropLocked closes the current session (in the background: closing a
// session whose stdio child hangs waits for it) and forgets it; c.mu is
// held. Closing a stdio session ends the server's whole process group
// (see ConnectMCP), so that a reconnect leaves no server running.
func (c *MCPClient) dropLocked() {
	go c.cs.Close()
	c.cs = nil
}

// Tools returns the server's tools as MCPTools does; each call goes
// through the client's current connection.
func (c *MCPClient) Tools(ctx context.Context) ([]Tool, error) {
	cs, err := c.session(ctx)
	if err != nil {
		return nil, err
	}
	return mcpTools(ctx, cs, c.session, c.lost)
}

// lost drops cs, whose connection closed under a call, if it is still
// the current session: the next call connects again.
func (c *MCPClient) lost(cs *mcp.ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cs == cs {
		c.dropLocked()
	}
}

// Close closes the connection (a stdio server's child exits, with the
// processes of its process group on unix: see ConnectMCP); the client's
// tools fail with ErrMCPClosed from then on. Closing a stdio server
// that does not exit when its stdin closes takes up to twice the
// transport's TerminateDuration.
func (c *MCPClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.cs == nil {
		return nil
	}
	cs := c.cs
	c.cs = nil
	c.mu.Unlock()
	err := cs.Close()
	c.mu.Lock()
	return err
}

// redacted is an error whose text has its URLs redacted; it unwraps to
// the original, so errors.Is still finds a deadline or a cancellation.
type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }

// urlIn matches an http(s) URL in an error's text, up to the next
// space (a quote inside a URL's query does not end it), or one
// percent-encoded whole.
var urlIn = regexp.MustCompile(`(?i)https?(://|%3A%2F%2F)\S+`)

// redactURLs returns err with every http(s) URL in its text cut to its
// origin: an MCP endpoint's query, path or user information may hold a
// key (many hosted servers take it there), and a transport error (a
// *url.Error) quotes the URL whole; the text reaches the model, the
// history, the run's events and the traces.
func redactURLs(err error) error {
	if err == nil {
		return nil
	}
	// A *url.Error (the transport's) is this call's own: its URL is cut
	// in place, so that errors.As finds no key either.
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redactURL(ue.URL)
	}
	msg := err.Error()
	out := urlIn.ReplaceAllStringFunc(msg, func(m string) string {
		// Punctuation after the URL (the closing quote and colon of
		// Post "…": …) stays.
		u := strings.TrimRight(m, `"':,;.)]>`)
		return redactURL(u) + m[len(u):]
	})
	if out == msg {
		return err
	}
	return &redacted{msg: out, err: err}
}

// redactURL is raw cut to its scheme and host, with "/…" standing for
// whatever followed.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "HTTP" && u.Scheme != "HTTPS") {
		return "(a URL)"
	}
	out := u.Scheme + "://" + u.Host
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		out += "/…"
	}
	return out
}
