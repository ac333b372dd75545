package chatcli

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/armature-go/armature/internal/httpurl"
	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/runtime"
)

// Config configures [Run].
type Config struct {
	// Client talks to the server. Required.
	Client *Client
	// In is read line by line: messages, commands and approval answers.
	// Required. Run returns at its end. A line longer than [MaxLine] is
	// not used (the client says so), nor is a line that is not valid
	// UTF-8, nor a line typed before the approval question it would
	// answer was shown.
	In io.Reader
	// Out receives everything the client prints. Required.
	Out io.Writer
	// StatePath is the state file remembering the last session per
	// server (see [DefaultStatePath]); "" keeps no state.
	StatePath string
	// Session is the session to start in; "" continues the state file's
	// session, or starts a new one.
	Session string
	// CatchUp bounds how long a turn's answer waits for the event stream
	// to deliver the rest of the turn's events; default 3s.
	CatchUp time.Duration
	// Interrupt, when set, delivers the user's interrupts (Ctrl-C): one
	// during a turn cancels the turn on the server (its runs, POST
	// /v1/runs/{id}/cancel), and the client goes on; a second one during
	// the turn (a server that does not answer) stops waiting for its
	// answer, and the client goes on to the prompt; one during a
	// command (/sessions, /switch, ...) cancels the command's request and
	// the client goes on to the prompt; one at a prompt, or while the
	// client starts, ends Run.
	Interrupt <-chan struct{}
}

// Validate reports whether the configuration can be used.
func (c Config) Validate() error {
	switch {
	case c.Client == nil:
		return fmt.Errorf("%w: Client is required", ErrInvalidConfig)
	case c.In == nil || c.Out == nil:
		return fmt.Errorf("%w: In and Out are required", ErrInvalidConfig)
	case c.CatchUp < 0:
		return fmt.Errorf("%w: CatchUp must not be negative", ErrInvalidConfig)
	}
	return nil
}

// Help is the text of /help.
const Help = `Type a message and press Enter to send it. Commands:
  /new           start a new session
  /sessions      list your sessions
  /switch <id>   continue another session
  /history [n]   show this session's newest n messages (50; "all": every one)
  /help          show this help
  /quit          leave (Ctrl-D too); the session is kept on the server
When the agent asks for approval, answer y (approve), n or Enter (deny),
or type a comment to deny with it ("y <comment>" approves with one); what
you typed before the question does not answer it. Ctrl-C cancels a turn
(twice: stops waiting for it); at the prompt it leaves.`

// Run runs the interactive client until In ends, /quit, or ctx ends.
// Only the event-stream goroutine of the current session, the turn in
// flight and, while a command runs, the goroutine taking its interrupts
// run beside the loop, and Run waits for them; the goroutine reading In
// ends when In does.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.CatchUp == 0 {
		cfg.CatchUp = 3 * time.Second
	}
	st := &State{Servers: map[string]ServerState{}}
	if cfg.StatePath != "" {
		var err error
		if st, err = LoadState(cfg.StatePath); err != nil {
			return err
		}
	}
	lines, typed := make(chan string, typeAhead), &lineLog{}
	go readLines(cfg.In, lines, typed)
	c := &chatLoop{cfg: cfg, c: cfg.Client, out: termSafe{cfg.Out}, state: st, lines: lines, typed: typed, seen: map[string]int64{},
		pending: map[string]*pendingSignal{}}
	defer c.close()
	return c.run(ctx)
}

// MaxLine bounds an input line, in bytes without its line end: a longer
// line is not sent (the server takes request bodies of at most 1 MiB by
// default); the client says so and goes on.
const MaxLine = 1 << 20

// typeAhead is how many lines the client reads ahead of its prompts, so
// that it knows when they were typed.
const typeAhead = 64

// lineInfo is what the client knows of an input line besides its text.
type lineInfo struct {
	// at is when the line was read (zero: not known).
	at time.Time
	// long marks a line longer than MaxLine; its text was not kept.
	long bool
}

// lineLog holds the lineInfo of the lines read and not yet taken, in
// order: readLines pushes a line's before it sends the line, and the
// loop pops it when it takes the line. A nil *lineLog knows nothing.
type lineLog struct {
	mu sync.Mutex
	q  []lineInfo
}

func (g *lineLog) push(i lineInfo) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.q = append(g.q, i)
}

