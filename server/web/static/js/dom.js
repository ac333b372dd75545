// Small DOM helpers: h() builds elements (text is always set as text,
// never parsed as HTML).

// h(tag, attrs, ...children): attrs are attributes, except on* (event
// listeners) and dataset; children are nodes, strings or arrays.
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs ?? {})) {
    if (v === false || v == null) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  el.append(...children.flat().filter((c) => c != null && c !== false));
  return el;
}

export const $ = (sel, root = document) => root.querySelector(sel);

// text returns a message's text: its content string, or the text of its
// text blocks.
export function text(msg) {
  const c = msg?.content;
  if (typeof c === 'string') return c;
  if (Array.isArray(c)) return c.filter((b) => b.type === 'text').map((b) => b.text).join('');
  return '';
}

// HIDDEN matches the characters that do not show as themselves: controls
// (line breaks and tabs too), format characters (bidi controls,
// zero-width ones), line and paragraph separators, every space but
// U+0020, the other default-ignorable characters (Hangul fillers,
// variation selectors, tags), the braille blank, private-use and lone
// surrogate code points.
const HIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Zs}\p{Default_Ignorable_Code_Point}\p{Co}\p{Cs}\u2800]/gu;
const ESCAPES = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

// BIDI matches the explicit directional formatting characters: the
// embeddings, overrides and isolates and their terminators (U+202A–
// U+202E, U+2066–U+2069). They reorder the text that follows them (an
// override reverses it: "abc\u202Efdp.exe" reads "abcexe.pdf"), and
// real text in any language reads right without them. The marks (LRM,
// RLM, ALM) are not among them: they only place neutral characters
// (punctuation, spaces) around right-to-left words, reverse no letters,
// and Arabic and Hebrew writers use them.
const BIDI = /[\u202A-\u202E\u2066-\u2069]/gu;

// visible returns s as nodes where every character HIDDEN matches (but
// U+0020) is an escape (\n, \u2028, \u{e0041}) in a span of class esc,
// titled with its code point: text a model wrote shows exactly, with no
// line, space or reordering it does not show.
// With lines, a line feed stays one (JSON's own layout; JSON escapes
// those in its strings). With only (a global regular expression), just
// the characters it matches are escapes.
export function visible(s, lines = false, only = HIDDEN) {
  s = String(s);
  const out = [];
  let at = 0;
  for (const m of s.matchAll(only)) {
    if (m[0] === ' ' || (lines && m[0] === '\n')) continue;
    const cp = m[0].codePointAt(0);
    const hex = cp.toString(16).padStart(4, '0');
    if (m.index > at) out.push(s.slice(at, m.index));
    out.push(h('span', { class: 'esc', title: `U+${hex.toUpperCase()}` }, ESCAPES[m[0]] ?? (cp > 0xffff ? `\\u{${hex}}` : `\\u${hex}`)));
    at = m.index + m[0].length;
  }
  if (at < s.length) out.push(s.slice(at));
  return out;
}

// unreordered returns text for a chat bubble or a tool result as nodes,
// the explicit directional formatting characters (BIDI) as escapes, as
// visible writes them: they show where they are and reorder nothing.
// Everything else stays as written: line breaks, spaces, the marks, the
// joiners of emoji and of Persian words. The element it goes in isolates
// it and takes each paragraph's direction from its text (dir="auto" and
// unicode-bidi: plaintext, see app.css), so right-to-left text reads
// right, and no bubble reorders the page around it.
export function unreordered(s) {
  return visible(s, true, BIDI);
}

// shown renders a JSON value (or JSON text) for a <pre> as pretty does,
// with visible's escapes.
export function shown(v) {
  if (typeof v === 'string') {
    try {
      v = JSON.parse(v);
    } catch {
      return visible(v);
    }
  }
  return v === undefined ? [] : visible(JSON.stringify(v, null, 2), true);
}

// pretty renders a JSON value for a <pre>.
export function pretty(v) {
  if (v === undefined) return '';
  if (typeof v === 'string') {
    try {
      return JSON.stringify(JSON.parse(v), null, 2);
    } catch {
      return v;
    }
  }
  return JSON.stringify(v, null, 2);
}

export function duration(ms) {
  if (!(ms >= 0)) return '—';
  if (ms < 1) return '<1 ms';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}

const timeFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'medium' });

export function when(iso) {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) || d.getFullYear() < 2 ? '' : timeFmt.format(d);
}
