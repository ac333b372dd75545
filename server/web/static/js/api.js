// The public HTTP API of armature serve, called with the bearer token the
// user stored in this browser (none on a local server without tokens).

const TOKEN_KEY = 'armature.token';

export const token = {
  get: () => localStorage.getItem(TOKEN_KEY) || '',
  set: (v) => (v ? localStorage.setItem(TOKEN_KEY, v) : localStorage.removeItem(TOKEN_KEY)),
};

// hooks.unauthorized runs on every 401 (the page asks for a token).
export const hooks = { unauthorized: () => {} };

// APIError is a failed call: the HTTP status and the server's error
// envelope {"error": {"code", "message"}}.
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// enc escapes a path segment. "." and ".." cannot be one: a URL resolves
// them away (escaped as %2E too), and the call would reach another
// resource; the server refuses them as ids, and so does enc.
const enc = (s) => {
  if (s === '.' || s === '..') throw new APIError(400, 'invalid_request', `"${s}" is not a valid id`);
  return encodeURIComponent(s);
};

// query is the query string of the parameters in params that are set
// (not empty, not 0).
function query(params) {
  const q = Object.entries(params).filter(([, v]) => v).map(([k, v]) => `${k}=${enc(v)}`).join('&');
  return q ? '?' + q : '';
}

function headers(extra = {}) {
  const h = new Headers(extra);
  const t = token.get();
  if (t) h.set('Authorization', 'Bearer ' + t);
  return h;
}

async function call(method, path, body) {
  const init = { method, headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }) };
  if (body !== undefined) init.body = JSON.stringify(body);
  let resp;
  try {
    resp = await fetch(path, init);
  } catch {
    throw new APIError(0, 'network', 'The server could not be reached.');
  }
  if (resp.status === 401) hooks.unauthorized();
  if (resp.status === 204) return null;
  const data = await resp.json().catch(() => null);
  // A turn the server refused (a signal nothing awaits: 404; a malformed
  // payload: 400) still answers an errored outcome: return it as one.
  if (!resp.ok && data?.outcome === 'errored') return { ...data, status: resp.status };
  if (!resp.ok && data === null && [502, 503, 504].includes(resp.status)) {
    // A gateway answered in the server's place (a proxy's 502, 503 or
    // 504, not the server's JSON; one that drops a connection idle for
    // 60 s cuts a longer turn so): the request may have reached the
    // server and its turn run on, as when the connection drops.
    throw new APIError(0, 'network', `The answer was lost on the way (a proxy answered ${resp.status}).`);
  }
  if (!resp.ok) {
    const e = data?.error ?? {};
    throw new APIError(resp.status, e.code || `http_${resp.status}`, e.message || resp.statusText);
  }
  return data;
}

export const api = {
  sessions: (page = '') => call('GET', 'v1/sessions' + (page ? `?page_token=${enc(page)}` : '')),
  createSession: () => call('POST', 'v1/sessions', {}),
  // session reads a session with its history: all of it, or a page of
  // the newest limit messages before the index before (the newest when
  // before is undefined); the answer's message_offset is the index of
  // its first message, message_count the history's length.
  session: (id, { limit = 0, before } = {}) => call('GET', `v1/sessions/${enc(id)}` +
    (before === undefined ? query({ limit }) : `?before=${before}` + (limit ? `&limit=${limit}` : ''))),
  deleteSession: (id) => call('DELETE', `v1/sessions/${enc(id)}`),
  send: (id, content, messageID) => call('POST', `v1/sessions/${enc(id)}/messages`, { content, message_id: messageID }),
  signal: (id, signalID, payload, invocationID, requestID) => call('POST', `v1/sessions/${enc(id)}/signals`, { signal_id: signalID, invocation_id: invocationID, payload, request_id: requestID }),
  // runs lists a page of a session's runs, newest first: size of them
  // (0: the server's default).
  runs: (id, page = '', size = 0) => call('GET', `v1/sessions/${enc(id)}/runs` + query({ page_token: page, page_size: size })),
  run: (id) => call('GET', `v1/runs/${enc(id)}`),
  // runEvents reads a run's events after the event id after, limit of
  // them (0: the server's default).
  runEvents: (id, after = 0, limit = 0) => call('GET', `v1/runs/${enc(id)}/events` + query({ after, limit })),
  cancel: (id) => call('POST', `v1/runs/${enc(id)}/cancel`, {}),
};

// EVENTS_PAGE is how many events allEvents asks for at a time (the
// server's maximum).
const EVENTS_PAGE = 10000;

// allEvents reads every event of run, as {events}: a long reply's run
// has more than the server answers at once.
export async function allEvents(run) {
  const events = [];
  for (;;) {
    const got = (await api.runEvents(run, events.at(-1)?.id ?? 0, EVENTS_PAGE))?.events ?? [];
    events.push(...got);
    if (got.length < EVENTS_PAGE) return { events };
  }
}