func (g *lineLog) pop() lineInfo {
	if g == nil {
		return lineInfo{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.q) == 0 {
		return lineInfo{}
	}
	i := g.q[0]
	g.q = g.q[1:]
	return i
}

// readLines sends in's lines on lines, without their line ends ("\n"
// or "\r\n"), until in ends, when it closes lines; a line longer than
// MaxLine is sent as "" and logged long. It reads ahead of the loop (up
// to lines' capacity), logging when each line came, so that an answer
// typed before its question is known as such. Before, a line longer
// than 1 MiB (pasted, or piped) ended the client as if the input had
// ended.
func readLines(in io.Reader, lines chan<- string, typed *lineLog) {
	defer close(lines)
	br := bufio.NewReaderSize(in, 64<<10)
	var buf []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(chunk) > MaxLine+2 { // room for "\r\n"
				buf, tooLong = buf[:0], true
			} else {
				buf = append(buf, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue // the line goes on
		}
		if err != nil && len(buf) == 0 && !tooLong {
			return
		}
		text := strings.TrimSuffix(strings.TrimSuffix(string(buf), "\n"), "\r")
		if tooLong || len(text) > MaxLine {
			text, tooLong = "", true
		}
		typed.push(lineInfo{at: time.Now(), long: tooLong})
		lines <- text
		if err != nil {
			return
		}
		buf, tooLong = buf[:0], false
	}
}

// chatLoop is the client's state. Only Run's goroutine touches it.
type chatLoop struct {
	cfg   Config
	c     *Client
	out   io.Writer
	state *State
	lines <-chan string
	// typed tells when each line of lines was read, and which were too
	// long; nil when not known.
	typed *lineLog

	session string
	w       *watcher
	// seen is the last event id read per session.
	seen map[string]int64
	// pending is the signal a suspended turn awaits, per session.
	pending map[string]*pendingSignal
}

func (l *chatLoop) printf(format string, args ...any) { fmt.Fprintf(l.out, format, args...) }

func (l *chatLoop) run(ctx context.Context) error {
	rctx, interrupted := l.interruptible(ctx)
	err := l.start(ctx, rctx)
	if interrupted() {
		return nil // Ctrl-C before the first prompt: the user leaves
	}
	if err != nil {
		return err
	}
	for {
		if p := l.pending[l.session]; p != nil {
			l.printf("A turn of this session awaits your answer.\n")
			if quit := l.answer(ctx, p.Signal); quit {
				return nil
			}
			continue
		}
		l.printf("you> ")
		line, st := l.readLine(ctx, "you> ", time.Time{}, nil)
		switch st {
		case inputEnded:
			l.printf("\n")
			return nil
		case promptClosed:
			continue // another client's turn awaits an answer
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "//"):
			line = line[1:]
		case strings.HasPrefix(line, "/"):
			if quit := l.command(ctx, line); quit {
				return nil
			}
			continue
		}
		if quit := l.turn(ctx, line); quit {
			return nil
		}
	}
}

// readState is how readLine ended.
type readState int

const (
	lineRead     readState = iota
	inputEnded             // the end of input, an interrupt or of ctx
	promptClosed           // the prompt no longer applies (see readLine)
)

// readLine waits for a line of input, following the session's event
// stream meanwhile: another client's turn prints as it runs, and the
// prompt is printed again after it (and after a note), so that the user
// knows what the next line answers. The prompt is closed when stale
// reports true after an event (an approval prompt another client
// answered), or, with stale nil, when another client's turn left this
// session awaiting an answer.
//
// A line typed before asked (when not zero: when the question was first
// shown) is not taken: it was typed before the user could read the
// question, and the client says so. Nor is a line longer than MaxLine.
func (l *chatLoop) readLine(ctx context.Context, prompt string, asked time.Time, stale func() bool) (string, readState) {
	var other *turnRender // another client's turn, while it runs
	for {
		select {
		case line, ok := <-l.lines:
			if !ok {
				return "", inputEnded
			}
			switch info := l.typed.pop(); {
			case info.long:
				l.printf("  ! that line is longer than %d bytes: not used\n%s", MaxLine, prompt)
			case !utf8.ValidString(line):
				// Sent, its invalid bytes would reach the agent as U+FFFD
				// (JSON has no other way to carry them): the words the
				// user typed would change without a word.
				l.printf("  ! that line is not valid UTF-8 (is the terminal's encoding UTF-8?): not used\n%s", prompt)
			case !asked.IsZero() && !info.at.IsZero() && info.at.Before(asked):
				// The line was echoed before the question: the cursor is
				// after the question.
				l.printf("\n  ! typed before the question, so not its answer: %s\n%s", oneLine(line), prompt)
			default:
				return line, lineRead
			}
		case ev := <-l.events():
			l.track(ev)
			if other == nil && ev.Type == runtime.EventRequestStarted {
				other = &turnRender{out: l.out, runs: map[string]bool{}}
				l.printf("\n  (another client's turn)\n")
			}
			ended := false
			if other != nil {
				cut := other.err != nil
				if other.event(ev); other.err != nil && !cut {
					other.line("  ! error [too_large]: " + inline(other.err.detail()) + ": the rest of that turn is not shown")
				}
				if other.open > 0 {
					continue // printed once it ends
				}
				other.endLine()
				other, ended = nil, true
			}
			switch {
			case stale != nil && stale(), stale == nil && l.pending[l.session] != nil:
				return "", promptClosed
			case ended:
				l.printf("%s", prompt)
			}
		case msg := <-l.notes():
			l.printf("\n  ! %s\n%s", inline(msg), prompt)
		case <-l.cfg.Interrupt:
			return "", inputEnded
		case <-ctx.Done():
			return "", inputEnded
		}
	}
}

