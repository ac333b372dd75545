// The conversation of one session: its history, then the live turns.
// A turn streams from the session's events while its POST is in flight;
// the POST's outcome is the truth the turn is reconciled with.
import { allEvents, api, APIError, newID, subscribe } from './api.js';
import { h, text, pretty, shown, unreordered, visible } from './dom.js';

const BUCKETS = {
  user_correctable: 'Please adjust your message',
  retryable_transient: 'Temporary problem',
  session_terminating: 'This session cannot continue',
};

let seq = 0; // for element ids

// Turn renders one turn into its container: the user's message, the
// assistant's text (streamed or whole), tool cards, and an approval or
// error card.
class Turn {
  // tools maps tool call ids to their cards across the conversation, so
  // a resumed turn's result fills the card of the call that suspended.
  constructor(parent, tools, { remote = false, resume = false, denied = null, notRun = null, failed = null } = {}) {
    this.el = h('div', { class: 'turn' });
    this.remote = remote;
    this.resume = resume;
    this.denied = denied; // ids of the calls its messages answer that the user denied
    this.notRun = notRun; // ids of the calls its messages answer whose approval was closed unanswered
    this.failed = failed; // ids of the calls its messages answer whose tool failed (the events said)
    this.tools = tools;
    this.home = this.el; // what counts as this turn for tool cards
    this.stream = null;
    this.pending = ''; // streamed text not yet shown
    this.raf = 0;
    this.timer = 0;
    this.actions = null; // the Stop button's row, kept last
    this.decision = null; // the approval decision this turn's run resumed with
    this.final = null; // the outcome its events ended with
    this.resumes = undefined; // the suspended run its run resumed
    parent.append(this.el);
  }

  // add appends el to the turn, above its Stop button.
  add(el) {
    if (this.actions?.parentNode === this.el) this.el.insertBefore(el, this.actions);
    else this.el.append(el);
  }

  user(content) {
    this.add(bubble('user', 'You', content));
  }

  // stoppable shows a Stop button that runs stop.
  stoppable(stop) {
    if (this.actions) return;
    const b = h('button', { type: 'button', class: 'stop ghost' }, 'Stop');
    b.addEventListener('click', () => {
      b.disabled = true;
      b.textContent = 'Stopping…';
      focusComposer(); // the button goes with the turn's end
      stop();
    });
    this.actions = h('div', { class: 'turn-actions' }, b);
    this.el.append(this.actions);
  }

  unstop() {
    this.actions?.remove();
    this.actions = null;
  }

  thinking() {
    this.add(h('div', { class: 'thinking' }, h('span', { class: 'visually-hidden' }, 'The agent is working'),
      h('span', { class: 'dot', 'aria-hidden': 'true' }), h('span', { class: 'dot', 'aria-hidden': 'true' }),
      h('span', { class: 'dot', 'aria-hidden': 'true' })));
  }

  unthink() {
    this.el.querySelector('.thinking')?.remove();
  }

  // delta adds streamed text. Deltas are shown once per frame (or every
  // 100 ms in a hidden tab), each batch appended as one text node: a long
  // reply is laid out a bounded number of times, not once per delta.
  delta(t) {
    this.unthink();
    if (!this.stream) {
      this.stream = bubble('assistant', 'Agent', '');
      this.stream.dataset.streamed = '';
      this.stream.setAttribute('aria-busy', 'true');
      this.add(this.stream);
    }
    if (!t) return;
    this.pending += t;
    if (!this.timer) {
      this.raf = requestAnimationFrame(() => this.flush());
      this.timer = setTimeout(() => this.flush(), 100);
    }
  }

  flush() {
    cancelAnimationFrame(this.raf);
    clearTimeout(this.timer);
    this.raf = this.timer = 0;
    if (this.pending && this.stream) this.stream.querySelector('.body').append(...unreordered(this.pending));
    this.pending = '';
  }

  endStream() {
    this.flush();
    this.stream?.removeAttribute('aria-busy');
    this.stream = null;
  }

  toolStart(id, name, args) {
    this.endStream();
    this.unthink();
    const old = this.tools.get(id);
    if (old?.el.isConnected && !this.home.contains(old.el)) {
      // A call an earlier turn showed (one that awaited approval) runs now.
      old.running();
      return old;
    }
    const card = toolCard(name, args);
    if (old) [card.outcome, card.denied] = [old.outcome, old.denied]; // settle re-renders it
    this.tools.set(id, card);
    this.add(card.el);
    return card;
  }

  // toolResult shows a call's result: error is the event's (undefined
  // for a result read from the messages, which do not say).
  toolResult(id, name, output, error) {
    const card = this.tools.get(id) ?? this.toolStart(id, name, undefined);
    card.result(output, error);
  }

  // toolDenied shows the result of a call the user denied (as its
  // result event would: not run, the answer given instead).
  toolDenied(id, name, output) {
    const card = this.tools.get(id) ?? this.toolStart(id, name, undefined);
    card.denied = true;
    card.result(undefined, output || 'The user denied this call.');
  }

  // toolNotRun shows the result of a call whose approval was closed
  // without an answer (superseded by a new message, or cancelled): not
  // run, the result saying so.
  toolNotRun(id, name, output) {
    const card = this.tools.get(id) ?? this.toolStart(id, name, undefined);
    card.outcome = 'not-run';
    card.result(output, undefined);
  }

  // messages renders messages (history, or a turn's replies).
  messages(msgs) {
    for (const m of msgs ?? []) {
      const t = text(m);
      if (m.role === 'user') this.user(t);
      else if (m.role === 'assistant') {
        if (t) this.add(bubble('assistant', 'Agent', t));
        for (const tc of m.tool_calls ?? []) this.toolStart(tc.id, tc.name, tc.arguments);
      } else if (m.role === 'tool') {
        if (this.denied?.has(m.tool_call_id)) this.toolDenied(m.tool_call_id, m.name, t);
        else if (this.notRun?.has(m.tool_call_id)) this.toolNotRun(m.tool_call_id, m.name, t);
        else if (this.failed?.has(m.tool_call_id)) this.toolResult(m.tool_call_id, m.name, undefined, t || 'The tool failed.');
        else this.toolResult(m.tool_call_id, m.name, t);
      } else if (m.role === 'system' && t) this.add(bubble('system', 'Notice', t));
    }
  }

  // settle renders the turn's authoritative messages. When they read as
  // what was streamed, the streamed elements stay (screen readers do not
  // hear the reply twice).
  settle(msgs) {
    this.endStream();
    this.unthink();
    this.unstop();
    const keep = this.el.firstElementChild?.classList.contains('user') ? this.el.firstElementChild : null;
    const before = new Map(this.tools);
    const fresh = new Turn(document.createElement('div'), this.tools);
    fresh.home = this.el;
    if (keep) fresh.el.append(keep.cloneNode(true));
    fresh.messages(msgs);
    if (fresh.el.textContent !== this.el.textContent) {
      this.el.replaceChildren(...fresh.el.childNodes);
    } else {
      // Keep the streamed elements, and the cards they registered.
      this.tools.clear();
      for (const [id, card] of before) this.tools.set(id, card);
    }
  }

  append(el) {
    this.unthink();
    this.endStream();
    this.add(el);
  }
}

// bubble is one message's bubble. Its text is the model's (or the
// user's) as written, but for the explicit bidi controls, shown as
// escapes (unreordered); its body takes its direction from its text,
// paragraph by paragraph, isolated from the page around it.
function bubble(role, who, content) {
  return h('div', { class: `msg ${role}` }, h('span', { class: 'who' }, who), h('div', { class: 'body', dir: 'auto' }, unreordered(content)));
}

