// The conversation of one session: its history, then the live turns.
// A turn streams from the session's events while its POST is in flight;
// the POST's outcome is the truth the turn is reconciled with.
import { api, APIError, newID, subscribe } from './api.js';
import { h, text, pretty } from './dom.js';

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
  constructor(parent, tools, { remote = false, resume = false, denied = null } = {}) {
    this.el = h('div', { class: 'turn' });
    this.remote = remote;
    this.resume = resume;
    this.denied = denied; // ids of the calls its messages answer that the user denied
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
    if (this.pending && this.stream) this.stream.querySelector('.body').append(this.pending);
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

function bubble(role, who, content) {
  return h('div', { class: `msg ${role}` }, h('span', { class: 'who' }, who), h('div', { class: 'body' }, content));
}

// toolCard is a collapsible card for one tool call.
function toolCard(name, args) {
  const status = h('span', { class: 'badge' }, 'running');
  const body = h('div', { class: 'tool-body' }, h('h4', {}, 'Arguments'), h('pre', {}, pretty(args ?? {})));
  const el = h('details', { class: 'tool', dataset: { status: 'running', tool: name } },
    h('summary', {}, h('span', { class: 'tool-icon', 'aria-hidden': 'true' }, '⚙'), ' ',
      h('span', { class: 'tool-name' }, name || 'tool'), ' ', status), body);
  const card = {
    el,
    outcome: null, // the status an agent.tool.result event gave
    denied: false, // its approval was denied
    // result shows the call's result. A result event's error field says
    // it failed (or, for a denied call, was not run: denied); a result
    // read from the messages (error undefined) keeps what the event said.
    result(output, error) {
      let st;
      if (error === undefined) st = card.outcome ?? 'done';
      else st = error != null && error !== '' ? (card.denied ? 'denied' : 'failed') : 'done';
      if (error !== undefined) card.outcome = st;
      const msg = error != null && error !== '' ? error : output;
      el.dataset.status = st;
      status.textContent = st === 'not-run' ? 'not run' : st;
      body.querySelector('.result')?.remove();
      body.append(h('div', { class: 'result' }, h('h4', {}, { failed: 'Error', denied: 'Denied' }[st] ?? 'Result'), h('pre', {}, pretty(msg))));
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
// pending tool call.
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
    ? h('dl', { class: 'args' }, Object.entries(args).flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, typeof v === 'string' ? v : JSON.stringify(v))]))
    : h('pre', {}, pretty(args ?? {}));
  const el = h('section', { class: 'card approval', 'aria-labelledby': `${id}-title`, dataset: { signal: signal?.signal_id ?? '' } },
    h('h3', { id: `${id}-title` }, 'Approval needed'),
    h('p', {}, 'The agent wants to run ', h('code', {}, tool || 'a tool'), args ? ' with:' : '.'),
    args ? argList : null,
    h('label', { for: comment.id }, 'Comment (optional)'), comment,
    h('div', { class: 'row' }, approve, deny), status);
  const card = {
    el,
    focus: () => approve.focus(),
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
  comment.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      go(true);
    }
  });
  return card;
}

// errorCard shows an errored turn, styled by its bucket.
function errorCard(err, message, retry) {
  const bucket = err?.bucket || 'user_correctable';
  const el = h('div', { class: 'card error', role: 'alert', dataset: { bucket } },
    h('strong', {}, BUCKETS[bucket] ?? 'Error'),
    h('p', {}, message || 'The turn failed.'),
    err?.category ? h('p', { class: 'muted small' }, err.category) : null);
  if (retry && (err?.retryable || bucket === 'retryable_transient')) {
    el.append(h('button', { type: 'button', class: 'retry', onclick: (e) => { e.currentTarget.remove(); retry(); } }, 'Retry'));
  }
  return el;
}

// cancelledCard shows a turn that was cancelled (stopped here, or
// elsewhere): not an error of the user's message.
function cancelledCard(message) {
  return h('div', { class: 'card cancelled', role: 'status' },
    h('strong', {}, 'Cancelled'), h('p', {}, message || 'The turn was cancelled.'));
}