func (l *chatLoop) events() <-chan runtime.Event {
	if l.w == nil {
		return nil
	}
	return l.w.events
}

// following reports whether the current session's stream is followed
// (the watcher did not stop).
func (l *chatLoop) following() bool {
	if l.w == nil {
		return false
	}
	select {
	case <-l.w.done:
		return false
	default:
		return true
	}
}

// watchDone is closed when the watcher stops (nil without one).
func (l *chatLoop) watchDone() <-chan struct{} {
	if l.w == nil {
		return nil
	}
	return l.w.done
}

func (l *chatLoop) notes() <-chan string {
	if l.w == nil {
		return nil
	}
	return l.w.notes
}

// track records the last event read of the current session (taken from
// the watcher's events: every event taken goes through track), and
// which of its turns awaits a signal (a suspension seen on the stream,
// until a run resuming it starts).
func (l *chatLoop) track(ev runtime.Event) {
	if l.w != nil {
		l.w.took(ev)
	}
	if ev.ID > l.seen[l.session] {
		l.seen[l.session] = ev.ID
	}
	switch ev.Type {
	case runtime.EventRequestSuspended:
		var d struct {
			InvocationID string  `json:"invocationId"`
			Signal       *Signal `json:"signal"`
		}
		if json.Unmarshal(ev.Data, &d) == nil && d.Signal != nil && d.Signal.SignalID != "" {
			sig := *d.Signal
			sig.InvocationID = d.InvocationID
			l.pending[l.session] = &pendingSignal{Signal: sig, run: ev.RunID}
		}
	case runtime.EventRequestStarted:
		if p := l.pending[l.session]; p != nil && ev.ParentRequestID != "" && ev.ParentRequestID == p.run {
			delete(l.pending, l.session)
		}
	}
}

// await records that the session's turn awaits sig, suspended by run
// ("" when not known), unless the stream already told.
func (l *chatLoop) await(id string, sig Signal, run string) {
	switch p := l.pending[id]; {
	case p == nil || p.SignalID != sig.SignalID:
		l.pending[id] = &pendingSignal{Signal: sig, run: run}
	case p.run == "":
		p.run = run
	}
}

// pendingSignal is what a suspended turn of a session awaits, and the
// run that suspended ("" when it is not known).
type pendingSignal struct {
	Signal
	run string
}