// toolCard is a collapsible card for one tool call.
function toolCard(name, args) {
  const status = h('span', { class: 'badge' }, 'running');
  const body = h('div', { class: 'tool-body' }, h('h4', {}, 'Arguments'), h('pre', {}, shown(args ?? {})));
  const el = h('details', { class: 'tool', dataset: { status: 'running', tool: name } },
    h('summary', {}, h('span', { class: 'tool-icon', 'aria-hidden': 'true' }, '⚙'), ' ',
      h('span', { class: 'tool-name' }, name || 'tool'), ' ', status), body);
  const card = {
    el,
    outcome: null, // the status an agent.tool.result event gave
    denied: false, // its approval was denied
    // result shows the call's result. A result event's error field says
    // it failed (or, for a denied call, was not run: denied); a result
    // read from the messages (error undefined) keeps what the event said,
    // or, when the event has not come (the turn's answer came first),
    // what the user decided.
    result(output, error) {
      let st;
      if (error === undefined) st = card.outcome ?? (card.denied ? 'denied' : 'done');
      else st = error != null && error !== '' ? (card.denied ? 'denied' : 'failed') : 'done';
      if (error !== undefined) card.outcome = st;
      const msg = error != null && error !== '' ? error : output;
      el.dataset.status = st;
      status.textContent = st === 'not-run' ? 'not run' : st;
      body.querySelector('.result')?.remove();
      body.append(h('div', { class: 'result' }, h('h4', {}, { failed: 'Error', denied: 'Denied' }[st] ?? 'Result'), h('pre', { dir: 'auto' }, unreordered(pretty(msg)))));
    },
    running() {
      el.dataset.status = 'running';
      status.textContent = 'running';
    },
    waiting() {
      el.dataset.status = 'waiting';
      status.textContent = 'awaiting approval';
    },
    notRun() {
      card.outcome = 'not-run';
      el.dataset.status = 'not-run';
      status.textContent = 'not run';
    },
  };
  return card;
}

// boundSignal is the signal of a runtime.request.suspended event's data,
// with the suspended invocation's id and the id of the run that
// suspended: an answer names the invocation, so it can only resume that
// turn (not a later one of a session deleted and begun again under the
// same id, whose request may carry the same signal id).
function boundSignal(d, run) {
  return d?.signal && { ...d.signal, invocation_id: d.invocationId, run_id: run };
}

// approvalCard shows what will happen if the suspended turn is approved:
// the tool and its arguments, from the signal's metadata or else the
// pending tool call. The model wrote them: their text is shown with
// every character that would not show as itself (line and paragraph
// separators, unusual spaces, bidi controls, zero-width characters) as
// an escape, so that what the card reads is what will run. It never
// takes the focus (a user typing elsewhere would decide with a key):
// the page announces it, and a decision takes a click, or Enter or Space
// on a button the user moved to. Enter in the comment box decides
// nothing (users write objections there).
function approvalCard(signal, pending, decide) {
  const md = signal?.metadata ?? {};
  let tool = md.tool;
  let args = md.arguments;
  const call = (pending ?? []).flatMap((m) => m.tool_calls ?? []).at(-1);
  if (!tool && call) [tool, args] = [call.name, call.arguments];
  const id = `approval-${++seq}`;
  const comment = h('input', { id: `${id}-comment`, type: 'text', autocomplete: 'off', placeholder: 'Why? (optional)' });
  const status = h('p', { class: 'status', role: 'status' });
  const approve = h('button', { type: 'button', class: 'approve' }, 'Approve');
  const deny = h('button', { type: 'button', class: 'deny' }, 'Deny');
  const argList = args && typeof args === 'object' && !Array.isArray(args)
    ? h('dl', { class: 'args' }, Object.entries(args).flatMap(([k, v]) => [h('dt', {}, visible(k)), h('dd', {}, visible(typeof v === 'string' ? v : JSON.stringify(v)))]))
    : h('pre', {}, shown(args ?? {}));
  const el = h('section', { class: 'card approval', tabindex: '-1', 'aria-labelledby': `${id}-title`, 'aria-describedby': `${id}-what`, dataset: { signal: signal?.signal_id ?? '' } },
    h('h3', { id: `${id}-title` }, 'Approval needed'),
    h('p', { id: `${id}-what` }, 'The agent wants to run ', h('code', {}, visible(tool || 'a tool')), args ? ' with:' : '.'),
    args ? argList : null,
    h('label', { for: comment.id }, 'Comment (optional)'), comment,
    h('div', { class: 'row' }, approve, deny), status);
  const card = {
    el,
    what: tool || 'a tool',
    busy(on) {
      approve.disabled = deny.disabled = comment.disabled = on;
    },
    soft: false, // closed for want of an explanation: the events may give one
    resolved(label) {
      card.busy(true);
      card.soft = false;
      el.dataset.resolved = label.toLowerCase();
      status.textContent = label;
    },
    fail(msg) {
      card.busy(false);
      status.textContent = msg;
    },
  };
  const go = (approved) => decide(card, approved, comment.value.trim());
  approve.addEventListener('click', () => go(true));
  deny.addEventListener('click', () => go(false));
  return card;
}

// focusComposer moves the focus to the message box: a button that
// acted is about to go (Retry, Stop), and keyboard and screen-reader
// users would be left on the page's body.
function focusComposer() {
  document.getElementById('input')?.focus();
}

// errorCard shows an errored turn, styled by its bucket.
function errorCard(err, message, retry) {
  const bucket = err?.bucket || 'user_correctable';
  const el = h('div', { class: 'card error', role: 'alert', dataset: { bucket } },
    h('strong', {}, BUCKETS[bucket] ?? 'Error'),
    h('p', {}, message || 'The turn failed.'),
    err?.category ? h('p', { class: 'muted small' }, err.category) : null);
  if (retry && (err?.retryable || bucket === 'retryable_transient')) {
    el.append(h('button', { type: 'button', class: 'retry', onclick: (e) => { e.currentTarget.remove(); focusComposer(); retry(); } }, 'Retry'));
  }
  return el;
}

// cancelledCard shows a turn that was cancelled (stopped here, or
// elsewhere): not an error of the user's message.
function cancelledCard(message) {
  return h('div', { class: 'card cancelled', role: 'status' },
    h('strong', {}, 'Cancelled'), h('p', {}, message || 'The turn was cancelled.'));
}

// httpError turns a failed call into an errored outcome. With no
// answer at all (the network), it is lost: the call may have run.
function httpError(err) {
  const status = err instanceof APIError ? err.status : 0;
  const bucket = status === 0 || status >= 500 ? 'retryable_transient' : status === 409 ? 'session_terminating' : 'user_correctable';
  return { outcome: 'errored', http: true, lost: status === 0, error: { bucket, category: err.code ?? 'network', retryable: bucket === 'retryable_transient' }, reply: { content: err.message } };
}