// httpError turns a failed call into an errored outcome.
function httpError(err) {
  const status = err instanceof APIError ? err.status : 0;
  const bucket = status === 0 || status >= 500 ? 'retryable_transient' : status === 409 ? 'session_terminating' : 'user_correctable';
  return { outcome: 'errored', http: true, error: { bucket, category: err.code ?? 'network', retryable: bucket === 'retryable_transient' }, reply: { content: err.message } };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// denials returns the ids of the tool calls the user denied in runs (a
// page of a session's runs), which the messages do not tell from calls
// that ran: a run that resumed a suspended turn records the decision
// (runtime.approval.resolved, naming the signal), and the run that
// suspended the signal it waited for (runtime.request.suspended, the
// call's id in its metadata), as the approval card had it.
// runEvents(run) fetches a run's events; runs whose events cannot be read
// tell nothing.
async function denials(runs, runEvents) {
  const read = (rid) => runEvents(rid).then((r) => r?.events ?? [], () => []);
  const ids = await Promise.all(runs.filter((r) => r.parentRequestId).map(async (r) => {
    const calls = [];
    for (const ev of await read(r.id)) {
      const d = ev.type === 'runtime.approval.resolved' ? ev.data ?? {} : null;
      const a = d?.decision?.approval;
      if (!a || a.approved) continue;
      let call = d.approval?.metadata?.call_id;
      if (!call) {
        const sid = d.approval?.signal_id;
        const asked = (await read(r.parentRequestId)).find((e) => e.type === 'runtime.request.suspended' && e.data?.signal?.signal_id === sid);
        call = asked?.data?.signal?.metadata?.call_id;
      }
      if (call) calls.push(call);
    }
    return calls;
  }));
  return new Set(ids.flat());
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
    this.id = id;
    this.gen++;
    this.inflight = null; // {turn, resume, parent, runID, stopped}
    this.resyncing = false; // the event ids restarted: reopen when idle
    this.runs = new Map(); // run id → Turn, for runs being streamed
    this.turns = new Map(); // run id → Turn, for every run shown
    this.resumed = new Map(); // suspended run id → the run whose answer resumed it
    this.settled = new Set(); // runs rendered from their POST: late events are ignored
    this.skip = []; // {resume, until}: runs whose POST answered before their events came
    this.cards = new Map(); // signal id → approval card
    this.tools = new Map(); // tool call id → tool card
    this.els.history.replaceChildren();
    this.els.live.replaceChildren();
    this.on.conn('idle');
  }

  // open shows a session: its history, a pending approval, then live
  // events from where the history ends.
  async open(id) {
    this.reset(id);
    if (!id) return;
    const gen = this.gen;
    const [sess, runs] = await Promise.all([api.session(id), api.runs(id)]);
    if (gen !== this.gen) return;
    let last = 0;
    const list = runs.runs ?? []; // newest first
    const newest = list[0];
    // The pending approval: the newest run that did not fail, if it is
    // suspended and no later run resumed, cancelled or superseded it (a
    // failed or cancelled turn after it leaves it pending: it did not
    // commit, so it superseded nothing).
    const closed = new Set(list.map((r) => r.parentRequestId).filter(Boolean));
    const live = list.find((r) => r.status !== 'failed' && !(r.status === 'cancelled' && !r.parentRequestId));
    const suspended = live?.status === 'suspended' && !closed.has(live.id) ? live : null;
    let events = [];
    let denied = null;
    if (newest) {
      const got = new Map(); // run id → its events (a promise)
      const runEvents = (rid) => {
        if (!got.has(rid)) got.set(rid, api.runEvents(rid));
        return got.get(rid);
      };
      const [evs, sevs, den] = await Promise.all([runEvents(newest.id),
        suspended && suspended !== newest ? runEvents(suspended.id) : null, denials(list, runEvents)]);
      if (gen !== this.gen) return;
      last = (evs.events ?? []).reduce((m, e) => Math.max(m, e.id), 0);
      events = (sevs ?? evs).events ?? [];
      denied = den;
    }
    new Turn(this.els.history, this.tools, { denied }).messages(sess.messages);
    if (suspended) {
      const sig = boundSignal(events.find((e) => e.type === 'runtime.request.suspended')?.data, suspended.id);
      const pending = events.find((e) => e.type === 'runtime.approval.requested')?.data?.approval?.pending_messages;
      if (sig) this.approval(new Turn(this.els.live, this.tools), sig, pending);
    }
    this.listen(last);
  }

  listen(last) {
    const gen = this.gen;
    let ready;
    this.live = new Promise((r) => (ready = r));
    this.sub = subscribe(this.id, last, (ev) => gen === this.gen && !this.resyncing && this.event(ev), (state) => {
      if (gen !== this.gen) return;
      if (state === 'live') ready();
      this.on.conn(state);
    }, () => gen === this.gen && this.resync());
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
    const id = this.id;
    await this.turn(turn, false, () => api.send(id, content, newID()), () => this.send(content));
  }

  // turn runs one POST (a send or a signal) for turn: events stream into
  // turn while the POST is in flight, its outcome settles it.
  async turn(turn, resume, call, retry, parent = null) {
    const gen = this.gen;
    // The first event stream of a session must be listening for the
    // turn to stream; don't wait long for it.
    await Promise.race([this.live, sleep(1500)]);
    const f = { turn, resume, parent, runID: null, stopped: false };
    this.inflight = f;
    let out;
    try {
      out = await call();
    } catch (err) {
      out = httpError(err);
    }
    if (gen !== this.gen) return out;
    this.inflight = null;
    turn.unstop();
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
    if (resume && f.parent && out.run_id && !refused) this.won(f.parent, out.run_id);
    if (out.run_id) {
      // The run's events, come or to come, are this turn's.
      this.settled.add(out.run_id);
      this.runs.delete(out.run_id);
    }
    if (f.runID && (!resume || !out.run_id || f.runID === out.run_id)) {
      this.settled.add(f.runID);
      this.runs.delete(f.runID);
    } else if (!f.runID && !out.run_id && !out.http && !refused) {
      // The run's events may still come: they are this turn's.
      this.skip.push({ resume, until: Date.now() + 10000 });
    }
    this.render(turn, out, retry);
    this.on.changed();
    this.idle();
    return out;
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

  render(turn, out, retry) {
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
    turn.append(card.el);
    card.focus();
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
  // new turn below the card.
  async decide(card, signal, approved, comment) {
    card.busy(true);
    const tool = card.tool;
    if (tool) tool.denied = !approved;
    const turn = new Turn(this.els.live, this.tools, { resume: true });
    turn.thinking();
    const payload = { approval: { approved, comment } };
    const out = await this.turn(turn, true, () => api.signal(this.id, signal.signal_id, payload, signal.invocation_id),
      () => { turn.el.remove(); this.decide(card, signal, approved, comment); }, card.run);
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
    } else if (out.outcome === 'errored' && out.error?.bucket === 'retryable_transient') card.fail('Not sent: retry below.');
    else if (out.outcome === 'errored' && out.error?.category === 'suspension_resume_payload_invalid') card.fail('Not accepted: try again.');
    else card.resolved(approved ? 'Approved' : 'Denied');
    this.on.focusInput();
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
      this.skip = this.skip.filter((s) => s.until > now);
      const i = this.skip.findIndex((s) => s.resume === resume);
      if (f && !f.runID && f.resume === resume && (!f.parent || f.parent === ev.parentRequestId)) {
        f.runID = run;
        turn = f.turn;
        // A resume's run is this page's when it resumes the card's run.
        if (!resume || f.parent) turn.stoppable(() => this.stop(f));
      } else if (i >= 0) {
        this.skip.splice(i, 1);
        this.settled.add(run);
        return;
      } else {
        // A turn this page did not start: another tab, another client,
        // or an approval given elsewhere.
        turn = new Turn(this.els.live, this.tools, { remote: true, resume });
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
        if (turn.remote) this.remoteEnd(run, turn, turn.final);
        break;
      case 'runtime.request.completed':
        turn.final = { outcome: 'completed', replies: d.output?.replies ?? [] };
        if (turn.remote) this.remoteEnd(run, turn, turn.final);
        else turn.endStream();
        break;
      case 'runtime.request.failed':
        turn.final = { outcome: 'errored', error: d.error, reply: { content: d.error?.message } };
        if (turn.remote && ev.parentRequestId && d.error?.category === 'harness_signal_correlation_failed') {
          // An answer to an approval that was no longer pending (another
          // client answered first): nothing ran.
          this.drop(run, turn);
        } else if (turn.remote) this.remoteEnd(run, turn, turn.final);
        break;
      case 'runtime.request.cancelled': {
        if (ev.parentRequestId && !turn.decision) {
          // The record that a suspended turn was closed without an
          // answer: cancelled, or superseded by a new message. Its
          // approval card closes; no turn ran.
          const superseded = String(d.reason ?? '').startsWith('superseded');
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
        if (turn.remote) this.remoteEnd(run, turn, turn.final);
        break;
      }
    }
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

  // remoteEnd settles a turn another client started; a new message's turn
  // gets its user message from the history.
  async remoteEnd(run, turn, out) {
    this.settled.add(run);
    this.runs.delete(run);
    if (!turn.resume) {
      const gen = this.gen;
      const sess = await api.session(this.id).catch(() => null);
      if (gen !== this.gen) return;
      const user = sess?.messages?.findLast((m) => m.role === 'user');
      if (user) turn.el.prepend(bubble('user', 'You', text(user)));
    }
    this.render(turn, out, null);
    this.on.changed();
  }
}