// interruptible returns the context for a command's requests, which the
// user's interrupts cancel, and done, which ends the command: it stops
// taking interrupts and reports whether one came. Every interrupt until
// done is the command's, so none is left over for the next prompt to
// take for a quit.
func (l *chatLoop) interruptible(ctx context.Context) (req context.Context, done func() (interrupted bool)) {
	req, cancel := context.WithCancel(ctx)
	if l.cfg.Interrupt == nil {
		return req, func() bool { cancel(); return false }
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	var got bool
	go func() {
		defer close(stopped)
		for {
			select {
			case <-l.cfg.Interrupt:
				got = true
				cancel()
			case <-stop:
				return
			}
		}
	}()
	return req, func() bool {
		close(stop)
		<-stopped
		cancel()
		return got
	}
}

// start enters the configured session, the remembered one, or a new one.
// Its requests use req, which an interrupt cancels.
func (l *chatLoop) start(ctx, req context.Context) error {
	id, after := l.cfg.Session, int64(0)
	remembered, ok := l.state.Servers[l.serverKey()]
	if !ok {
		remembered = l.state.Servers[l.c.Server()] // a file written before keys were redacted
	}
	if id == "" {
		id, after = remembered.Session, remembered.LastEventID
	} else if id == remembered.Session {
		after = remembered.LastEventID
	}
	if id != "" {
		s, err := l.c.SessionPage(req, id, 1, -1) // its length, not its history
		switch {
		case errors.Is(err, ErrNotFound) && l.cfg.Session != "":
			if _, err := l.c.CreateSession(req, id); err != nil {
				return err
			}
			l.printf("armature chat: new session %s on %s\n", inline(id), l.serverKey())
			after = 0
		case errors.Is(err, ErrNotFound):
			// The remembered session is gone: start a new one, whose
			// stream starts at the beginning.
			id, after = "", 0
		case errors.Is(err, ErrTooLarge):
			// The session is there; its history is more than the client
			// reads, which /history says.
			l.printf("armature chat: continuing session %s on %s (%s)\n", inline(id), l.serverKey(), historyTooLarge)
		case err != nil:
			return err
		default:
			l.printf("armature chat: continuing session %s on %s (%d messages; /history shows them)\n",
				inline(id), l.serverKey(), s.MessageCount)
		}
	}
	if id == "" {
		s, err := l.c.CreateSession(req, "")
		if err != nil {
			return err
		}
		id = s.SessionID
		l.printf("armature chat: new session %s on %s\n", inline(id), l.serverKey())
	}
	l.seen[id] = after
	if p := remembered.Pending; p != nil && id == remembered.Session && after > 0 {
		l.pending[id] = &pendingSignal{Signal: *p, run: remembered.PendingRun}
	}
	if err := l.enter(ctx, req, id, true); err != nil {
		return err
	}
	l.printf("Type a message, or /help.\n")
	return nil
}

// enter makes id the current session: it follows the session's event
// stream (for as long as ctx lasts) from the last event read and
// remembers the session; ending req abandons the subscription, and the
// current session stays. A session with history first lets the stream's
// replay of old events settle, so that they are not taken for the next
// turn's (bounded, and not cut short by req).
func (l *chatLoop) enter(ctx, req context.Context, id string, settle bool) error {
	w, err := watch(ctx, req, l.c, id, l.seen[id])
	if err != nil {
		return err
	}
	if l.w != nil {
		l.w.stop()
		l.saveState()
	}
	l.w, l.session = w, id
	if settle {
		l.settle(ctx)
	}
	l.saveState()
	return nil
}

// settle reads events until the stream has been quiet for a moment.
func (l *chatLoop) settle(ctx context.Context) {
	const quiet, most = 150 * time.Millisecond, 3 * time.Second
	deadline := time.After(most)
	t := time.NewTimer(quiet)
	defer t.Stop()
	for {
		select {
		case ev := <-l.w.events:
			l.track(ev)
			t.Reset(quiet)
		case <-t.C:
			return
		case <-deadline:
			return
		case <-ctx.Done():
			return
		}
	}
}

// saveState remembers the current session and its stream position.
// serverKey is the server's URL as the client shows and remembers it:
// with any password it carries masked (httpurl.Redact), so that neither
// the terminal nor the state file holds it.
func (l *chatLoop) serverKey() string { return httpurl.Redact(l.c.Server()) }

func (l *chatLoop) saveState() {
	if l.cfg.StatePath == "" || l.session == "" {
		return
	}
	ss := ServerState{Session: l.session, LastEventID: l.seen[l.session]}
	if p := l.pending[l.session]; p != nil {
		sig := p.Signal
		ss.Pending, ss.PendingRun = &sig, p.run
	}
	l.state.Servers[l.serverKey()] = ss
	// Only this server's entry: other clients sharing the file keep theirs.
	// An entry an older client keyed by the URL with its password goes.
	if err := SaveServerState(l.cfg.StatePath, l.serverKey(), ss, l.c.Server()); err != nil {
		l.printf("  ! %s\n", inline(err.Error()))
	}
}

func (l *chatLoop) close() {
	if l.w != nil {
		l.w.stop()
		l.saveState()
		l.w = nil
	}
}

// command runs a /command; quit reports /quit. An interrupt cancels the
// command's request and the command prints "(cancelled)".
func (l *chatLoop) command(ctx context.Context, line string) (quit bool) {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	req, done := l.interruptible(ctx)
	defer done()
	switch name {
	case "/quit", "/exit":
		return true
	case "/help":
		l.printf("%s\n", Help)
	case "/new":
		s, err := l.c.CreateSession(req, arg)
		if err != nil {
			l.failed(req, err)
			return false
		}
		if err := l.enter(ctx, req, s.SessionID, false); err != nil {
			if req.Err() != nil {
				l.printf("  (cancelled: session %s was created; /switch %s enters it)\n", inline(s.SessionID), inline(s.SessionID))
				return false
			}
			l.printErr(err)
			return false
		}
		l.printf("new session %s\n", inline(s.SessionID))
	case "/sessions":
		l.sessions(req)
	case "/switch":
		if arg == "" {
			l.printf("usage: /switch <session id> (/sessions lists them)\n")
			return false
		}
		s, err := l.c.SessionPage(req, arg, 1, -1)
		tooLarge := errors.Is(err, ErrTooLarge)
		if err != nil && !tooLarge {
			l.failed(req, err)
			return false
		}
		if err := l.enter(ctx, req, arg, true); err != nil {
			l.failed(req, err)
			return false
		}
		if tooLarge {
			l.printf("switched to session %s (%s)\n", inline(arg), historyTooLarge)
			return false
		}
		l.printf("switched to session %s (%d messages; /history shows them)\n", inline(arg), s.MessageCount)
	case "/history":
		n, ok := historyArg(arg)
		if !ok {
			l.printf("usage: /history [n | all] (the newest n messages, %d by default; all of them)\n", defaultHistory)
			return false
		}
		var s *Session
		var err error
		if n == 0 {
			s, err = l.c.GetSession(req, l.session)
		} else {
			s, err = l.c.SessionPage(req, l.session, n, -1)
		}
		if err != nil {
			l.failed(req, err)
			return false
		}
		msgs := s.Messages
		if s.MessageOffset > 0 {
			// From a turn's start: a tool result's call is on the page.
			if i := slices.IndexFunc(msgs, func(m llm.Message) bool { return m.Role == llm.RoleUser }); i > 0 {
				msgs = msgs[i:]
			}
			l.printf("(%d earlier messages: /history <n> or /history all shows them)\n", s.MessageCount-len(msgs))
		}
		l.history(req, msgs)
	default:
		l.printf("unknown command %s; /help lists the commands\n", name)
	}
	return false
}

// defaultHistory is how many of the newest messages /history shows.
const defaultHistory = 50

// historyArg reads /history's argument: how many of the newest messages
// to show (0: all of them).
func historyArg(arg string) (int, bool) {
	switch arg = strings.TrimSpace(arg); arg {
	case "":
		return defaultHistory, true
	case "all":
		return 0, true
	}
	n, err := strconv.Atoi(arg)
	if err != nil || n < 1 || n > MaxHistoryPage {
		return 0, false
	}
	return n, true
}

// historyTooLarge is what the client says of a session whose history
// exceeds [MaxHistoryBytes] or [MaxHistoryMessages] as it enters it.
const historyTooLarge = "its history is more than the client reads: /history cannot show it"

// failed prints a command's failed request: "(cancelled)" when an
// interrupt (or the end of Run) cancelled it, else the server's error.
func (l *chatLoop) failed(req context.Context, err error) {
	if req.Err() != nil {
		l.printf("  (cancelled)\n")
		return
	}
	l.printErr(err)
}

// sessions lists the sessions, newest first, until req ends.
func (l *chatLoop) sessions(req context.Context) {
	all, err := l.c.ListSessions(req)
	if err != nil {
		l.failed(req, err)
		return
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].UpdatedAt.After(all[j].UpdatedAt) })
	if len(all) == 0 {
		l.printf("no sessions\n")
	}
	for _, s := range all {
		if req.Err() != nil {
			l.printf("  (cancelled)\n")
			return
		}
		mark := " "
		if s.SessionID == l.session {
			mark = "*"
		}
		l.printf("%s %s  updated %s\n", mark, inline(s.SessionID), s.UpdatedAt.Local().Format("2006-01-02 15:04:05"))
	}
}

