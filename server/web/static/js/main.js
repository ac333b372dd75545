// The page: routes (#/s/<session>, #/runs/<session>, #/new), the session
// list, the composer, the token dialog, the theme and the shortcuts.
import { api, hooks, token } from './api.js';
import { Conversation } from './chat.js';
import { showRuns } from './inspector.js';
import { $, h, when } from './dom.js';

const els = {
  conn: $('#conn'), sessions: $('#sessions'), empty: $('#sessions-empty'), chatView: $('#chat-view'),
  runsView: $('#runs-view'), title: $('#chat-title'), runsTitle: $('#runs-title'), inspect: $('#inspect-link'),
  chatLink: $('#chat-link'), log: $('#log'), welcome: $('#welcome'), form: $('#composer'), input: $('#input'),
  send: $('#send'), runs: $('#runs'), theme: $('#theme'), dialog: $('#token-dialog'), tokenInput: $('#token-input'),
  tokenWhy: $('#token-why'), announce: $('#announce'),
};

let sessions = [];
let current = null; // the session shown, or null for a new conversation
let skipOpen = null; // a session created by the first send: already open

const CONN = { idle: 'Not connected', connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', paused: 'Paused (tab hidden)' };

const chat = new Conversation({ history: $('#history'), live: $('#live') }, {
  conn: (state) => {
    els.conn.dataset.state = state;
    els.conn.textContent = CONN[state] ?? state;
  },
  changed: () => refreshSessions(),
  created: (id) => {
    if (creating) {
      // The message that created the session goes on as its own.
      sending.delete(NEW);
      creating.key = id;
      sending.add(id);
      creating = null;
    }
    skipOpen = id;
    location.hash = `#/s/${encodeURIComponent(id)}`;
  },
  focusInput: () => els.input.focus(),
  announce,
});

// announce has screen readers read msg (politely) without moving the
// focus.
function announce(msg) {
  els.announce.textContent = '';
  setTimeout(() => (els.announce.textContent = msg), 50);
}

// Routing.
async function route() {
  const [, kind, raw] = location.hash.match(/^#\/(s|runs|new)?\/?(.*)$/) ?? [];
  let id = null;
  try {
    id = raw ? decodeURIComponent(raw) : null;
  } catch {
    return showBadAddress('Its session id is not validly encoded.');
  }
  if (id === '.' || id === '..') return showBadAddress('"." and ".." are not session ids.');
  if (kind === 'runs' && id) return showInspector(id);
  els.runsView.hidden = true;
  els.chatView.hidden = false;
  if (!kind && !id) {
    // The landing page: the latest session, else a new one.
    await refreshSessions();
    if (sessions.length) return void location.replace(`#/s/${encodeURIComponent(sessions[0].session_id)}`);
  }
  current = kind === 's' ? id : null;
  updateSend();
  stick = true;
  els.title.textContent = current ? `Session ${current}` : 'New conversation';
  document.title = current ? `${current} · Armature` : 'Armature';
  els.inspect.hidden = !current;
  els.inspect.href = current ? `#/runs/${encodeURIComponent(current)}` : '#/';
  markCurrent();
  if (skipOpen && skipOpen === current) {
    skipOpen = null;
  } else {
    await chat.open(current).catch(showLoadError);
  }
  updateWelcome();
  els.input.focus();
}

// showBadAddress shows that the page's address names no session (a
// malformed escape in its hash, an id no session can have): why says
// why.
function showBadAddress(why) {
  current = null;
  chat.reset(null);
  els.runsView.hidden = true;
  els.chatView.hidden = false;
  els.title.textContent = 'Not found';
  document.title = 'Not found · Armature';
  els.inspect.hidden = true;
  markCurrent();
  $('#live').append(h('div', { class: 'card error', role: 'alert', dataset: { bucket: 'user_correctable' } },
    h('strong', {}, 'This address names no session'),
    h('p', {}, `${why} Pick a session in the list, or start a new conversation.`)));
  updateSend();
  updateWelcome();
  els.input.focus();
}

function showLoadError(err) {
  $('#live').append(h('div', { class: 'card error', role: 'alert', dataset: { bucket: 'user_correctable' } },
    h('strong', {}, 'Could not load the session'), h('p', {}, err.message)));
}

async function showInspector(id) {
  current = id;
  els.chatView.hidden = true;
  els.runsView.hidden = false;
  chat.reset(null);
  els.runsTitle.textContent = `Runs of ${id}`;
  document.title = `Runs of ${id} · Armature`;
  els.chatLink.href = `#/s/${encodeURIComponent(id)}`;
  markCurrent();
  els.runsTitle.focus();
  await showRuns(els.runs, id).catch((err) => els.runs.replaceChildren(h('p', { class: 'card error', role: 'alert', dataset: { bucket: 'user_correctable' } }, err.message)));
}

function updateWelcome() {
  els.welcome.hidden = ($('#history').textContent + $('#live').textContent).trim() !== '';
}

// The session list.
async function refreshSessions() {
  try {
    const resp = await api.sessions();
    sessions = (resp.sessions ?? []).sort((a, b) => String(b.updated_at).localeCompare(String(a.updated_at)));
  } catch {
    return;
  }
  els.sessions.replaceChildren(...sessions.map((s) => {
    const id = s.session_id;
    const del = h('button', { type: 'button', class: 'ghost icon delete', 'aria-label': `Delete session ${id}`, title: 'Delete' }, '✕');
    let armed = null;
    del.addEventListener('click', async () => {
      if (!armed) {
        del.textContent = 'Delete?';
        del.classList.add('armed');
        armed = setTimeout(() => { armed = null; del.textContent = '✕'; del.classList.remove('armed'); }, 4000);
        return;
      }
      clearTimeout(armed);
      armed = null;
      del.textContent = '✕';
      del.classList.remove('armed');
      try {
        await api.deleteSession(id);
      } catch (err) {
        // Not deleted: say so, and stay (the user must not believe a
        // conversation is gone that is not).
        $('#live').append(h('div', { class: 'card error', role: 'alert', dataset: { bucket: 'retryable_transient' } },
          h('strong', {}, `Session ${id} was not deleted`), h('p', {}, err.message)));
        return;
      }
      if (current === id) location.hash = '#/new';
      refreshSessions();
    });
    return h('li', { dataset: { session: id } },
      h('a', { href: `#/s/${encodeURIComponent(id)}` }, h('span', { class: 'sid' }, id), h('span', { class: 'muted small' }, when(s.updated_at))),
      del);
  }));
  els.empty.hidden = sessions.length > 0;
  markCurrent();
}

function markCurrent() {
  for (const li of els.sessions.children) {
    const a = li.querySelector('a');
    if (li.dataset.session === current) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

// The composer: Enter sends, Shift+Enter adds a line. sending holds the
// sessions (by id; NEW for a new conversation) whose message this page
// is sending: the composer waits for the shown session's turn, not for
// another session's (one left while its turn runs).
const NEW = '\u0000new';
const sending = new Set();
let creating = null; // the send creating a new conversation: {key}
const sendKey = () => current ?? NEW;
function updateSend() {
  els.send.disabled = sending.has(sendKey());
}
els.input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    els.form.requestSubmit();
  }
});
els.form.addEventListener('submit', async (e) => {
  e.preventDefault();
  const content = els.input.value.trim();
  const ref = { key: sendKey() };
  if (!content || sending.has(ref.key)) return;
  sending.add(ref.key);
  if (ref.key === NEW) creating = ref;
  updateSend();
  els.input.value = '';
  els.welcome.hidden = true;
  try {
    await chat.send(content);
  } catch (err) {
    // The message was not sent (the new conversation could not be
    // created): it goes back to the box, unless the user typed anew.
    if (!els.input.value) els.input.value = content;
    $('#live').append(h('div', { class: 'card error', role: 'alert', dataset: { bucket: 'retryable_transient' } },
      h('strong', {}, 'Your message was not sent'), h('p', {}, `${err.message} It is back in the message box: send it again.`)));
    els.input.focus();
  } finally {
    sending.delete(ref.key);
    if (creating === ref) creating = null;
    updateSend();
  }
});

// The token dialog.
function openToken(why) {
  els.tokenWhy.textContent = why || 'The server\'s bearer token. It is kept in this browser only and sent as Authorization on API calls. A local server without tokens needs none.';
  els.tokenInput.value = token.get();
  if (!els.dialog.open) els.dialog.showModal();
  els.tokenInput.focus();
}
hooks.unauthorized = () => openToken(token.get()
  ? 'The server refused this token: check it, or paste another.'
  : 'The server needs a bearer token: paste yours.');
$('#token-open').addEventListener('click', () => openToken());
$('#token-cancel').addEventListener('click', () => els.dialog.close());
$('#token-clear').addEventListener('click', () => { token.set(''); els.tokenInput.value = ''; });
$('#token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  token.set(els.tokenInput.value.trim());
  els.dialog.close();
  refreshSessions();
  route();
});

