// The run inspector: a session's runs (turns), newest first, each with
// its duration, its tool calls and its runtime event timeline. The tool
// calls' names and arguments, which a model wrote, are shown as the
// approval card shows them: every character that would not show as
// itself is an escape (see visible), so the record of what ran reads as
// what ran; their results and the runs' replies as the chat shows them,
// their bidi controls as escapes (see unreordered).
import { allEvents, api } from './api.js';
import { h, pretty, duration, when, text, shown, unreordered, visible } from './dom.js';

const ms = (a, b) => new Date(b).getTime() - new Date(a).getTime();

// showRuns renders the runs of session into root.
export async function showRuns(root, session) {
  root.replaceChildren(h('p', { class: 'muted' }, 'Loading runs…'));
  const list = h('div', { class: 'run-list' });
  const more = h('button', { type: 'button', class: 'ghost', hidden: true }, 'Load older runs');
  let page = '';
  // asked holds, by call id, the arguments of the calls a suspended run
  // asked approval for: the run resuming a denied call records no start.
  const asked = new Map();
  const load = async () => {
    more.disabled = true;
    const resp = await api.runs(session, page);
    const runs = resp.runs ?? [];
    const events = await Promise.all(runs.map((r) => allEvents(r.id).then((e) => e.events, () => [])));
    for (const ev of events.flat()) {
      const m = ev.type === 'runtime.request.suspended' ? ev.data?.signal?.metadata : null;
      if (m?.call_id) asked.set(m.call_id, m.arguments);
    }
    runs.forEach((r, i) => list.append(runView(r, events[i], asked)));
    page = resp.next_page_token || '';
    more.hidden = !page;
    more.disabled = false;
  };
  more.addEventListener('click', load);
  await load();
  root.replaceChildren(list.childElementCount ? list : h('p', { class: 'muted' }, 'This session has no runs yet.'), more);
}

// usageText is a run's model usage, as its record gives it: tokens in
// and out (cached), the model calls, and a finish reason worth noting.
function usageText(output) {
  const u = output?.usage;
  if (!u) return null;
  const parts = [];
  if (u.prompt_tokens != null || u.completion_tokens != null) {
    parts.push(`${u.prompt_tokens ?? '?'} tokens in${u.cached_tokens ? ` (${u.cached_tokens} cached)` : ''}, ${u.completion_tokens ?? '?'} out`);
  }
  if (u.model_calls > 1) parts.push(`${u.model_calls} model calls`);
  const finish = output.finish_reason;
  if (finish && finish !== 'stop' && finish !== 'tool_calls') parts.push(`stopped: ${finish}`);
  return parts.length ? h('span', { class: 'usage' }, ' · ' + parts.join(' · ')) : null;
}

function runView(run, events, asked) {
  const took = run.endedAt ? duration(ms(run.startedAt, run.endedAt)) : 'running';
  const tools = toolCalls(events, asked);
  const head = h('header', { class: 'run-head' },
    h('h2', {}, h('span', { class: 'badge', dataset: { status: run.status } }, run.status), ' ', h('code', {}, run.id)),
    h('p', { class: 'muted small' }, when(run.startedAt), ' · ', took,
      run.parentRequestId ? [' · resumes ', h('code', {}, run.parentRequestId)] : null,
      run.agentId ? [' · agent ', run.agentId] : null,
      usageText(run.output)));
  const out = [];
  if (run.error) out.push(h('p', { class: 'card error', dataset: { bucket: run.error.bucket || 'user_correctable' } }, `${run.error.category}: ${run.error.message}`));
  const replies = run.output?.replies?.map(text).filter(Boolean) ?? [];
  if (replies.length) out.push(h('p', { class: 'run-output', dir: 'auto' }, unreordered(replies.at(-1))));
  return h('article', { class: 'run', dataset: { run: run.id, status: run.status } }, head, ...out,
    tools.length ? h('table', { class: 'tools' },
      h('caption', {}, `Tool calls (${tools.length})`),
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Tool'), h('th', { scope: 'col' }, 'Arguments'), h('th', { scope: 'col' }, 'Result'), h('th', { scope: 'col' }, 'Took'))),
      h('tbody', {}, tools.map((t) => h('tr', { dataset: { status: t.status } },
        h('td', {}, h('code', {}, visible(t.name ?? ''))), h('td', {}, h('pre', {}, shown(t.args))),
        h('td', {}, h('pre', { dir: 'auto' }, t.status === 'pending' ? '(no result in this run)' : unreordered(pretty(t.result)))), h('td', {}, t.took))))) : null,
    h('details', { class: 'timeline' }, h('summary', {}, `Event timeline (${events.length} events)`), timeline(run, events)));
}

// toolCalls pairs tool starts with their results.
function toolCalls(events, asked) {
  const calls = new Map();
  for (const ev of events) {
    const e = ev.data?.event;
    if (!e) continue;
    if (e.phase === 'agent.tool.start') calls.set(e.toolId, { name: e.name, args: e.args ?? {}, start: ev.time, status: 'pending', took: '—' });
    if (e.phase === 'agent.tool.result') {
      const c = calls.get(e.toolId) ?? { name: e.name, args: asked?.get(e.toolId) ?? {}, start: ev.time };
      const failed = e.error != null && e.error !== '';
      Object.assign(c, { status: failed ? 'failed' : 'done', result: failed ? e.error : e.output, took: duration(ms(c.start, ev.time)) });
      calls.set(e.toolId, c);
    }
  }
  return [...calls.values()];
}

// timeline lists the events with their offset from the run's start;
// consecutive output deltas are folded into one row.
function timeline(run, events) {
  const rows = [];
  for (const ev of events) {
    const e = ev.data?.event;
    const prev = rows.at(-1);
    if (e?.phase === 'agent.output.delta' && prev?.phase === 'agent.output.delta') {
      prev.count++;
      prev.text += e.text ?? '';
      continue;
    }
    rows.push({ ev, phase: e?.phase, count: 1, text: e?.text ?? '' });
  }
  return h('ol', { class: 'events' }, rows.map(({ ev, phase, count, text: t }) => h('li', {},
    h('span', { class: 'at' }, '+' + duration(ms(run.startedAt, ev.time))),
    h('code', { class: 'type' }, ev.type.replace(/^runtime\./, '')),
    phase ? h('span', { class: 'phase' }, phase + (count > 1 ? ` ×${count}` : '')) : null,
    h('span', { class: 'detail' }, detail(ev, phase, t)))));
}

function detail(ev, phase, t) {
  const d = ev.data ?? {};
  const e = d.event ?? {};
  switch (phase) {
    case 'agent.output.delta': return JSON.stringify(t);
    case 'agent.tool.start': return visible(`${e.name} ${JSON.stringify(e.args ?? {})}`);
    case 'agent.tool.result': return `${e.name} → ${e.error ?? e.output ?? ''}`;
    case 'agent.node.completed': return e.nodeId ?? '';
    case 'agent.handoff': return `${e.modelRef ?? ''} tools: ${(e.tools ?? []).join(', ')}`;
  }
  switch (ev.type) {
    case 'runtime.request.suspended': return d.signal?.signal_id ?? '';
    case 'runtime.request.failed': return `${d.error?.bucket ?? ''} ${d.error?.category ?? ''}`;
    case 'runtime.approval.resolved': return JSON.stringify(d.decision ?? {});
  }
  return '';
}