// history prints a session's messages until req ends.
func (l *chatLoop) history(req context.Context, msgs []llm.Message) {
	if len(msgs) == 0 {
		l.printf("no messages yet\n")
		return
	}
	names := map[string]string{}
	for _, m := range msgs {
		if req.Err() != nil {
			l.printf("  (cancelled)\n")
			return
		}
		switch m.Role {
		case llm.RoleUser:
			l.printf("you> %s\n", m.Text())
		case llm.RoleAssistant:
			if t := m.Text(); t != "" {
				l.printf("agent> %s\n", t)
			}
			for _, tc := range m.ToolCalls {
				names[tc.ID] = tc.Name
				l.printf("  · calling %s %s\n", inline(tc.Name), compact(tc.Arguments))
			}
		case llm.RoleTool:
			l.printf("  · %s returned: %s\n", inline(names[m.ToolCallID]), oneLine(m.Text()))
		}
	}
}

// printErr prints a request's failure with the server's text; a
// [*TooLargeError] as error [too_large].
func (l *chatLoop) printErr(err error) {
	var ae *APIError
	var tl *TooLargeError
	if errors.As(err, &tl) {
		l.printf("  ! error [too_large]: %s\n", inline(tl.detail()))
		return
	}
	if errors.As(err, &ae) {
		code := ae.Code
		if code == "" {
			code = fmt.Sprint(ae.Status)
		}
		l.printf("  ! error [%s]: %s\n", inline(code), inline(ae.Message))
		return
	}
	l.printf("  ! %s\n", inline(err.Error()))
}

// turn sends text, printing the turn's events as the stream delivers
// them, then its outcome; a suspended turn asks for its answer. quit
// reports /quit or the end of input at an approval prompt.
func (l *chatLoop) turn(ctx context.Context, text string) (quit bool) {
	// The message's id names the turn's run before any of its events
	// (a turn waiting behind another has none yet): Ctrl-C cancels it
	// and no other turn of the session.
	mid := "chat-" + uuid.New()
	out, err := l.stream(ctx, turnKey{messageID: mid}, func(ctx context.Context) (*Outcome, error) {
		return l.c.SendMessage(ctx, l.session, text, mid)
	})
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, errAbandoned) {
			l.printErr(err)
		}
		return false
	}
	if len(out.Superseded) > 0 {
		// The message closed a turn that awaited an answer.
		delete(l.pending, l.session)
		l.printf("  (the approval that was pending is closed: its tool call was not run)\n")
	}
	if out.Outcome != OutcomeSuspended || out.Signal == nil {
		return false
	}
	sig := *out.bound()
	l.await(l.session, sig, out.RunID)
	return l.answer(ctx, sig)
}