// lostText is what a turn whose POST got no answer says: whether its run
// was seen to begin (its events then show its outcome) and whether it
// can be retried.
function lostText(begun, retry) {
  if (begun) return 'The connection dropped while the turn ran. Its outcome shows here once the connection is back' + (retry ? '; Retry asks the server for it now (the message does not run twice).' : '.');
  return 'The server could not be reached: the message may not have arrived. Retry sends it again (a message the server already has does not run twice); if it ran, its reply also shows here once the connection is back.';
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// QUIET_MS is how long a turn whose POST has answered waits for the next
// of its run's events on the live stream before it settles from the
// answer.
const QUIET_MS = 1000;

// lastEvents resolves once turn's run has ended on the event stream
// (turn.final), or once the stream has brought none of the run's events
// for QUIET_MS: a stream that keeps bringing them (a slow link delivers
// a run's events seconds after it ended) is waited for to the end.
function lastEvents(turn) {
  return new Promise((done) => {
    let timer = 0;
    const end = () => {
      clearTimeout(timer);
      turn.onEvent = undefined;
      done();
    };
    turn.onEvent = () => {
      clearTimeout(timer);
      if (turn.final) end();
      else timer = setTimeout(end, QUIET_MS);
    };
    turn.onEvent();
  });
}

// RUNS_PAGE is the most runs the page asks for at a time (the server's
// maximum).
const RUNS_PAGE = 1000;

// RESOLVED_WITHIN is how many of a resumed run's first events hold its
// decision: the run records it (runtime.approval.resolved) right after
// its start.
const RESOLVED_WITHIN = 8;

// RESUMED_NOTHING are the error categories of an answer to a decision
// that resumed nothing, though it names the turn it was for (as the
// server's resumedSomething has them): refused (its payload, the
// turn's record, its request id), no longer awaited, or given up
// (invocation_cancelled: given up while it waited for the session, or
// a resumed turn stopped after its decision; its run's events tell
// which).
const RESUMED_NOTHING = new Set(['harness_signal_correlation_failed', 'suspension_resume_payload_invalid',
  'suspension_record_invalid', 'invocation_cancelled', 'message_id_reused']);

// resolvedEvent is a run's runtime.approval.resolved event: the server
// records it on a resumed turn's run only once the run took the
// suspension up (an approved call may have run, a denied one was
// answered). A resume that never did (stopped, or given up, while it
// waited for the session; failed before it read the turn's record)
// has none: the turn still awaits its decision.
const resolvedEvent = (e) => e.type === 'runtime.approval.resolved';

// closedUnanswered reports whether d, the data of a resumed-turn run's
// runtime.request.cancelled event with no decision recorded before it,
// is the record of a suspended turn closed without an answer (the
// suspended run cancelled, or superseded by a new message), not a
// decision stopped or given up before it took the suspension up (cause
// "requested", "session_busy"), which leaves the turn awaiting its
// decision.
function closedUnanswered(d) {
  const cause = cancelCause(d);
  return cause === 'superseded' || cause === 'approval_cancelled';
}

// cancelCause is the cause of a runtime.request.cancelled event whose
// data is d: its "cause", or for a run recorded by a server that gave
// none, the one its reason's words name.
function cancelCause(d) {
  if (d?.cause) return String(d.cause);
  const reason = String(d?.reason ?? '');
  if (reason.startsWith('superseded')) return 'superseded';
  if (reason.startsWith('cancelled while awaiting approval')) return 'approval_cancelled';
  if (reason.startsWith('cancelled before it started')) return 'session_busy';
  return 'requested';
}

// tookEffect resolves whether out, the answer to a decision, says the
// decision took effect and the turn it resumed failed after it (an
// approved call ran, a denied one was answered; the model's reply after
// it failed, or it was stopped): its run recorded the decision
// (decision: its runtime.approval.resolved event, seen live; else read
// from the run's events). Only when they cannot be read (or the answer
// names no run) does its category tell: it failed as no refusal does.
// Such a decision cannot be given again: the turn goes on with a new
// message. One that did not take effect (stopped, or given up, while
// it waited for the session) can: nothing ran.
async function tookEffect(out, decision) {
  if (out?.outcome !== 'errored' || !out.resumed) return false;
  if (decision) return true;
  const recorded = out.run_id ? await recordedDecision(out.run_id) : null;
  return recorded ?? !RESUMED_NOTHING.has(out.error?.category);
}

// recordedDecision resolves whether run, a resumed turn's, recorded the
// decision it resumed with (runtime.approval.resolved, among its first
// events): null when its events cannot be read.
async function recordedDecision(run) {
  let evs = (await api.runEvents(run, 0, RESOLVED_WITHIN).catch(() => null))?.events;
  if (evs && !evs.some(resolvedEvent) && evs.length >= RESOLVED_WITHIN) evs = (await allEvents(run).catch(() => null))?.events;
  return evs ? evs.some(resolvedEvent) : null;
}

// RunLister lists a session's runs, newest first, a page of the listing
// at a time, as far back as asked: a long session's runs span many
// pages, of which the history shown needs the newest.
class RunLister {
  constructor(session) {
    this.session = session;
    this.list = []; // the runs listed so far, newest first
    this.next = ''; // the next page's token
    this.done = false; // every run is listed
    this.cursor = Infinity; // through: where in the history shown the runs listed reach
    this.checked = 0; // through: the runs aligned with it so far
    this.span = 0; // through: how many of the runs listed are of the history shown
  }

  // runs are the runs of the history shown (through's), newest first.
  get runs() {
    return this.list.slice(0, this.span);
  }

  // more lists the next page of runs: RUNS_FIRST at first (a page of
  // history has about as many turns), then as many as are listed, up to
  // RUNS_PAGE.
  async more() {
    if (this.done) return;
    const resp = await api.runs(this.session, this.next, Math.min(RUNS_PAGE, Math.max(RUNS_FIRST, this.list.length)));
    this.list.push(...(resp?.runs ?? []));
    const next = resp?.next_page_token ?? '';
    if (!next || next === this.next) this.done = true;
    this.next = next;
  }

  // through lists runs until those of msgs, a page of the history from a
  // turn's start, are listed (and RUNS_SLACK more), and counts them in
  // runs (the listing reads more at a time): the runs that
  // committed its turns, and the decisions on its calls, are newer than
  // its first turn's. The runs, newest first, are aligned with the turns
  // they committed, newest first: a completed run's replies stand in
  // the history before those of the runs listed before it (replays of a
  // turn and runs that committed nothing are passed over). Once the
  // alignment reaches msgs' first turn, the runs older than it are of
  // earlier turns. When it never does (its run records are gone: purged
  // by retention) every run is listed. Called again with an earlier page
  // (msgs the page before the last one's), it goes on from there.
  async through(msgs) {
    const head = msgs.findIndex((m, i) => i > 0 && m?.role === 'user');
    const first = head < 0 ? msgs.length : head; // the first turn's messages end here
    const have = msgs.map((m) => JSON.stringify(m));
    this.cursor = msgs.length;
    for (let reached = -1; ;) {
      for (; reached < 0 && this.checked < this.list.length; this.checked++) {
        const r = this.list[this.checked];
        const replies = r.status === 'completed' && !r.output?.replay_of ? r.output?.replies ?? [] : [];
        if (!replies.length) continue;
        const want = replies.map((m) => JSON.stringify(m));
        const p = matchAt(have, want, this.cursor - want.length);
        if (p > 0) this.cursor = p;
        if (this.cursor < first) reached = this.checked;
      }
      if (reached >= 0 && this.list.length - reached > RUNS_SLACK) {
        this.span = Math.max(this.span, reached + 1 + RUNS_SLACK);
        return;
      }
      if (this.done) {
        this.span = this.list.length;
        return;
      }
      await this.more();
    }
  }
}

// RUNS_FIRST is how many runs RunLister asks for first.
const RUNS_FIRST = 100;

// RUNS_SLACK is how many runs RunLister.through lists beyond the one
// that committed the first turn shown: a turn whose run began earlier
// may have committed after a later one's (it waited for the session).
const RUNS_SLACK = 20;

// union is the set of the items of a and b.
function union(a, b) {
  return new Set([...(a ?? []), ...(b ?? [])]);
}

// decisions returns the ids of the tool calls the user denied (denied)
// and of those whose approval was closed unanswered (notRun: a new
// message superseded it, or its turn was cancelled) in runs (a session's
// runs, every one: a decision long ago reads as it did), which the
// messages do not tell from calls that ran; and, of the runs that name
// a suspended run their parent, which closed its suspension (closed:
// the parents' ids) and which left it as it was (idle: their own ids).
// A run that resumed a suspended turn records the decision
// (runtime.approval.resolved, naming the signal) among its first events
// once it took the suspension up, and a run that completed or suspended
// again took it up; a run that closed one unanswered is a cancelled run
// naming it its parent, with no decision and a reason saying so
// (closedUnanswered); any other (a decision stopped, or given up, while
// it waited for the session, or one still waiting) did nothing: the
// turn still awaits its decision. The run that suspended names the call
// it waited for (runtime.request.suspended, the call's id in its
// signal's metadata), as the approval card had it. runEvents(run)
// fetches all of a run's events, headEvents(run) its first
// RESOLVED_WITHIN; a run whose events cannot be read counts as having
// closed its parent's suspension and tells nothing more.
async function decisions(runs, runEvents, headEvents) {
  const read = (rid) => runEvents(rid).then((r) => r?.events ?? [], () => []);
  // asked returns the call the run parent suspended on for signal sid
  // (any signal, when sid is undefined).
  const asked = async (parent, sid) => (await read(parent)).findLast((e) => e.type === 'runtime.request.suspended' &&
    (sid === undefined || e.data?.signal?.signal_id === sid))?.data?.signal?.metadata?.call_id;
  const denied = new Set();
  const notRun = new Set();
  const closed = new Set();
  const idle = new Set();
  await Promise.all(runs.filter((r) => r.parentRequestId).map(async (r) => {
    let evs = await headEvents(r.id).then((e) => e?.events ?? null, () => null);
    if (evs && !evs.some(resolvedEvent) && evs.length >= RESOLVED_WITHIN) evs = await runEvents(r.id).then((e) => e?.events ?? null, () => null);
    if (!evs) {
      closed.add(r.parentRequestId);
      return;
    }
    const answers = evs.filter(resolvedEvent);
    const end = r.status === 'cancelled' ? evs.findLast((e) => e.type === 'runtime.request.cancelled')?.data : undefined;
    // (A run given up before it held the session, as an earlier server
    // recorded it, has its decision all the same: it took nothing up.)
    const gaveUp = end !== undefined && cancelCause(end) === 'session_busy';
    if (r.status === 'cancelled' && !answers.length && closedUnanswered(end)) {
      closed.add(r.parentRequestId);
      const call = await asked(r.parentRequestId);
      if (call) notRun.add(call);
      return;
    }
    if (!(answers.length && !gaveUp) && r.status !== 'completed' && r.status !== 'suspended') {
      idle.add(r.id);
      return;
    }
    closed.add(r.parentRequestId);
    for (const ev of answers) {
      const d = ev.data ?? {};
      const a = d.decision?.approval;
      if (!a || a.approved) continue;
      const call = d.approval?.metadata?.call_id ?? await asked(r.parentRequestId, d.approval?.signal_id);
      if (call) denied.add(call);
    }
  }));
  return { denied, notRun, closed, idle };
}

// ENDS are the event types a run ends with (a suspended run's last is
// runtime.approval.requested).
const ENDS = new Set(['runtime.request.completed', 'runtime.request.failed', 'runtime.request.cancelled',
  'runtime.request.suspended', 'runtime.approval.requested']);

// SCAN_EVENTS is how many of a run's events failures reads at a time:
// a run's tool results come before the reply written from them, so the
// first page mostly has them all, and a long reply is not read.
const SCAN_EVENTS = 1000;

// failures returns the ids of the tool calls answered in history (a
// session's messages) whose tool failed: it returned an error. A tool
// message does not say so (its text is the error, as any result's is);
// the call's agent.tool.result event does, with its error field, as it
// told the page live, and a run's output lists them (failed_tools) once
// a tool answered in it; a run recorded without the list is read. A
// completed run's output lists the tool results it committed: those
// runs are read, each until its calls' results came.
// The calls no completed run lists (a suspended turn's, committed before
// it asked for approval) are looked for in the runs that did not
// complete. cached(run) is a run's events (a promise) when they were
// read already, else undefined; runs whose events cannot be read tell
// nothing.
async function failures(history, runs, cached) {
  const answered = (msgs) => (msgs ?? []).filter((m) => m?.role === 'tool' && m.tool_call_id).map((m) => m.tool_call_id);
  const want = new Set(answered(history));
  const seen = new Set();
  const failed = new Set();
  if (!want.size) return failed;
  // scan reads run's events until every call of ids has its result.
  const scan = async (run, ids) => {
    const note = (evs) => {
      for (const ev of evs) {
        const e = ev.data?.event;
        if (ev.type !== 'runtime.adapter.event' || e?.phase !== 'agent.tool.result' || !want.has(e.toolId)) continue;
        seen.add(e.toolId);
        if (e.error != null && e.error !== '') failed.add(e.toolId);
        else failed.delete(e.toolId);
      }
    };
    const all = cached(run);
    if (all) return note((await all.catch(() => null))?.events ?? []);
    const left = new Set(ids);
    for (let after = 0; ;) {
      const got = (await api.runEvents(run, after, SCAN_EVENTS).catch(() => null))?.events ?? [];
      note(got);
      for (const ev of got) if (ev.data?.event?.phase === 'agent.tool.result') left.delete(ev.data.event.toolId);
      if (!left.size || got.length < SCAN_EVENTS) return;
      after = got.at(-1).id;
    }
  };
  // A run whose output reports its tools (failed_tools: the calls whose
  // tool failed, once one answered) is not read: its failed calls are
  // the ones it names, and a completed one's other answers succeeded.
  const reports = (r) => Array.isArray(r.output?.failed_tools);
  for (const r of runs.filter(reports)) {
    for (const id of r.output.failed_tools) {
      if (want.has(id)) {
        failed.add(id);
        seen.add(id);
      }
    }
  }
  const listed = runs.map((r) => [r, r.status === 'completed' ? answered(r.output?.replies).filter((id) => want.has(id)) : []]);
  for (const [r, ids] of listed) if (reports(r)) ids.forEach((id) => seen.add(id));
  await Promise.all(listed.filter(([r]) => !reports(r)).map(([r, ids]) => [r, ids.filter((id) => !seen.has(id))])
    .filter(([, ids]) => ids.length).map(([r, ids]) => scan(r.id, ids)));
  const rest = [...want].filter((id) => !seen.has(id));
  if (rest.length) await Promise.all(listed.filter(([r, ids]) => !ids.length && r.status !== 'completed' && !reports(r)).map(([r]) => scan(r.id, rest)));
  return failed;
}

// SENT_KEY is where this tab keeps the messages it sent whose turns have
// not ended (sessionStorage: this tab's, kept across a reload), at most
// SENT_MAX of them: a turn's message is in the history only once the
// turn ends, and a page reloaded (or come back to its session) while the
// turn runs shows it from here.
const SENT_KEY = 'armature.sent';
const SENT_MAX = 20;

function sentList() {
  try {
    const v = JSON.parse(sessionStorage.getItem(SENT_KEY) ?? '[]');
    return Array.isArray(v) ? v : [];
  } catch {
    return [];
  }
}

function saveSent(list) {
  try {
    if (list.length) sessionStorage.setItem(SENT_KEY, JSON.stringify(list.slice(-SENT_MAX)));
    else sessionStorage.removeItem(SENT_KEY);
  } catch {
    // storage full or disabled: a reload shows the turn without its message until it ends
  }
}

// remember keeps content, sent to session under the message id mid,
// until forget(mid).
function remember(session, mid, content) {
  saveSent([...sentList().filter((e) => e.mid !== mid), { session, mid, content }]);
}

function forget(mid) {
  const list = sentList();
  if (list.some((e) => e.mid === mid)) saveSent(list.filter((e) => e.mid !== mid));
}

// recall is the message this tab sent to session under mid, if it is
// kept (else undefined).
function recall(session, mid) {
  return mid ? sentList().find((e) => e.session === session && e.mid === mid)?.content : undefined;
}

export class Conversation {
  // els: {history, live}; on: {conn(state), changed(), focusInput()}
  constructor(els, on) {
    this.els = els;
    this.on = on;
    this.id = null;
    this.sub = null;
    this.gen = 0;
  }

  reset(id) {
    this.sub?.close();
    this.sub = null;
    this.streaming = false; // its event stream is live
    this.id = id;
    this.gen++;
    this.inflight = null; // {turn, resume, parent, runID, stopped}
    this.resyncing = false; // the event ids restarted: reopen when idle
    this.runs = new Map(); // run id → Turn, for runs being streamed
    this.turns = new Map(); // run id → Turn, for every run shown
    this.resumed = new Map(); // suspended run id → the run whose answer resumed it
    this.settled = new Set(); // runs rendered from their POST: late events are ignored
    this.skip = []; // {resume, until}: runs whose POST answered before their events came
    this.lost = []; // {turn, resume, parent, until}: turns whose POST got no answer, their run not yet seen
    this.sent = new Map(); // message id → the turn this page sent it for
    this.cards = new Map(); // signal id → approval card
    this.tools = new Map(); // tool call id → tool card
    this.els.history.replaceChildren();
    this.els.live.replaceChildren();
    this.on.conn('idle');
  }

  // open shows a session: its history, a pending approval, then live
  // events from where the history ends. A session that does not exist
  // (yet) is a new conversation under that id: its first message
  // creates it, and its events stream from the start.
  async open(id, again = false) {
    this.reset(id);
    if (!id) return;
    const gen = this.gen;
    const missing = (err) => {
      if (err instanceof APIError && err.status === 404) return null;
      throw err;
    };
    const runs = new RunLister(id);
    const [sess] = await Promise.all([turnPage(id, { limit: HISTORY_PAGE }).catch(missing), runs.more()]);
    // The runs as far back as the history shown: those that committed
    // it, and decided its calls, are newer than its first turn's.
    if (sess) await runs.through(sess.messages);
    if (gen !== this.gen) return;
    const list = sess ? runs.runs : runs.list; // newest first
    let last = 0;
    const newest = list[0];
    // The pending approval: the newest run that did not fail, if it is
    // suspended and no later run resumed, cancelled or superseded it (a
    // failed or cancelled turn after it leaves it pending: it did not
    // commit, so it superseded nothing; so does a decision that never
    // took the suspension up: see decisions).
    let suspended = null;
    let events = [];
    let decided = {};
    // A turn in flight (its run started and not ended): its events so
    // far are shown as they would have streamed, and the stream goes on
    // after them (its message is in the history only once it ends).
    let running = [];
    const got = new Map(); // run id → its events (a promise)
    const runEvents = (rid) => {
      if (!got.has(rid)) got.set(rid, allEvents(rid));
      return got.get(rid);
    };
    const headEvents = (rid) => got.get(rid) ?? api.runEvents(rid, 0, RESOLVED_WITHIN);
    if (newest) {
      // The newest suspended run's events are read meanwhile: it is the
      // pending approval's run, if there is one.
      const maybe = sess ? list.find((r) => r.status === 'suspended') : null;
      if (maybe && maybe !== newest) runEvents(maybe.id).catch(() => null);
      const [evs, dec, failed] = await Promise.all([runEvents(newest.id), decisions(list, runEvents, headEvents),
        failures(sess?.messages ?? [], list, (rid) => got.get(rid))]);
      if (gen !== this.gen) return;
      const live = list.find((r) => r.status !== 'failed' && !(r.status === 'cancelled' && !r.parentRequestId) && !dec.idle.has(r.id));
      suspended = sess && live?.status === 'suspended' && !dec.closed.has(live.id) ? live : null;
      const sevs = suspended && suspended !== newest ? await runEvents(suspended.id) : null;
      if (gen !== this.gen) return;
      last = (evs.events ?? []).reduce((m, e) => Math.max(m, e.id), 0);
      // A turn waiting for the session behind another has a run and no
      // event yet (its start comes once it holds the session): the
      // stream goes on after the newest run that has events, not from
      // the session's first event.
      for (const r of list.slice(1)) {
        if (last > 0) break;
        const more = await runEvents(r.id);
        if (gen !== this.gen) return;
        last = (more.events ?? []).reduce((m, e) => Math.max(m, e.id), 0);
      }
      events = (sevs ?? evs).events ?? [];
      decided = { denied: dec.denied, notRun: dec.notRun, failed };
      if (newest.status === 'started' && !newest.endedAt) {
        running = evs.events ?? [];
        if (running.some((e) => ENDS.has(e.type))) {
          // It ended meanwhile: whether the history read has it is not
          // known. Read it again: it has it by then (a turn commits
          // before its run ends).
          if (!again) return this.open(id, true);
          running = [];
        }
      }
    }
    this.history(this.els.history, sess?.messages, decided);
    if (sess?.message_offset > 0) this.earlier(sess.message_offset, { runs, decided, runEvents, headEvents, cached: (rid) => got.get(rid) });
    if (suspended) {
      const sig = boundSignal(events.find((e) => e.type === 'runtime.request.suspended')?.data, suspended.id);
      const pending = events.find((e) => e.type === 'runtime.approval.requested')?.data?.approval?.pending_messages;
      if (sig) this.approval(new Turn(this.els.live, this.tools), sig, pending);
    }
    for (const ev of running) this.event(ev);
    this.listen(last);
  }

  // history renders msgs, messages of the history, into parent, as
  // decided has them (the calls denied, not run, failed).
  history(parent, msgs, decided) {
    new Turn(parent, this.tools, decided).messages(msgs);
    // A call whose approval was closed unanswered has a result in the
    // history only once a later message closed it (a new message
    // superseding it does; a cancelled turn leaves it open until the
    // next one): without one, it was not run all the same, as it read
    // live.
    for (const id of decided.notRun ?? []) {
      const card = this.tools.get(id);
      if (card?.el.dataset.status === 'running') card.notRun();
    }
  }

  // earlier puts a button above the history shown, whose messages begin
  // at index offset, that shows the page before them (and a button for
  // the page before that, while there is one). ctx has what open read:
  // the session's runs listed (runs, a RunLister), the decisions in them
  // (decided), and the runs' events (runEvents and headEvents read them,
  // cached has those read).
  earlier(offset, ctx) {
    const gen = this.gen;
    const btn = h('button', { type: 'button', class: 'ghost' }, 'Show earlier messages');
    const box = h('div', { class: 'earlier' }, btn);
    this.els.history.prepend(box);
    btn.addEventListener('click', async () => {
      btn.disabled = true;
      btn.textContent = 'Loading earlier messages…';
      try {
        const page = await turnPage(this.id, { before: offset, limit: HISTORY_PAGE });
        // The runs of the page's turns, and their decisions.
        const known = ctx.runs.span;
        await ctx.runs.through(page.messages);
        const fresh = ctx.runs.runs.slice(known);
        if (fresh.length) {
          const dec = await decisions(fresh, ctx.runEvents, ctx.headEvents);
          ctx.decided = { ...ctx.decided, denied: union(ctx.decided.denied, dec.denied), notRun: union(ctx.decided.notRun, dec.notRun) };
        }
        const failed = await failures(page.messages, ctx.runs.runs, ctx.cached);
        if (gen !== this.gen) return;
        const shown = h('div');
        this.history(shown, page.messages, { ...ctx.decided, failed });
        box.replaceWith(...shown.childNodes);
        if (page.message_offset > 0) this.earlier(page.message_offset, ctx);
        this.els.history.querySelector('.earlier button')?.focus({ preventScroll: true });
      } catch (err) {
        if (gen !== this.gen) return;
        console.error('armature: reading earlier messages failed', err);
        btn.disabled = false;
        btn.textContent = 'Show earlier messages (reading them failed: try again)';
      }
    });
  }

  listen(last) {
    const gen = this.gen;
    let ready;
    this.live = new Promise((r) => (ready = r));
    this.sub = subscribe(this.id, last, (ev) => gen === this.gen && !this.resyncing && this.event(ev), (state) => {
      if (gen !== this.gen) return;
      if (state === 'live') ready();
      this.streaming = state === 'live';
      this.on.conn(state);
    }, () => gen === this.gen && this.resync(),
    // A turn's events are awaited (in flight, or its POST unanswered):
    // they are matched to it within time windows, so a hidden tab keeps
    // its stream until they came.
    () => gen === this.gen && (Boolean(this.inflight) || this.lost.some((l) => l.until > Date.now() && l.turn.lost) ||
      this.skip.some((s) => s.until > Date.now())));
  }

  // resync reopens the session when the server's event ids restarted
  // (the stream replays from its start): the history shows what the
  // page showed, once, and the stream goes on from the server's newest
  // event. A turn in flight finishes first; the events meanwhile are
  // ignored.
  resync() {
    this.resyncing = true;
    if (this.inflight) return;
    const id = this.id;
    this.open(id).catch((err) => {
      console.error('armature: reopening the session failed', err);
      if (this.id === id && !this.sub) this.listen(0);
    });
  }

  // send sends a user message (creating the session first if needed).
  async send(content) {
    if (!this.id) {
      const s = await api.createSession();
      this.reset(s.session_id);
      this.listen(0);
      this.on.created(s.session_id);
    }
    const turn = new Turn(this.els.live, this.tools);
    turn.user(content);
    turn.thinking();
    await this.post(turn, content, newID());
  }

  // post sends content under the message id mid for turn. Its retry
  // sends the same id into the same turn: the server answers a message
  // it already ran with its recorded outcome ("replayed") and a message
  // still running with its outcome once it ends, and runs neither again.
  post(turn, content, mid) {
    const id = this.id;
    turn.mid = mid; // its run's started event names it (messageId)
    this.sent.set(mid, turn);
    remember(id, mid, content);
    return this.turn(turn, false, () => api.send(id, content, mid), () => {
      this.retrying(turn);
      return this.post(turn, content, mid);
    });
  }

  // retrying readies turn, whose POST failed, for its retry: its error
  // card goes, and it is no longer waiting for its run's events alone.
  retrying(turn) {
    this.lost = this.lost.filter((l) => l.turn !== turn);
    turn.lost = false;
    turn.el.querySelector(':scope > .card.error')?.remove();
    turn.thinking();
  }

  // turn runs one POST (a send or a signal) for turn: events stream into
  // turn while the POST is in flight, its outcome settles it.
  async turn(turn, resume, call, retry, parent = null) {
    const gen = this.gen;
    // The first event stream of a session must be listening for the
    // turn to stream; don't wait long for it.
    await Promise.race([this.live, sleep(1500)]);
    // A retry of a turn whose run was seen goes on with that run.
    const f = { turn, resume, parent, runID: turn.lostRun ?? null, stopped: false };
    if (f.runID && !resume) turn.stoppable(() => this.stop(f));
    this.inflight = f;
    // A message that waits for the session behind another turn has a
    // run but no event yet (its start comes once it holds the session):
    // Stop finds the run by the message's id meanwhile.
    const early = !resume && turn.mid ? setTimeout(() => {
      if (!f.runID && !f.stopped && this.inflight === f) turn.stoppable(() => this.stopWaiting(f, turn.mid));
    }, 1000) : null;
    let out;
    try {
      out = await call();
    } catch (err) {
      out = httpError(err);
    }
    clearTimeout(early);
    if (gen !== this.gen) return out;
    if (this.streaming && out.run_id && !out.lost && !turn.final && (!f.runID || f.runID === out.run_id)) {
      // The answer came before its run's last events (a busy server or
      // a slow network delivers the stream later): while the stream is
      // live and brings them, they are waited for, so that the reply
      // streams in once instead of being replaced by the answer's copy
      // mid-stream.
      await lastEvents(turn);
      if (gen !== this.gen) return out;
    }
    this.inflight = null;
    turn.unstop();
    if (out.lost && !f.stopped) return this.lose(turn, f, out, retry);
    turn.lostRun = undefined;
    if (f.stopped && out.outcome === 'errored') out = { ...out, cancelled: true };
    const refused = out.error?.category === 'harness_signal_correlation_failed';
    if (resume && f.runID && (out.run_id ? f.runID !== out.run_id : refused)) {
      // The run that streamed into this turn is not this POST's (its
      // outcome names its own; a refused answer has none): another
      // client answered the same approval at the same time.
      turn.remote = true;
      if (refused) {
        // Theirs won: it goes on as theirs.
        this.theirs(f.runID, turn);
        out = { ...out, elsewhere: turn.decision, foreign: true };
        this.idle();
        return out;
      }
      // This answer won, so theirs was refused: it shows nothing (its
      // last events are not waited for). This answer's run streamed into
      // a turn of its own (shown as another client's until now), or is
      // yet to come.
      this.drop(f.runID, turn);
      turn = this.turns.get(out.run_id) ?? new Turn(this.els.live, this.tools, { resume: true });
      turn.remote = false;
    }
    // Whether a decision that failed took effect: its run's recorded
    // decision says (read when it did not stream in). One that did not
    // (stopped, or given up, while it waited for the session) resumed
    // nothing: the turn still awaits a decision, this one sent again or
    // another's.
    const took = resume && await tookEffect(out, turn.decision);
    if (gen !== this.gen) return out;
    if (resume && f.parent && out.run_id && !refused && (out.outcome !== 'errored' || took)) this.won(f.parent, out.run_id);
    const other = !resume && out.run_id && this.runs.get(out.run_id);
    if (other && other !== turn && other.remote) other.el.remove(); // this turn's run, taken for another client's
    if (out.run_id) {
      // The run's events, come or to come, are this turn's.
      this.settled.add(out.run_id);
      this.runs.delete(out.run_id);
    }
    for (const r of turn.resends ?? []) {
      // The runs of this turn's resends: answered, they show nothing more.
      this.settled.add(r);
      this.runs.delete(r);
    }
    turn.resends = undefined;
    if (f.runID && (!resume || !out.run_id || f.runID === out.run_id)) {
      this.settled.add(f.runID);
      this.runs.delete(f.runID);
    } else if (!f.runID && !out.run_id && !out.http && !refused) {
      // The run's events may still come: they are this turn's.
      this.skip.push({ resume, mid: resume ? undefined : turn.mid, until: Date.now() + 10000 });
    }
    // A decision that took effect is not sent again: its turn's error
    // offers no Retry (the server would answer the same failure).
    this.render(turn, out, took ? null : retry);
    if (took) turn.el.querySelector(':scope > .card.error')?.append(h('p', { class: 'took-effect' }, 'The decision took effect: send a new message to go on.'));
    this.on.changed();
    this.idle();
    return resume ? { ...out, took } : out;
  }

  // lose shows that turn's POST got no answer (the network dropped): the
  // turn may have run, or be running. What it streamed stays; its run's
  // events (the stream reconnects and replays what it missed) settle it,
  // or, for a run not seen yet, the next run of its kind to begin (see
  // event). A new message can be retried under the same message id; an
  // answer to an approval whose run began cannot be given again.
  lose(turn, f, out, retry) {
    turn.lost = true;
    turn.unthink();
    turn.flush();
    if (f.runID) turn.lostRun = f.runID; // still in this.runs
    else this.lost.push({ turn, resume: f.resume, parent: f.parent, until: Date.now() + 120000 });
    turn.retry = retry; // kept for the outcome its run's events bring (lostEnd)
    if (f.runID && f.resume) retry = null; // whether its decision took effect, its run's events tell
    turn.add(errorCard(out.error, lostText(Boolean(f.runID), Boolean(retry)), retry));
    this.on.changed();
    this.idle();
    return out;
  }

  // lostEnd settles a turn whose POST got no answer with the outcome its
  // run's events ended with.
  lostEnd(run, turn, out) {
    this.settled.add(run);
    this.runs.delete(run);
    turn.lost = false;
    turn.lostRun = undefined;
    // A retryable end (its run interrupted by a crash) offers the Retry
    // the lost message had: the same message, under the same id.
    // (Not a decision its run recorded: that took effect.)
    this.render(turn, out, turn.resume && turn.decision ? null : turn.retry ?? null);
    turn.retry = null;
    const card = turn.card;
    // A decision whose run failed or was stopped before it took the
    // suspension up (it recorded no decision) resumed nothing: it can
    // be given again.
    if (card && turn.resume && !turn.decision && out.outcome === 'errored') card.fail('Not sent: try again.');
    else if (card && !card.el.dataset.resolved) card.resolved(turn.decision?.approved ?? turn.approved ? 'Approved' : 'Denied');
    this.on.changed();
  }

  // ending routes the end of run (its outcome out) to the turn that shows
  // it: another client's, or one whose POST got no answer.
  ending(run, turn, out) {
    if (turn.remote) this.remoteEnd(run, turn, out);
    else if (turn.lost) this.lostEnd(run, turn, out);
  }

  // theirs hands the turn of run, another client's answer that this page
  // took for its own, to that client: it ends as another client's turn.
  theirs(run, turn) {
    this.runs.set(run, turn);
    const end = turn.final;
    if (!end) return; // its last events are to come
    if (end.error?.category === 'harness_signal_correlation_failed') this.drop(run, turn); // refused too
    else this.remoteEnd(run, turn, end);
  }

  // won records that run's answer resumed the turn the run parent
  // suspended. Any other answer to it was refused and shows nothing: its
  // turns go, and its runs' events, come or to come, are ignored (its
  // last ones are not waited for).
  won(parent, run) {
    this.resumed.set(parent, run);
    for (const [r, t] of this.runs) {
      if (r !== run && t.remote && t.resumes === parent && !t.decision) this.drop(r, t);
    }
  }

  // idle runs what waited for the turn in flight.
  idle() {
    if (this.resyncing) queueMicrotask(() => this.resync());
  }

  // stop cancels the turn in flight's run.
  stop(f) {
    f.stopped = true;
    api.cancel(f.runID).catch((err) => console.error('armature: cancelling the run failed', err));
  }

  // stopWaiting cancels the run of the turn in flight f before any of
  // its events came: the session's started run carrying the message id
  // mid (no other: another client's turn is not this page's to stop).
  async stopWaiting(f, mid) {
    if (f.runID) return this.stop(f);
    f.stopped = true;
    try {
      const page = await api.runs(this.id);
      const run = (page.runs ?? []).find((r) => r.messageId === mid && r.status === 'started');
      if (run) await api.cancel(run.id);
    } catch (err) {
      console.error('armature: cancelling the run failed', err);
    }
  }

  render(turn, out, retry) {
    for (const mid of [turn.mid, turn.sentID]) if (mid) forget(mid);
    // A message sent while a turn awaited approval supersedes it: its
    // card closes, its tool call was not run.
    for (const sid of out.superseded ?? []) this.closeApproval(sid, 'Closed: you sent a new message');
    switch (out.outcome) {
      case 'completed':
        turn.settle(out.replies);
        break;
      case 'suspended':
        turn.settle(out.pending_messages);
        this.approval(turn, out.signal && { invocation_id: out.invocation_id, run_id: out.run_id, ...out.signal }, out.pending_messages);
        break;
      default:
        turn.settle([]);
        if (out.cancelled || out.error?.category === 'cancelled') turn.append(cancelledCard(out.cancelled === true ? '' : text(out.reply)));
        else turn.append(errorCard(out.error, text(out.reply), retry));
    }
  }

  approval(turn, signal, pending) {
    const card = approvalCard(signal, pending, (c, approved, comment) => this.decide(c, signal, approved, comment));
    // The run that suspended: a run closing it (cancelled, superseded)
    // names it as its parent. (A turn's first run has its invocation's
    // id; a resumed turn that suspends again has a run of its own.)
    card.run = signal?.run_id ?? signal?.invocation_id;
    card.invocation = signal?.invocation_id;
    if (signal?.signal_id) {
      // A card of the same signal id for another turn is stale: its
      // session was deleted and begun again (signal ids are unique
      // within one conversation only).
      const old = this.cards.get(signal.signal_id);
      if (old && old !== card && old.invocation !== card.invocation) this.closeCard(signal.signal_id, old, 'No longer pending: its conversation was deleted');
      this.cards.set(signal.signal_id, card);
    }
    const call = signal?.metadata?.call_id;
    if (call) {
      card.el.dataset.call = call;
      card.tool = this.tools.get(call); // its own: call ids repeat across conversations
      card.tool?.waiting();
    }
    // The turn is suspended: nothing of it runs. A call of its step
    // already approved but deferred until the others are decided (ADK-Go
    // runs a step's confirmed calls together) has no result yet; it
    // awaits the other decisions, as it showed before a reload.
    for (const t of this.tools.values()) if (t.el.isConnected && t.el.dataset.status === 'running') t.waiting();
    turn.append(card.el);
    // Announced, never focused: a user typing (here, or in a tab another
    // client's turn reached) would decide with the next Space or Enter.
    if (!card.el.dataset.resolved) this.on.announce?.(`Approval needed: the agent wants to run ${card.what}. Its Approve and Deny buttons are above the message box (Shift+Tab, or Alt+A).`);
  }

  // closeApproval closes the approval card of a signal that no longer
  // resumes anything, and marks its tool call not run.
  closeApproval(signalID, label) {
    const card = this.cards.get(signalID);
    if (card) this.closeCard(signalID, card, label);
  }

  // closeCard closes card, the approval card of signalID (forgotten if it
  // is the one the page holds for it), and marks its tool call not run.
  // A soft close is kept until the session's events say what closed it
  // (an answer from another client, a cancellation): they relabel it,
  // and until then its tool call's card stays as it was.
  closeCard(signalID, card, label, soft = false) {
    if (!soft && this.cards.get(signalID) === card) this.cards.delete(signalID);
    if (card.el.dataset.resolved && !card.soft) return; // answered elsewhere: that label stays
    card.resolved(label);
    card.soft = soft;
    if (!soft) card.tool?.notRun();
  }

  // decide resumes the suspended turn; the resumed reply streams into a
  // new turn below the card. The decision's request id makes its Retry
  // (after a dropped connection) answer the turn it resumed rather than
  // be refused as no longer pending.
  async decide(card, signal, approved, comment, rid = newID()) {
    card.busy(true);
    const tool = card.tool;
    if (tool) tool.denied = !approved;
    const turn = new Turn(this.els.live, this.tools, { resume: true });
    turn.card = card;
    turn.approved = approved;
    turn.thinking();
    const payload = { approval: { approved, comment } };
    const out = await this.turn(turn, true, () => api.signal(this.id, signal.signal_id, payload, signal.invocation_id, rid),
      () => { this.retrying(turn); turn.el.remove(); this.decide(card, signal, approved, comment, rid); }, card.run);
    const focused = document.activeElement;
    const back = () => {
      // Back to the message box, unless the user went elsewhere meanwhile.
      if (!focused || focused === document.body || card.el.contains(focused)) this.on.focusInput();
    };
    if (out.lost && turn.lostRun) {
      // Taken (its run began): its outcome comes with the run's events.
      card.fail('The connection dropped: the outcome shows below once it is back.');
      card.busy(true);
      return back();
    }
    if (out.elsewhere) {
      // Another client answered first: its answer's turn is shown.
      if (tool) tool.denied = !out.elsewhere.approved;
      card.resolved(out.elsewhere.approved ? 'Approved elsewhere' : 'Denied elsewhere');
      this.cards.delete(signal.signal_id);
    } else if (out.outcome === 'errored' && out.error?.category === 'harness_signal_correlation_failed') {
      // Nothing awaits the signal any more: superseded by a newer
      // message, cancelled, or answered elsewhere. Which one, the events
      // tell: they may not have come yet (another client's answer
      // records its decision once its turn resumes), so the card stays
      // open to their label. A turn another client's run streamed into
      // stays: it ends as theirs.
      if (!out.foreign) turn.el.remove();
      if (tool && !card.el.dataset.resolved) tool.denied = false;
      this.closeCard(signal.signal_id, card, 'No longer pending: a newer message or another client closed it', true);
    } else if (out.outcome === 'errored' && out.took) {
      // The decision took effect (an approved call ran, a denied one
      // was answered), and its turn failed after it (the model's reply
      // failed, or was stopped): the card keeps the decision, the
      // turn's error shows below it.
      card.resolved(approved ? 'Approved' : 'Denied');
    } else if (out.outcome === 'errored' && out.error?.bucket === 'retryable_transient') card.fail(out.lost ? 'No answer: retry below.' : 'Not sent: retry below.');
    else if (out.outcome === 'errored' && out.error?.category === 'suspension_resume_payload_invalid') card.fail('Not accepted: try again.');
    else card.resolved(approved ? 'Approved' : 'Denied');
    back();
  }

  // event handles one runtime event of the session.
  event(ev) {
    const run = ev.requestId;
    if (!run || this.settled.has(run)) return;
    let turn = this.runs.get(run);
    if (!turn) {
      const resume = Boolean(ev.parentRequestId);
      const won = resume && this.resumed.get(ev.parentRequestId);
      if (won && won !== run) {
        // Another answer to an approval one answer resumed: refused.
        this.settled.add(run);
        return;
      }
      const f = this.inflight;
      const now = Date.now();
      // A run started for a message names the message's id
      // (messageId): a turn this page sent under an id is that run's,
      // and no other's (another client's message, with another id or
      // none). A resume's run is matched by its kind.
      const mid = ev.type === 'runtime.request.started' ? ev.data?.messageId : undefined;
      const mine = (t) => !t.mid || t.mid === mid;
      this.skip = this.skip.filter((s) => s.until > now);
      const i = this.skip.findIndex((s) => s.resume === resume && (!s.mid || s.mid === mid));
      this.lost = this.lost.filter((l) => l.until > now && l.turn.lost);
      const j = this.lost.findIndex((l) => (l.turn.mid ? l.turn.mid === mid
        : l.resume === resume && (!l.parent || l.parent === ev.parentRequestId)));
      if (f && !f.runID && f.resume === resume && (!f.parent || f.parent === ev.parentRequestId) && mine(f.turn)) {
        f.runID = run;
        turn = f.turn;
        // A resume's run is this page's when it resumes the card's run.
        if (!resume || f.parent) turn.stoppable(() => this.stop(f));
      } else if (i >= 0) {
        this.skip.splice(i, 1);
        this.settled.add(run);
        return;
      } else if (j >= 0) {
        // The run of a turn whose POST got no answer: it did arrive.
        turn = this.lost.splice(j, 1)[0].turn;
        turn.lostRun = run;
      } else if (!resume && mid && this.sent.has(mid)) {
        // A resend of a message this page sent (its Retry, or the
        // browser's own retransmission of the POST), whose first run
        // was seen: its run waits for the first and ends as its replay
        // (or, the first having failed, runs the message in its stead).
        // It is that turn's, never another client's: while the turn's
        // POST is in flight its events stream into the turn, which the
        // POST's answer settles; otherwise that answer came already
        // and the run has nothing to show.
        turn = this.sent.get(mid);
        if (f?.turn !== turn) {
          this.settled.add(run);
          return;
        }
        (turn.resends ??= new Set()).add(run);
      } else {
        // A turn this page did not start: another tab, another client,
        // or an approval given elsewhere.
        turn = new Turn(this.els.live, this.tools, { remote: true, resume });
        if (!resume) {
          // Its message is in the history once it ends. Until then: the
          // message as this tab sent it, if it did (before a reload), or
          // a note that it will show.
          const content = recall(this.id, mid);
          if (content !== undefined) {
            turn.user(content);
            turn.sentID = mid;
            turn.stoppable(() => api.cancel(run).catch((err) => console.error('armature: cancelling the run failed', err)));
          } else turn.add(h('p', { class: 'pending-user muted small' }, 'A message is being answered: it shows here once its reply ends.'));
        }
        turn.thinking();
      }
      turn.resumes = ev.parentRequestId;
      this.runs.set(run, turn);
      this.turns.set(run, turn);
    }
    const d = ev.data ?? {};
    switch (ev.type) {
      case 'runtime.adapter.event': {
        const e = d.event ?? {};
        if (e.phase === 'agent.output.delta') turn.delta(e.text ?? '');
        else if (e.phase === 'agent.tool.start') turn.toolStart(e.toolId, e.name, e.args);
        else if (e.phase === 'agent.tool.result') turn.toolResult(e.toolId, e.name, e.output, e.error ?? null);
        break;
      }
      case 'runtime.approval.resolved': {
        const a = d.decision?.approval ?? {};
        if (turn.lost && !turn.remote && turn.approved !== undefined && turn.approved !== Boolean(a.approved)) {
          // The run this page took for its unanswered decision's gives
          // the other decision: another client's, which won (this one
          // was refused, or never arrived). It ends as theirs.
          turn.remote = true;
          turn.lost = false;
          turn.lostRun = undefined;
          turn.el.querySelector(':scope > .card.error')?.remove(); // its Retry would be refused
        }
        turn.decision = { approved: Boolean(a.approved) };
        if (ev.parentRequestId) this.won(ev.parentRequestId, run);
        const card = this.cards.get(d.approval?.signal_id);
        const call = card?.el.dataset.call || d.approval?.metadata?.call_id;
        const tool = call && this.tools.get(call);
        if (tool) tool.denied = !a.approved;
        if (card && turn.remote && (!card.el.dataset.resolved || card.soft)) card.resolved(a.approved ? 'Approved elsewhere' : 'Denied elsewhere');
        break;
      }
      case 'runtime.request.suspended':
        turn.signal = boundSignal(d, run);
        break;
      case 'runtime.approval.requested':
        turn.final = { outcome: 'suspended', signal: turn.signal, pending_messages: d.approval?.pending_messages };
        this.ending(run, turn, turn.final);
        break;
      case 'runtime.request.completed':
        if (d.output?.replay_of && turn.resends?.has(run) && !turn.remote) {
          // This page's resend's run, which ran nothing: the first run
          // shows the turn.
          turn.resends.delete(run);
          this.settled.add(run);
          this.runs.delete(run);
          break;
        }
        if (d.output?.replay_of && (turn.remote || turn.lost)) {
          // A retransmission's run, which ran nothing: its original's
          // run shows the turn.
          if (turn.lost) {
            turn.lostRun = undefined;
            this.settled.add(run);
            this.runs.delete(run);
            this.lost.push({ turn, resume: turn.resume, parent: null, until: Date.now() + 120000 });
          } else this.drop(run, turn);
          break;
        }
        turn.final = { outcome: 'completed', replies: d.output?.replies ?? [] };
        if (turn.remote || turn.lost) this.ending(run, turn, turn.final);
        else turn.endStream();
        break;
      case 'runtime.request.failed':
        turn.final = { outcome: 'errored', error: d.error, reply: { content: d.error?.message } };
        if (turn.remote && ev.parentRequestId && d.error?.category === 'harness_signal_correlation_failed') {
          // An answer to an approval that was no longer pending (another
          // client answered first): nothing ran.
          this.drop(run, turn);
        } else this.ending(run, turn, turn.final);
        break;
      case 'runtime.request.cancelled': {
        if (ev.parentRequestId && !turn.decision && !closedUnanswered(d) && turn.remote) {
          // Another client's decision, stopped or given up before it
          // took the suspension up: nothing ran, and the turn still
          // awaits a decision (its card stays open).
          this.drop(run, turn);
          break;
        }
        if (ev.parentRequestId && !turn.decision && closedUnanswered(d)) {
          // The record that a suspended turn was closed without an
          // answer: cancelled, or superseded by a new message. Its
          // approval card closes; no turn ran.
          const superseded = cancelCause(d) === 'superseded';
          const mine = this.inflight && !this.inflight.resume;
          for (const [sid, card] of this.cards) {
            if (card.run !== ev.parentRequestId) continue;
            this.closeApproval(sid, !superseded ? 'Closed: cancelled' : mine ? 'Closed: you sent a new message' : 'Closed: a newer message');
          }
          const f = this.inflight;
          if (f?.runID === run) f.runID = null; // not the answer this page sent
          this.drop(run, turn);
          break;
        }
        turn.final = { outcome: 'errored', cancelled: true, reply: { content: 'The turn was cancelled.' } };
        this.ending(run, turn, turn.final);
        break;
      }
    }
    turn.onEvent?.();
  }

  // drop forgets a run whose events show nothing to the user.
  drop(run, turn) {
    this.settled.add(run);
    this.runs.delete(run);
    if (turn.remote) turn.el.remove();
    else {
      turn.endStream();
      turn.unstop();
    }
  }

  // remoteEnd settles a turn another client started (or this tab, before
  // a reload); a new message's turn that committed (completed, or
  // suspended) gets its user message from the history, in place of the
  // one this tab kept or of the note that it would show. A turn that
  // failed or was cancelled committed nothing: the history's last user
  // message is an earlier turn's.
  async remoteEnd(run, turn, out) {
    this.settled.add(run);
    this.runs.delete(run);
    const committed = out.outcome === 'completed' ? out.replies : out.outcome === 'suspended' ? out.pending_messages : null;
    if (!turn.resume && committed) {
      const gen = this.gen;
      // The history's newest messages hold the turn's (unless many
      // turns committed since): the whole is read only then.
      let sess = await api.session(this.id, { limit: committed.length + TURN_TAIL }).catch(() => null);
      if (sess?.message_offset > 0 && turnAt(sess.messages, committed) < 0) sess = await api.session(this.id).catch(() => null);
      if (gen !== this.gen) return;
      const user = turnUser(sess?.messages ?? [], committed);
      const kept = turn.el.firstElementChild?.classList.contains('user') ? turn.el.firstElementChild : null;
      if (user) {
        const b = bubble('user', 'You', text(user));
        if (!kept) turn.el.prepend(b);
        else if (kept.textContent !== b.textContent) kept.replaceWith(b);
      }
    }
    turn.el.querySelector(':scope > .pending-user')?.remove(); // a turn that failed has none
    this.render(turn, out, null);
    this.on.changed();
  }
}

// turnUser returns the user message of the turn whose messages are msgs
// (its replies, or its pending messages) in history: the one before the
// last place msgs stand (a later turn may have committed since), else,
// when they are not found there, history's last user message.
function turnUser(history, msgs) {
  const last = history.findLast((m) => m.role === 'user');
  if (!msgs.length || msgs[0]?.role === 'user') return msgs.length ? null : last;
  const k = turnAt(history, msgs);
  if (k < 0) return last;
  return history[k - 1].role === 'user' ? history[k - 1] : null;
}

// turnAt is the last index past 0 at which msgs stand in history, or -1.
function turnAt(history, msgs) {
  if (!msgs.length) return -1;
  const have = history.map((m) => JSON.stringify(m));
  const want = msgs.map((m) => JSON.stringify(m));
  return matchAt(have, want, have.length - want.length);
}

// matchAt is the last index k, 0 < k <= from, at which the strings want
// stand in have, or -1.
function matchAt(have, want, from) {
  for (let k = from; k > 0; k--) {
    if (want.every((w, i) => have[k + i] === w)) return k;
  }
  return -1;
}

// HISTORY_PAGE is how many of a session's messages the page shows at
// first, and reads at a time when asked for earlier ones.
const HISTORY_PAGE = 200;

// TURN_TAIL is how many messages beyond a turn's own the page reads to
// find the turn's user message once it ends.
const TURN_TAIL = 16;

// TURN_PAGES_MORE bounds how many pages before a page with no user
// message turnPage reads to find its turn's start.
const TURN_PAGES_MORE = 10;

// turnPage reads the page of session id's history that opts asks for
// (api.session's), from its first turn's start (fromTurn). A page with
// no user message, inside a turn longer than a page (a model calling
// many tools), is read back a page at a time, TURN_PAGES_MORE pages at
// most, to that turn's start: it then begins with its user message, not
// with a tool result whose call is on the page before. null when the
// session is gone meanwhile.
async function turnPage(id, opts) {
  let page = await api.session(id, opts);
  for (let more = 0; page?.message_offset > 0 && !page.messages.some(isUser) && more < TURN_PAGES_MORE; more++) {
    const before = await api.session(id, { before: page.message_offset, limit: HISTORY_PAGE }).catch((err) => {
      if (err instanceof APIError && err.status === 404) return null;
      throw err;
    });
    if (!before) return null;
    page = { ...page, messages: [...before.messages, ...page.messages], message_offset: before.message_offset };
  }
  return page && fromTurn(page);
}

// isUser reports whether m is a user message (a turn's start).
const isUser = (m) => m?.role === 'user';

// fromTurn is page, a page of a session's history, from its first user
// message on (the start of a turn: a page never begins with a tool
// result whose call is on the page before), unless it is the history's
// first page or has no user message.
function fromTurn(page) {
  const msgs = page?.messages ?? [];
  const i = page?.message_offset > 0 ? msgs.findIndex((m) => m?.role === 'user') : 0;
  if (i <= 0) return page;
  return { ...page, messages: msgs.slice(i), message_offset: page.message_offset + i };
}