// The theme: the system's (auto), or light or dark.
const THEMES = ['auto', 'light', 'dark'];
function applyTheme(t) {
  document.documentElement.dataset.theme = t;
  els.theme.textContent = `Theme: ${t}`;
  localStorage.setItem('armature.theme', t);
}
els.theme.addEventListener('click', () => {
  const t = document.documentElement.dataset.theme;
  applyTheme(THEMES[(THEMES.indexOf(t) + 1) % THEMES.length]);
});
applyTheme(THEMES.includes(localStorage.getItem('armature.theme')) ? localStorage.getItem('armature.theme') : 'auto');

// Shortcuts (documented in the page).
document.addEventListener('keydown', (e) => {
  if (e.key === 'Escape' && !els.dialog.open) {
    if (!els.chatView.hidden) els.input.focus();
    return;
  }
  if (!e.altKey || e.ctrlKey || e.metaKey) return;
  const go = (fn) => { e.preventDefault(); fn(); };
  switch (e.code) {
    case 'KeyN': return go(() => (location.hash = '#/new'));
    case 'KeyT': return go(() => els.theme.click());
    case 'KeyR': return go(() => current && (location.hash = `#/${els.chatView.hidden ? 's' : 'runs'}/${encodeURIComponent(current)}`));
    case 'KeyA': return go(() => [...document.querySelectorAll('#log .approval:not([data-resolved])')].at(-1)?.focus());
    case 'ArrowUp':
    case 'ArrowDown': return go(() => {
      const i = sessions.findIndex((s) => s.session_id === current);
      const next = sessions[i < 0 ? 0 : i + (e.code === 'ArrowUp' ? -1 : 1)];
      if (next) location.hash = `#/s/${encodeURIComponent(next.session_id)}`;
    });
  }
});

// The log follows new content unless the reader scrolled up.
let stick = true;
els.log.addEventListener('scroll', () => {
  stick = els.log.scrollHeight - els.log.scrollTop - els.log.clientHeight < 48;
});
// An open approval card taller than the log (arguments a model padded)
// is shown from its top, once: its title and first arguments are what
// the user decides on, not only its last lines above the buttons.
const topped = new WeakSet();
new MutationObserver(() => {
  if (!stick) return;
  const card = [...els.log.querySelectorAll('.approval:not([data-resolved])')].at(-1);
  if (card && !topped.has(card) && card.offsetHeight > els.log.clientHeight) {
    topped.add(card);
    card.scrollIntoView({ block: 'start' });
    return;
  }
  if (!card || !topped.has(card)) els.log.scrollTop = els.log.scrollHeight;
}).observe(els.log, { childList: true, subtree: true, characterData: true });

addEventListener('hashchange', route);
addEventListener('online', () => chat.sub?.reconnect());
$('#new-session').addEventListener('click', () => { location.hash = '#/new'; });
refreshSessions();
route();