// answer asks for the answer to sig, a suspended turn's signal, and
// prints the resumed turn, until the turn no longer suspends. A command
// typed at the prompt leaves the turn suspended (it is asked again) and
// runs; quit reports /quit or the end of input.
func (l *chatLoop) answer(ctx context.Context, sig Signal) (quit bool) {
	id := l.session
	for {
		payload, cmd, ok := l.askSignal(ctx, sig)
		if !ok {
			l.printf("\n")
			return true
		}
		if payload == nil && cmd == "" {
			l.printf("\n  (answered elsewhere: another client decided, or closed the turn)\n")
			return false
		}
		if cmd != "" {
			l.printf("  (the turn stays suspended)\n")
			return l.command(ctx, cmd)
		}
		var key turnKey
		if p := l.pending[id]; p != nil {
			key.parentID = p.run
		}
		out, err := l.stream(ctx, key, func(ctx context.Context) (*Outcome, error) { return l.c.Signal(ctx, id, sig, payload) })
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, errAbandoned) {
				l.printErr(err)
			}
			return ctx.Err() != nil
		}
		if out.Error != nil {
			switch out.Error.Category {
			case CategorySignalCorrelationFailed:
				delete(l.pending, id)
				if out.DecisionTookEffect() {
					// 409: an earlier answer (this client's, before its
					// connection dropped, or another client's) decided.
					l.printf("  (this call was already decided: an earlier answer took effect; this one changes nothing)\n")
					return false
				}
				l.printf("  (nothing awaits this answer any more: a newer message, another client or a delete closed it)\n")
				return false
			case CategoryResumePayloadInvalid:
				continue // the turn stays suspended: ask again
			}
		}
		if out.Outcome != OutcomeSuspended || out.Signal == nil {
			delete(l.pending, id)
			return false
		}
		sig = *out.bound()
		l.await(id, sig, out.RunID)
	}
}

// askSignal prompts for the answer to a suspended turn's signal: an
// approval, or a free-text reply for any other signal. A line starting
// with "/" is a command, returned as cmd; ok is false at the end of
// input. A nil payload with ok set means the prompt closed: another
// client answered the signal (or closed its turn) meanwhile, and the
// resumed turn printed as it ran.
func (l *chatLoop) askSignal(ctx context.Context, sig Signal) (payload map[string]any, cmd string, ok bool) {
	tool, _ := sig.Metadata["tool"].(string)
	var prompt string
	if tool == "" {
		prompt = fmt.Sprintf("The agent waits for signal %s; your reply: ", inline(sig.SignalID))
	} else {
		args := ""
		if a, ok := sig.Metadata["arguments"]; ok {
			args = " " + marshal(a)
		}
		if len(args) > maxPromptArgs {
			// Long arguments (a model's padding among them) would push
			// the tool's name off the screen, away from the question:
			// they show on lines of their own, above it.
			l.printf("  · %s would be called with%s\n", inline(tool), args)
			args = " (with the arguments above)"
		}
		prompt = fmt.Sprintf("Approve %s%s? [y/N/comment] ", inline(tool), args)
	}
	asked := time.Now()
	l.printf("%s", prompt)
	id := l.session
	line, st := l.readLine(ctx, prompt, asked, func() bool {
		p := l.pending[id]
		return p == nil || p.SignalID != sig.SignalID || (p.InvocationID != "" && sig.InvocationID != "" && p.InvocationID != sig.InvocationID)
	})
	switch st {
	case inputEnded:
		return nil, "", false
	case promptClosed:
		return nil, "", true
	}
	if t := strings.TrimSpace(line); strings.HasPrefix(t, "/") && !strings.HasPrefix(t, "//") {
		return nil, t, true
	}
	if tool == "" {
		return map[string]any{"user_reply": line}, "", true
	}
	a := ParseApproval(strings.TrimPrefix(strings.TrimSpace(line), "/"))
	l.printf("  %s\n", decisionNote(a, line))
	return map[string]any{"approval": a}, "", true
}

// maxPromptArgs bounds the arguments an approval question shows inline,
// in bytes of JSON; longer ones show above it.
const maxPromptArgs = 200

// decisionNote is what the prompt says of the decision a taken from
// line: a comment beside an approval does not change the call, which
// runs as shown ("yes but only $10" approves the call as it is), and an
// answer that was neither yes nor no denied.
func decisionNote(a Approval, line string) string {
	word, _, _ := strings.Cut(strings.TrimSpace(line), " ")
	word = strings.ToLower(strings.TrimRight(word, ",:;.!"))
	switch {
	case a.Approved && a.Comment != "":
		return "approved: the call runs as shown; your comment is kept with the decision, not sent to the agent"
	case a.Approved:
		return "approved"
	case word != "" && word != "n" && word != "no":
		return "denied (answer y to approve); your words go to the agent"
	}
	return "denied"
}

// ParseApproval reads an answer to an approval prompt: "y" or "yes"
// (optionally followed by a comment) approves; "", "n" or "no"
// (optionally followed by a comment) denies; any other text denies with
// the text as the comment the agent is told.
func ParseApproval(line string) Approval {
	line = strings.TrimSpace(line)
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(strings.TrimLeft(rest, ",:;- "))
	switch strings.ToLower(strings.TrimRight(word, ",:;.!")) {
	case "y", "yes":
		return Approval{Approved: true, Comment: rest}
	case "", "n", "no":
		return Approval{Comment: rest}
	}
	return Approval{Comment: line}
}

// stream runs call while printing the events of the runs it starts,
// then reconciles what was printed with the outcome.
// turnKey names a turn's runs before its events do: the id of the
// message it answers, or the run a signal resumes.
type turnKey struct{ messageID, parentID string }

