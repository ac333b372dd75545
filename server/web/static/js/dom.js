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