// newID returns a random id (crypto.randomUUID needs a secure context;
// getRandomValues does not).
export function newID() {
  const b = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

const sleep = (ms, signal) => new Promise((resolve) => {
  const t = setTimeout(resolve, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
});

// STALL_MS: a stream silent this long (the server sends a keep-alive
// every 15s) is dead; it is dropped and reopened.
const STALL_MS = 40000;

// subscribe reads the session's server-sent events with fetch (so that
// it can send the Authorization header), like EventSource: after a drop
// it reconnects with backoff and Last-Event-ID, and events are delivered
// once each, in id order (anything at or below the last id is skipped).
// onState gets 'connecting', 'live' or 'reconnecting'. When the server
// does not know the last id (its event ids restarted: the stream ends
// with an error event last_event_id_unknown), the last id resets to 0,
// onReset runs and the stream reopens at once from the start. It
// returns {close(), reconnect()}.
//
// While the page is hidden (a background tab) the stream is closed, and
// onState gets 'paused'; it reopens from the last event once the page is
// shown again. A browser allows six connections to a server over HTTP/1.1,
// for all its tabs: streams held open by background tabs would take them
// all, and every call of every tab would wait behind them. While holdOpen
// answers true (the page awaits a turn's events) a hidden page keeps its
// stream; it pauses at the next event or keep-alive after.
export function subscribe(session, lastID, onEvent, onState, onReset = () => {}, holdOpen = () => false) {
  const stop = new AbortController();
  let conn = null;
  let last = lastID;
  let shown = null; // resolves when a hidden page is shown again
  let wake = () => {};
  const visibility = () => {
    if (document.visibilityState === 'hidden') {
      if (shown || holdOpen()) return;
      shown = new Promise((r) => (wake = r));
      conn?.abort();
    } else if (shown) {
      shown = null;
      wake();
    }
  };
  document.addEventListener('visibilitychange', visibility);
  stop.signal.addEventListener('abort', () => {
    document.removeEventListener('visibilitychange', visibility);
    wake();
  }, { once: true });
  visibility();
  (async () => {
    let delay = 500;
    onState('connecting');
    while (!stop.signal.aborted) {
      if (shown) {
        onState('paused');
        await shown;
        if (stop.signal.aborted) break;
        onState('connecting');
        delay = 500;
      }
      let reset = false;
      conn = new AbortController();
      const current = conn;
      const abort = () => current.abort();
      stop.signal.addEventListener('abort', abort, { once: true });
      let watchdog = setTimeout(abort, STALL_MS);
      try {
        const h = headers({ Accept: 'text/event-stream' });
        if (last > 0) h.set('Last-Event-ID', String(last));
        const resp = await fetch(`v1/sessions/${enc(session)}/events`, { headers: h, signal: current.signal, cache: 'no-store' });
        if (resp.status === 401) hooks.unauthorized();
        if (!resp.ok || !resp.body) throw new Error(`HTTP ${resp.status}`);
        onState('live');
        delay = 500;
        for await (const frame of frames(resp.body, () => {
          clearTimeout(watchdog);
          watchdog = setTimeout(abort, STALL_MS);
          if (document.visibilityState === 'hidden') visibility(); // held open until now?
        })) {
          if (frame.event === 'error' && !frame.id) {
            let code = '';
            try {
              code = JSON.parse(frame.data)?.code ?? '';
            } catch {
              // not the server's error envelope
            }
            if (code === 'last_event_id_unknown') {
              reset = true;
              abort();
              break;
            }
            continue;
          }
          const id = Number(frame.id);
          if (!(id > last)) continue;
          last = id;
          try {
            onEvent(JSON.parse(frame.data));
          } catch (err) {
            console.error('armature: event handler failed', err);
          }
        }
      } catch {
        // dropped: reconnect below
      } finally {
        clearTimeout(watchdog);
        stop.signal.removeEventListener('abort', abort);
      }
      if (stop.signal.aborted) break;
      if (shown) continue; // hidden: paused above, then reopened at once
      if (reset) {
        // The server's ids restarted: replay from its first event.
        last = 0;
        try {
          onReset();
        } catch (err) {
          console.error('armature: reset handler failed', err);
        }
        continue;
      }
      onState('reconnecting');
      await sleep(delay, stop.signal);
      delay = Math.min(delay * 2, 10000);
    }
  })();
  return {
    close: () => stop.abort(),
    // reconnect drops the current connection at once (e.g. the browser is
    // back online); the loop reopens it from the last event.
    reconnect: () => conn?.abort(),
  };
}

// frames parses a text/event-stream body into {id, event, data} frames;
// tick runs on every chunk read (keep-alives included).
async function* frames(body, tick) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    tick();
    buf += value;
    let end;
    while ((end = buf.search(/\r?\n\r?\n/)) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end).replace(/^\r?\n\r?\n/, '');
      const f = { id: '', event: 'message', data: [] };
      for (const line of block.split(/\r?\n/)) {
        if (line === '' || line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const field = c < 0 ? line : line.slice(0, c);
        const v = c < 0 ? '' : line.slice(c + 1).replace(/^ /, '');
        if (field === 'data') f.data.push(v);
        else if (field === 'id') f.id = v;
        else if (field === 'event') f.event = v;
      }
      if (f.data.length) yield { id: f.id, event: f.event, data: f.data.join('\n') };
    }
  }
}