func (l *chatLoop) stream(ctx context.Context, key turnKey, call func(context.Context) (*Outcome, error)) (*Outcome, error) {
	type result struct {
		out *Outcome
		err error
	}
	res := make(chan result, 1)
	callCtx, abandon := context.WithCancel(ctx)
	defer abandon()
	go func() {
		out, err := call(callCtx)
		res <- result{out, err}
	}()
	r := &turnRender{out: l.out, runs: map[string]bool{}, key: key}
	var got result
	cancelling := false
wait:
	for {
		select {
		case got = <-res:
			break wait
		case ev := <-l.events():
			l.track(ev)
			if r.event(ev); r.err != nil {
				// Past the bound: the turn is broken (or the server is).
				r.line("  ! error [too_large]: " + inline(r.err.detail()))
				r.line("  (stopped waiting for the turn's answer: the turn may still run on the server)")
				abandon()
				<-res
				return nil, errAbandoned
			}
		case msg := <-l.notes():
			r.line("  ! " + inline(msg))
		case <-l.cfg.Interrupt:
			// The first interrupt asks the server to cancel the turn; the
			// next, during that request or after it, stops waiting for a
			// server that does not answer.
			if !cancelling {
				cancelling = true
				r.line("  (cancelling the turn)")
				req, done := l.interruptible(ctx)
				l.cancelTurn(req, r)
				if !done() {
					continue
				}
			}
			r.line("  (stopped waiting for the turn's answer: the turn may still run on the server)")
			abandon()
			<-res
			return nil, errAbandoned
		}
	}
	if got.err != nil {
		r.endLine()
		return nil, got.err
	}
	// The answer can overtake the stream: give it time to deliver the
	// rest of the turn's events (a run of a completed or suspended turn
	// always starts; an errored one may not).
	deadline := time.NewTimer(l.cfg.CatchUp)
	defer deadline.Stop()
	// An interrupt meanwhile stops the wait (the turn has ended; what
	// the stream has not printed, the answer does).
	for r.err == nil && (r.open > 0 || (len(r.runs) == 0 && got.out.Outcome != OutcomeErrored && l.following())) {
		select {
		case ev := <-l.events():
			l.track(ev)
			if r.event(ev); r.err != nil {
				r.line("  ! error [too_large]: " + inline(r.err.detail()) + ": the rest of the turn's events are not shown")
			}
			continue
		case <-l.cfg.Interrupt:
		case <-deadline.C:
		case <-l.watchDone():
			if len(l.w.events) > 0 {
				continue // what it read before it stopped
			}
		case <-ctx.Done():
		}
		break
	}
	r.reconcile(got.out)
	l.saveState()
	return got.out, nil
}

// errAbandoned is what stream returns when the user stopped waiting for
// the turn's answer (it said so).
var errAbandoned = errors.New("chatcli: stopped waiting for the turn")

// cancelTurn asks the server to cancel the turn r follows: its runs
// still open, or, before the stream told any, the session's runs still
// running. The turn's answer then comes back errored
// (invocation_cancelled) and prints as any does. Ending ctx (the next
// interrupt) abandons the requests, silently.
func (l *chatLoop) cancelTurn(ctx context.Context, r *turnRender) {
	var ids []string
	for id, open := range r.runs {
		if open {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		var err error
		if ids, err = l.c.StartedRunsOf(ctx, l.session, r.key.messageID, r.key.parentID); err != nil {
			if ctx.Err() == nil {
				r.line("  ! " + inline(err.Error()))
			}
			return
		}
	}
	for _, id := range ids {
		if _, err := l.c.CancelRun(ctx, id); err != nil && ctx.Err() == nil {
			r.line("  ! " + inline(err.Error()))
		}
	}
}

// turnRender prints one turn's events and outcome.
type turnRender struct {
	out io.Writer
	// key names the turn's runs for a cancel before the stream told any.
	key turnKey
	// runs holds the turn's runs (started while the turn was in flight),
	// true while open; open counts the open ones.
	runs map[string]bool
	open int
	// streamed is the assistant text printed from deltas.
	streamed strings.Builder
	inText   bool
	// held counts the bytes the render holds: streamed and the runs'
	// ids. Past MaxTurnBytes, or MaxTurnRuns runs, err is set, streamed
	// is dropped, and the render follows only the ends of its runs.
	held int
	err  *TooLargeError
}

// full drops what r holds past a bound: what says which.
func (r *turnRender) full(what string, limit int64, unit string) {
	r.err = &TooLargeError{What: what, Limit: limit, Unit: unit}
	r.streamed = strings.Builder{}
}

func (r *turnRender) endLine() {
	if r.inText {
		fmt.Fprintln(r.out)
		r.inText = false
	}
}

func (r *turnRender) line(s string) {
	r.endLine()
	fmt.Fprintln(r.out, s)
}

func (r *turnRender) text(s string) {
	if !r.inText {
		fmt.Fprint(r.out, "agent> ")
		r.inText = true
	}
	fmt.Fprint(r.out, s)
}

// event prints ev if it belongs to the turn. Once r.err is set (a
// bound passed), it only counts the ends of the turn's runs.
func (r *turnRender) event(ev runtime.Event) {
	if ev.Type == runtime.EventRequestStarted {
		if _, ok := r.runs[ev.RunID]; !ok && r.err == nil {
			switch {
			case len(r.runs) >= MaxTurnRuns:
				r.full("the number of the turn's runs", MaxTurnRuns, "runs")
				return
			case r.held+len(ev.RunID) > MaxTurnBytes:
				r.full("the text of the turn's events", MaxTurnBytes, "bytes")
				return
			}
			r.held += len(ev.RunID)
			r.runs[ev.RunID] = true
			r.open++
		}
		return
	}
	if !r.runs[ev.RunID] {
		return // another run's: a replay or another client's turn
	}
	if terminal(ev) {
		r.runs[ev.RunID] = false
		r.open--
		return
	}
	if r.err != nil {
		return
	}
	if ev.Type == runtime.EventArtifactCreated {
		var d struct {
			Artifact runtime.Artifact `json:"artifact"`
		}
		if json.Unmarshal(ev.Data, &d) == nil {
			r.line(fmt.Sprintf("  · artifact %s %s", inline(cmp.Or(d.Artifact.Name, d.Artifact.ID)), inline(cmp.Or(d.Artifact.URI, d.Artifact.MediaType))))
		}
		return
	}
	a, ok := phaseOf(ev)
	if !ok {
		return
	}
	switch a.Event.Phase {
	case runtime.PhaseOutputDelta:
		if r.held+len(a.Event.Text) > MaxTurnBytes {
			r.full("the turn's streamed reply", MaxTurnBytes, "bytes")
			return
		}
		r.held += len(a.Event.Text)
		r.streamed.WriteString(a.Event.Text)
		r.text(a.Event.Text)
	case runtime.PhaseToolStart:
		r.line(fmt.Sprintf("  · calling %s %s", inline(a.Event.Name), compact(a.Event.Args)))
	case runtime.PhaseToolResult:
		if len(a.Event.Error) > 0 && string(a.Event.Error) != "null" {
			r.line(fmt.Sprintf("  · %s failed: %s", inline(a.Event.Name), oneLine(rawText(a.Event.Error))))
		} else {
			r.line(fmt.Sprintf("  · %s returned: %s", inline(a.Event.Name), oneLine(rawText(a.Event.Output))))
		}
	}
}

// reconcile prints what of the outcome the stream did not: each
// assistant text not streamed (or the rest of one streamed in part), and
// an errored turn's reply with its bucket. After a bound passed (r.err)
// what was streamed is not known, and the texts are not printed again.
func (r *turnRender) reconcile(out *Outcome) {
	streamed := r.streamed.String()
	if out.Outcome == OutcomeErrored && out.Error != nil && out.Error.Category == CategoryCancelled {
		r.endLine()
		fmt.Fprintln(r.out, "  (the turn was cancelled)")
		return
	}
	if out.Outcome == OutcomeErrored {
		r.endLine()
		text := ""
		if out.Reply != nil {
			text = out.Reply.Text()
		}
		bucket := "error"
		if out.Error != nil {
			bucket = out.Error.Bucket
			if out.Error.Retryable {
				bucket += ", retryable"
			}
		}
		fmt.Fprintf(r.out, "  ! error [%s]: %s\n", inline(bucket), inline(text))
		return
	}
	for _, m := range out.Messages() {
		t := m.Text()
		if m.Role != llm.RoleAssistant || t == "" || r.err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(streamed, t):
			streamed = streamed[len(t):]
		case streamed != "" && strings.HasPrefix(t, streamed):
			r.text(t[len(streamed):])
			streamed = ""
		default:
			r.endLine()
			r.text(t)
		}
		r.endLine()
	}
	r.endLine()
	switch out.FinishReason {
	case "length":
		fmt.Fprintln(r.out, "  ! the reply was cut off at the model's token limit")
	case "content_filter":
		fmt.Fprintln(r.out, "  ! the model's content filter stopped the reply")
	}
	if in, ok := out.Usage["prompt_tokens"]; ok {
		fmt.Fprintf(r.out, "  · %d tokens in, %d out\n", in, out.Usage["completion_tokens"])
	}
}

// compact renders JSON arguments on one line.
func compact(raw json.RawMessage) string {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil || v == nil {
		return strings.TrimSpace(string(raw))
	}
	return marshal(v)
}

// marshal renders v as compact JSON as a user reads it: "<", ">" and
// "&" as themselves (json.Marshal writes \u003c, \u003e and \u0026,
// so that an approval prompt showed a URL argument
// "https://x/?a=1\u0026b=2"), control characters still escaped.
func marshal(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// rawText renders a JSON value: a string as itself, anything else as
// compact JSON.
func rawText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return compact(raw)
}

// oneLine shortens s to one line of at most 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:200]) + "…"
	}
	return s
}
