// @ts-check
// DOM helpers. Every value from the API reaches the page through h() (createElement,
// text nodes, setAttribute): never through innerHTML, so a name such as
// `<img src=x onerror=...>` is shown as text.

/**
 * What h() and append() take as children: nodes, text (numbers too), nested arrays; null,
 * undefined and false are left out, so that `cond && h(...)` works.
 * @typedef {Node | string | number | boolean | null | undefined | any[]} Child
 */
/** Attributes of h(): `on*` functions are listeners, `class` a string or an array, the rest attributes. @typedef {Record<string, any>} Attrs */

const UNSAFE = new Set(['innerHTML', 'outerHTML', 'style', 'srcdoc']);
// The one data: URL let through: an image in an <img> (a QR code), which cannot run script there.
const IMAGE_DATA = /^data:image\/(png|svg\+xml);base64,[A-Za-z0-9+/=]+$/;

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  let value;
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (UNSAFE.has(k)) throw new Error(`h(): "${k}" is not allowed`);
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2).toLowerCase(), v);
    else if (k === 'class') el.className = Array.isArray(v) ? v.filter(Boolean).join(' ') : v;
    else if (k === 'value') value = v; // after the children, so that a <select> has its options
    else if (k === 'checked' || k === 'selected') /** @type {any} */ (el)[k] = Boolean(v);
    else if ((k === 'href' || k === 'src' || k === 'action') && /^\s*(javascript|data|vbscript):/i.test(String(v))
      && !(tag === 'img' && k === 'src' && IMAGE_DATA.test(String(v))))
      throw new Error(`h(): refused URL in "${k}"`);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  if (value !== undefined) { // as the default too, so that form.reset() comes back to it
    const control = /** @type {HTMLInputElement & HTMLSelectElement} */ (/** @type {unknown} */ (el));
    if (tag === 'select') for (const o of control.options) o.defaultSelected = o.value === String(value);
    else if ('defaultValue' in control) control.defaultValue = String(value);
    control.value = String(value);
  }
  return el;
}

/**
 * @template {Element} E
 * @param {E} el
 * @param {Child[]} children
 * @returns {E}
 */
export function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/**
 * Replaces the children of `el`.
 * @template {Element} E
 * @param {E} el
 * @param {...Child} children
 * @returns {E}
 */
export function replace(el, ...children) {
  el.replaceChildren();
  return append(el, children);
}

// ---- navigation (the router in app.js registers itself) ----

/**
 * What the router (app.js) gives every page: `page(ctx)`.
 * @typedef {object} PageContext
 * @property {HTMLElement} view the element under the page's <h1> that the page fills
 * @property {string[]} params the captures of the route's path, decoded
 * @property {URLSearchParams} query the address's query (filters, sort, page)
 * @property {AbortSignal} signal aborted when another page is shown
 */

/** @typedef {(how: {focus?: boolean}) => void} Renderer */
/** @type {Renderer} */
let renderer = () => {};
/** @param {Renderer} fn */
export function onNavigate(fn) { renderer = fn; }
/**
 * Shows the page at `url` (a path of this site).
 * @param {string} url
 * @param {{replace?: boolean}} [how] replace: no new history entry
 */
export function navigate(url, { replace: r = false } = {}) {
  history[r ? 'replaceState' : 'pushState'](null, '', url);
  renderer({ focus: true });
}

/** Moves the focus to the page's title (after what had it was removed, e.g. a deleted row). */
export function focusTitle() {
  /** @type {HTMLElement | null} */ (document.querySelector('main h1'))?.focus();
}

// ---- formatting ----

const dateFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const dayFmt = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium' });
const numFmt = new Intl.NumberFormat();

/**
 * A <time> of an ISO date ("—" when there is none).
 * @param {string | null | undefined} iso
 * @param {{day?: boolean, empty?: string}} [how] day: the date only
 */
export function time(iso, { day = false, empty = '—' } = {}) {
  if (!iso) return h('span', { class: 'muted' }, empty);
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  return h('time', { datetime: d.toISOString(), title: d.toISOString() }, (day ? dayFmt : dateFmt).format(d));
}

/** @param {unknown} n */
export const num = (n) => (typeof n === 'number' ? numFmt.format(n) : '—');
/** A person's name, else their e-mail. @param {{firstName?: string, lastName?: string, email?: string, [key: string]: unknown} | null | undefined} u */
export const fullName = (u) => [u?.firstName, u?.lastName].filter(Boolean).join(' ') || u?.email || '—';
/** @param {unknown} s */
export const cap = (s) => (s ? String(s)[0].toUpperCase() + String(s).slice(1) : '');
/** "1 entry", "3 entries". @type {(n: number, one: string, many?: string) => string} */
export const plural = (n, one, many = `${one}s`) => `${num(n)} ${n === 1 ? one : many}`;
/**
 * A contact's name wherever it is shown: its names, else its e-mail, else its number.
 * @param {{firstName?: string | null, lastName?: string | null, email?: string | null, number?: string | null, [key: string]: unknown} | null | undefined} c
 */
export const contactName = (c) => [c?.firstName, c?.lastName].filter(Boolean).join(' ') || c?.email || (c?.number && phoneText(c.number)) || 'Unnamed contact';
// Country calling codes of two digits (ITU E.164 assignments); 1 and 7 are the one-digit ones,
// every other code has three digits. Enough to split any E.164 number into code and rest.
const CC2 = new Set(('20 27 30 31 32 33 34 36 39 40 41 43 44 45 46 47 48 49 51 52 53 54 55 56 57 58 60 61 62 63 64 65 66 '
  + '81 82 84 86 90 91 92 93 94 95 98').split(' '));

/** Splits digits into groups of the given sizes (the last takes the rest). @param {string} d @param {number[]} sizes */
function groups(d, sizes) {
  const out = [];
  let i = 0;
  for (const [k, n] of sizes.entries()) {
    if (i >= d.length) break;
    const take = k === sizes.length - 1 ? d.length - i : n;
    out.push(d.slice(i, i + take));
    i += take;
  }
  return out;
}

/** Threes, with a four at the end rather than a lone digit: 7 → 3 4, 8 → 4 4, 10 → 3 3 4. @param {string} d */
function genericGroups(d) {
  if (d.length <= 4) return [d];
  if (d.length === 7) return groups(d, [3, 4]);
  if (d.length === 8) return groups(d, [4, 4]);
  const out = [];
  for (let i = 0; i < d.length; i += 3) out.push(d.slice(i, i + 3));
  if (out.length > 1 && out[out.length - 1].length === 1) out.splice(-2, 2, out[out.length - 2] + out[out.length - 1]);
  return out;
}

/**
 * How a country's national number is grouped, for the countries customers call most.
 * @type {Record<string, (national: string) => string[] | null>}
 */
const NATIONAL = {
  1: (n) => (n.length === 10 ? groups(n, [3, 3, 4]) : null), // +1 415 555 0132
  44: (n) => (n.length !== 10 ? null : /^2/.test(n) ? groups(n, [2, 4, 4]) : groups(n, [4, 6])), // +44 20 7946 0958, +44 7700 900123
  33: (n) => (n.length === 9 ? groups(n, [1, 2, 2, 2, 2]) : null), // +33 1 23 45 67 89
  34: (n) => (n.length === 9 ? groups(n, [3, 3, 3]) : null), // +34 612 345 678
  39: (n) => (n.length >= 9 ? groups(n, [3, 3, 4]) : null), // +39 312 345 6789
  49: (n) => (/^1[5-7]/.test(n) ? groups(n, [3, 20]) : /^[3-9]0|^89/.test(n) ? groups(n, [2, 20]) : null), // +49 151 23456789, +49 30 1234567
  31: (n) => (n.length === 9 ? (/^6/.test(n) ? groups(n, [1, 8]) : groups(n, [2, 3, 4])) : null), // +31 6 12345678
  61: (n) => (n.length === 9 ? (/^4/.test(n) ? groups(n, [3, 3, 3]) : groups(n, [1, 4, 4])) : null), // +61 412 345 678, +61 2 9876 5432
  64: (n) => (n.length >= 8 ? (/^2/.test(n) ? groups(n, [2, 3, 20]) : groups(n, [1, 3, 20])) : null),
  353: (n) => (n.length === 9 ? (/^8/.test(n) ? groups(n, [2, 3, 4]) : groups(n, [1, 3, 4])) : null), // +353 87 123 4567
  91: (n) => (n.length === 10 ? groups(n, [5, 5]) : null), // +91 98765 43210
  7: (n) => (n.length === 10 ? groups(n, [3, 3, 2, 2]) : null), // +7 912 345 67 89
  52: (n) => (n.length === 10 ? groups(n, [2, 4, 4]) : null), // +52 55 1234 5678
  55: (n) => (n.length >= 10 ? groups(n, [2, 5, 4]) : null), // +55 11 91234 5678
  27: (n) => (n.length === 9 ? groups(n, [2, 3, 4]) : null), // +27 82 123 4567
};

/**
 * A phone number as people read it, in international format: "+14155550132" → "+1 415 555
 * 0132", "+442079460958" → "+44 20 7946 0958"; countries without a rule here are grouped in
 * threes after their code. Anything that is not E.164 (+ and 8 to 15 digits) is shown as it
 * is. Only for showing: links (`tel:`), copies and the API keep the E.164 form.
 * @param {string | null | undefined} number
 */
export function phoneText(number) {
  const raw = String(number ?? '');
  if (!/^\+[1-9]\d{7,14}$/.test(raw)) return raw;
  const d = raw.slice(1);
  const cc = /^[17]/.test(d) ? d.slice(0, 1) : CC2.has(d.slice(0, 2)) ? d.slice(0, 2) : d.slice(0, 3);
  const national = d.slice(cc.length);
  const parts = NATIONAL[cc]?.(national) || genericGroups(national);
  return `+${cc} ${parts.join(' ')}`;
}

/**
 * A phone number shown for people (phoneText), its E.164 form as the title and, when `link`,
 * a `tel:` link with the E.164 number.
 * @param {string | null | undefined} number
 * @param {{link?: boolean, className?: string}} [how]
 */
export function phone(number, { link = false, className = 'phone' } = {}) {
  const text = phoneText(number);
  if (link && /^\+[1-9]\d{7,14}$/.test(String(number))) return h('a', { class: className, href: `tel:${number}`, title: number }, text);
  return h('span', { class: className, title: text !== number ? number : null }, text);
}

/** A path segment: `/v1/contacts/${enc(id)}`. */
export const enc = encodeURIComponent;

let ids = 0;
/** An id unique in the page: uid('name') → 'name-7'. */
export const uid = (p = 'f') => `${p}-${++ids}`;

// ---- small components ----

/**
 * @param {Child} message
 * @param {{kind?: string, action?: Child}} [options] kind: error (role=alert), success, info...
 */
export function alertBox(message, { kind = 'error', action } = {}) {
  return h('div', { class: ['alert', kind], role: kind === 'error' ? 'alert' : 'status' },
    h('p', null, message), action);
}

/**
 * What a failure may carry: an ApiError (api.js) has all of it, another Error its message.
 * @typedef {{message?: string, hint?: string, details?: import('./api.js').ErrorDetail[]}} Failure
 */

/**
 * The words of an error (an ApiError's message and its hint): whatever a `catch` caught.
 * @param {unknown} err
 */
export function errorText(err) {
  if (!err) return '';
  const { message, hint } = /** @type {Failure} */ (err);
  const base = message || 'Something went wrong.';
  if (!hint) return base;
  return `${/[.!?]$/.test(base) ? base : `${base}.`} ${hint}`;
}

/**
 * A section that shows "Loading…", then what load() built, or the error with a retry.
 * load(run) may call run() to load again.
 * @param {(run: () => Promise<void>) => Child | Promise<Child>} load
 * @param {string} [label]
 */
export function loader(load, label = 'Loading…') {
  const box = h('div', { class: 'loader', 'aria-busy': 'true' }, h('p', { class: 'muted' }, label));
  const run = async () => {
    box.setAttribute('aria-busy', 'true');
    try {
      replace(box, await load(run));
    } catch (err) {
      // Gone (deleted, or another team's): trying again cannot help, going back can.
      const gone = /** @type {{status?: number}} */ (err)?.status === 404;
      const up = location.pathname.replace(/\/[^/]*$/, '') || '/';
      replace(box, alertBox(errorText(err), {
        action: gone ? h('a', { class: 'btn secondary small', href: up }, 'Back')
          : h('button', { type: 'button', class: 'btn secondary small', onclick: run }, 'Try again'),
      }));
    } finally {
      box.removeAttribute('aria-busy');
    }
  };
  run();
  return box;
}

/**
 * @typedef {object} TableOptions
 * @property {string} [caption] for screen readers (and the region's label)
 * @property {boolean} [dense]
 * @property {string} [empty] shown instead of a table without rows
 * @property {boolean} [cards] on a phone, each row is a card (table.cards in app.css): its cells
 *   wrap, those without a `card-plain` class after their column's name
 */
/**
 * A table in a scrolling region; `null` in headers is a column without a visible title (ACTIONS).
 * @param {Array<string | null>} headers
 * @param {Child[]} rows <tr>s
 * @param {TableOptions} [options]
 */
export function table(headers, rows, { caption, dense, empty = 'Nothing here yet.', cards } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  if (cards) for (const tr of rows) if (tr instanceof HTMLTableRowElement) labelCells(tr, headers);
  // Focusable, so that a table wider than the screen scrolls by keyboard too.
  return h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': caption },
    h('table', { class: [dense && 'dense', cards && 'cards'].filter(Boolean).join(' ') || null },
      caption && h('caption', { class: 'sr-only' }, caption),
      h('thead', null, h('tr', null, headers.map((t) => h('th', { scope: 'col' }, t ?? h('span', { class: 'sr-only' }, 'Actions'))))),
      h('tbody', null, rows)));
}

/**
 * Gives each cell of a card row its column's name (a card shows it before the value; the
 * names are the page's own headers, never data).
 * @param {HTMLTableRowElement} tr
 * @param {Array<string | null>} headers
 */
function labelCells(tr, headers) {
  [...tr.children].forEach((cell, i) => {
    const name = headers[i];
    if (name && cell instanceof HTMLElement) cell.dataset.label = name;
  });
}

/**
 * A table of items with an `id` that is updated in place (polling): update(items) rebuilds only
 * the rows whose signature (`sig`, all of the item by default) changed, moves only the rows that
 * changed place, and keeps the focus on the same control of the same row (its data-key, else its
 * link). onChange(before, after) hears of every item that changed.
 * @template {{id: string}} T
 * @param {TableOptions & {headers: Array<string | null>, rowFor: (item: T) => HTMLTableRowElement, sig?: (item: T) => string, onChange?: (before: T, after: T) => void}} spec
 * @returns {{el: HTMLElement, update: (items: T[]) => void, items: () => T[]}}
 */
export function liveTable({ headers, caption, empty, dense, cards, rowFor, sig = (x) => JSON.stringify(x), onChange }) {
  const box = h('div');
  /** @type {Map<string, {sig: string, tr: HTMLTableRowElement, item: T}>} */
  let rows = new Map(); // id → {sig, tr, item}
  /** @param {T[]} items */
  const update = (items) => {
    const old = rows;
    rows = new Map();
    for (const x of items) {
      const had = old.get(x.id);
      const s = sig(x);
      if (had && had.sig === s) { rows.set(x.id, had); continue; }
      const tr = rowFor(x);
      tr.dataset.id = x.id;
      if (cards) labelCells(tr, headers);
      rows.set(x.id, { sig: s, tr, item: x });
      if (had) onChange?.(had.item, x);
    }
    const trs = [...rows.values()].map((r) => r.tr);
    const tbody = box.querySelector('tbody');
    if (tbody && trs.length) syncRows(tbody, trs);
    else replace(box, table(headers, trs, { caption, empty, dense, cards }));
  };
  return { el: box, update, items: () => [...rows.values()].map((r) => r.item) };
}

/**
 * Reorders tbody to `rows`, moving only the rows that changed place, and keeps the focus.
 * @param {HTMLTableSectionElement} tbody
 * @param {HTMLTableRowElement[]} rows
 */
function syncRows(tbody, rows) {
  const active = document.activeElement instanceof HTMLElement && tbody.contains(document.activeElement) ? document.activeElement : null;
  const activeRow = active?.closest('tr')?.dataset.id;
  const activeKey = active?.dataset.key;
  const activeIsLink = active?.tagName === 'A';
  rows.forEach((tr, i) => { if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null); });
  while (tbody.children.length > rows.length) tbody.lastElementChild?.remove();
  if (activeRow && !tbody.contains(document.activeElement)) {
    const row = rows.find((tr) => tr.dataset.id === activeRow);
    const target = row && ((activeKey && row.querySelector(`[data-key="${CSS.escape(activeKey)}"]`))
      || (activeIsLink ? row.querySelector('a') : row.querySelector('a, button')));
    if (target instanceof HTMLElement) target.focus({ preventScroll: true });
  }
}

/** @param {Child} text @param {string} [kind] */
export function badge(text, kind = '') {
  return h('span', { class: ['badge', kind] }, text);
}

/**
 * A read-only text box holding a secret or link, with a Copy button.
 * @param {string} label
 * @param {string} value
 * @param {Child} [note]
 */
export function copyField(label, value, note) {
  const id = uid('copy');
  const status = h('span', { class: 'copy-status', role: 'status' });
  const input = h('input', { id, type: 'text', readonly: true, class: 'mono', value, spellcheck: 'false' });
  input.addEventListener('focus', () => input.select());
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      status.textContent = 'Copied';
    } catch {
      input.focus();
      input.select();
      status.textContent = 'Press Ctrl+C (⌘C) to copy';
    }
    setTimeout(() => { status.textContent = ''; }, 4000);
  };
  return h('div', { class: 'field copy-field' },
    h('label', { for: id }, label),
    h('div', { class: 'copy-row' }, input,
      h('button', { type: 'button', class: 'btn secondary', onclick: copy }, 'Copy'), status),
    note && h('p', { class: 'hint' }, note));
}

// ---- forms ----

/**
 * An option of a select field(): [value, text].
 * @param {string} value
 * @param {string} text
 * @returns {[string, string]}
 */
export const opt = (value, text) => [value, text];

/**
 * @typedef {{name: string, label: Child, type?: string, options?: string[][], hint?: Child, value?: any, [attribute: string]: any}} FieldSpec
 */
/**
 * A form field. spec: {name, label, type, options: [[value, text]], hint, ...attributes}.
 * Its error message sits below it (filled from the API's details[].field).
 * @param {FieldSpec} spec
 */
export function field({ name, label, type = 'text', options, hint, value, maxlength, ...attrs }) {
  const id = uid(name);
  const hintId = hint ? `${id}-hint` : null;
  const errId = `${id}-error`;
  const describedby = [hintId, errId].filter(Boolean).join(' ');
  const control = type === 'select'
    ? h('select', { id, name, 'aria-describedby': describedby, value, ...attrs },
      (options ?? []).map(([v, t]) => h('option', { value: v }, t)))
    : h('input', { id, name, type, 'aria-describedby': describedby, value, ...attrs });
  if (maxlength != null && control instanceof HTMLInputElement) limitLength(control, Number(maxlength));
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint && h('p', { class: 'hint', id: hintId }, hint),
    h('p', { class: 'field-error', id: errId, hidden: true }));
}

/**
 * A <textarea> field shaped like field() (label, hint, error slot last in aria-describedby), so
 * that showFormError puts errors beside it. `note` is an element shown under the hint (a live
 * count) and described too; `wrap` a class of the field.
 * @param {{name: string, label: Child, hint?: Child, note?: HTMLElement | null, wrap?: string, value?: any, rows?: number | null, [attribute: string]: any}} spec
 */
export function areaField({ name, label, hint, note, wrap, value, rows = 3, maxlength, ...attrs }) {
  const id = uid(name);
  const hintId = hint ? `${id}-hint` : null;
  const noteId = note ? `${id}-note` : null;
  const errId = `${id}-error`;
  if (note && noteId) note.id = noteId;
  const control = h('textarea', { id, name, rows, 'aria-describedby': [hintId, noteId, errId].filter(Boolean).join(' '), value, ...attrs });
  if (maxlength != null) limitLength(control, Number(maxlength));
  return h('div', { class: ['field', wrap] },
    h('label', { for: id }, label),
    control,
    hint && h('p', { class: 'hint', id: hintId }, hint),
    note,
    h('p', { class: 'field-error', id: errId, hidden: true }));
}

/** Characters as the API counts them (code points, not UTF-16 units). @param {string} text */
export const charCount = (text) => [...text].length;

/**
 * The length limit of a field, said rather than enforced by `maxlength` (which cuts pasted text
 * without a word): over `max` characters the field is invalid, with "At most N characters"
 * beside it as soon as it is typed or pasted, and form() refuses to send it. Leading and
 * trailing spaces do not count (form() trims them before sending).
 * @param {HTMLInputElement | HTMLTextAreaElement} control
 * @param {number} max
 */
export function limitLength(control, max) {
  control.dataset.maxChars = String(max);
  const check = () => {
    const n = charCount(control.type === 'password' ? control.value : control.value.trim());
    const message = n > max ? `At most ${num(max)} characters (this has ${num(n)}).` : '';
    control.setCustomValidity(message);
    if (message) {
      setFieldError(control, message);
      control.dataset.tooLong = 'true';
    } else if (control.dataset.tooLong) {
      delete control.dataset.tooLong;
      setFieldError(control, '');
    }
  };
  control.addEventListener('input', check);
  // The first check once the field is in the page (its error line must exist).
  queueMicrotask(() => { if (control.value) check(); });
}

/**
 * Shows `message` beside a form control, or takes its error away when it is empty.
 * @param {Element} control @param {string} message
 */
export function setFieldError(control, message) {
  const last = control.getAttribute('aria-describedby')?.split(' ').pop();
  // Its error line, by id, or before it is in the document, beside it in its field.
  const err = (last && (document.getElementById(last) || control.closest('.field')?.querySelector(`[id="${CSS.escape(last)}"]`)));
  if (!err) return;
  if (message) {
    control.setAttribute('aria-invalid', 'true');
    err.textContent = message;
    err.hidden = false;
  } else {
    control.removeAttribute('aria-invalid');
    err.textContent = '';
    err.hidden = true;
  }
}

/**
 * Shows an ApiError on a form: beside each field named by details[].field, the rest above the button.
 * @param {HTMLFormElement} formEl a form of form(), with its .form-alert
 * @param {unknown} err what a `catch` caught: an ApiError, or another Error (its message only)
 */
export function showFormError(formEl, err) {
  const alertSlot = /** @type {Element} */ (formEl.querySelector('.form-alert'));
  const { details } = /** @type {Failure} */ (err);
  const rest = [];
  let first = null;
  // The labels the person sees, by the API's names of the fields: a message that names another
  // field ("must not be more than maxDuration") says its label instead.
  /** @type {Map<string, string>} */
  const labels = new Map();
  for (const c of /** @type {Iterable<HTMLInputElement>} */ (formEl.elements)) {
    const text = c.name && c.id && formEl.querySelector(`label[for="${CSS.escape(c.id)}"]`)?.textContent;
    if (text && !labels.has(c.name)) labels.set(c.name, text);
  }
  /** @param {string} text */
  const speak = (text) => String(text ?? '').replace(/\b[a-z]+(?:[A-Z][a-z0-9]*)+\b/g, (word) => labels.get(word) ?? word);
  for (const d of details || []) {
    const name = String(d.field || '');
    const control = /** @type {HTMLInputElement | null} */ (formEl.elements.namedItem(name) || formEl.elements.namedItem(name.split(/[./]/).pop() ?? ''));
    if (control && control.getAttribute && control.getAttribute('aria-describedby')) {
      const label = formEl.querySelector(`label[for="${control.id}"]`)?.textContent;
      const said = speak(d.message);
      const message = label && /^[a-z]/.test(said) ? `${label} ${said}` : said;
      // The API's advice for this field (how to make a password harder to guess), after the message.
      setFieldError(control, d.hint ? `${message}. ${d.hint}` : message);
      first ||= control;
    } else rest.push(d.field ? `${labels.get(name) ?? name}: ${speak(d.message)}` : speak(d.message));
  }
  const text = rest.length || !first ? [errorText(err), ...rest].join(' ') : 'Please correct the marked fields.';
  replace(alertSlot, alertBox(text));
  if (first) first.focus();
}

/**
 * @typedef {object} FormSpec
 * @property {Child} fields
 * @property {Child} submit the button's text
 * @property {(values: Record<string, any>, formEl: HTMLFormElement) => unknown} onSubmit
 * @property {string} [className] stack (default), inline or grid
 * @property {Child} [secondary] beside the button (a Cancel, a link)
 */
/**
 * A form whose submit runs onSubmit(values, formEl) with the button disabled; an ApiError
 * it throws is shown next to its fields. The browser's own checks (required, type=email,
 * minlength) are shown the same way, beside the field.
 * @param {FormSpec} spec
 */
export function form({ fields, submit, onSubmit, className = 'stack', secondary }) {
  const button = h('button', { type: 'submit', class: 'btn primary' }, submit);
  const formEl = h('form', { class: ['form', className], novalidate: true },
    fields,
    h('div', { class: 'form-alert' }),
    h('div', { class: 'form-actions' }, button, secondary));
  formEl.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    replace(/** @type {Element} */ (formEl.querySelector('.form-alert')));
    /** @type {HTMLInputElement | null} */
    let invalid = null;
    for (const c of /** @type {Iterable<HTMLInputElement>} */ (formEl.elements)) {
      if (!c.name || !c.getAttribute('aria-describedby')) continue;
      if (typeof c.value === 'string' && c.type !== 'password' && c.value !== c.value.trim()) c.value = c.value.trim();
      setFieldError(c, c.validity.valid ? '' : c.validationMessage);
      if (!c.validity.valid) invalid ||= c;
    }
    if (invalid) { invalid.focus(); return; }
    const values = Object.fromEntries(new FormData(formEl));
    button.disabled = true;
    formEl.setAttribute('aria-busy', 'true');
    try {
      await onSubmit(values, formEl);
    } catch (err) {
      if (typeof err !== 'object' || err === null || !('status' in err)) console.error(err);
      showFormError(formEl, err);
    } finally {
      button.disabled = false;
      formEl.removeAttribute('aria-busy');
    }
  });
  return formEl;
}

// ---- confirmation dialog ----

/**
 * A modal <dialog>: confirm runs action(); an error it throws stays in the dialog.
 * Resolves true when the action succeeded, false when cancelled.
 */
/**
 * Shows the <dialog> that build(close) makes as a modal; close(result) removes it (once) and
 * resolves the promise with result. Escape is close(false).
 * @param {(close: (result: boolean) => void) => HTMLDialogElement} build
 * @returns {Promise<boolean>}
 */
function modal(build) {
  return new Promise((resolve) => {
    let done = false;
    /** @type {HTMLDialogElement} */
    let dlg;
    /** @param {boolean} result */
    const close = (result) => {
      if (done) return;
      done = true;
      dlg.close();
      dlg.remove();
      resolve(result);
    };
    dlg = build(close);
    dlg.addEventListener('cancel', (ev) => { ev.preventDefault(); close(false); });
    document.body.append(dlg);
    dlg.showModal();
    /** @type {HTMLElement | null} */ (dlg.querySelector('[data-autofocus]'))?.focus();
  });
}

/**
 * @param {{title: Child, body: Child, confirm: Child, danger?: boolean, action: () => unknown}} spec
 */
export function confirmDialog({ title, body, confirm, danger = true, action }) {
  return modal((close) => {
    const titleId = uid('dlg');
    const errSlot = h('div');
    const ok = h('button', { type: 'button', class: ['btn', danger ? 'danger' : 'primary'] }, confirm);
    const cancel = h('button', { type: 'button', class: 'btn secondary', 'data-autofocus': true, onclick: () => close(false) }, 'Cancel');
    ok.addEventListener('click', async () => {
      ok.disabled = true;
      replace(errSlot);
      try {
        await action();
        close(true);
      } catch (err) {
        replace(errSlot, alertBox(errorText(err)));
        ok.disabled = false;
      }
    });
    return h('dialog', { class: 'dialog', 'aria-labelledby': titleId },
      h('h2', { id: titleId }, title),
      h('p', null, body),
      errSlot,
      h('div', { class: 'form-actions end' }, cancel, ok));
  });
}

/**
 * A modal <dialog> that shows `body` with a Close button; resolves when closed.
 * @param {{title: Child, body: Child}} spec
 */
export function infoDialog({ title, body }) {
  return modal((close) => {
    const titleId = uid('dlg');
    return h('dialog', { class: 'dialog wide', 'aria-labelledby': titleId },
      h('h2', { id: titleId }, title),
      body,
      h('div', { class: 'form-actions end' },
        h('button', { type: 'button', class: 'btn secondary', 'data-autofocus': true, onclick: () => close(false) }, 'Close')));
  });
}

/**
 * A modal <dialog> holding a form; resolves true once onSubmit succeeded, false when cancelled.
 * @param {{title: Child, fields: Child, submit: Child, onSubmit: FormSpec['onSubmit'], className?: string}} spec
 */
export function formDialog({ title, fields, submit, onSubmit, className }) {
  return modal((close) => {
    const titleId = uid('dlg');
    const f = form({
      fields,
      submit,
      onSubmit: async (v, el) => { await onSubmit(v, el); close(true); },
      secondary: h('button', { type: 'button', class: 'btn secondary', onclick: () => close(false) }, 'Cancel'),
    });
    f.querySelector('input, textarea, select')?.setAttribute('data-autofocus', '');
    return h('dialog', { class: ['dialog', className], 'aria-labelledby': titleId }, h('h2', { id: titleId }, title), f);
  });
}

/**
 * A modal <dialog> that shows what load() builds (with a loader), and a Close button; the focus
 * goes back to what had it when the dialog closes.
 * @param {{title: Child, load: (run: () => Promise<void>) => Child | Promise<Child>, className?: string}} spec
 */
export function viewDialog({ title, load, className = '' }) {
  const opener = document.activeElement;
  return modal((close) => {
    const titleId = uid('dlg');
    return h('dialog', { class: ['dialog', className], 'aria-labelledby': titleId },
      h('h2', { id: titleId }, title), loader(load),
      h('div', { class: 'form-actions end' },
        h('button', { type: 'button', class: 'btn secondary', 'data-autofocus': true, onclick: () => close(true) }, 'Close')));
  }).then(() => { if (opener instanceof HTMLElement && opener.isConnected) opener.focus(); });
}

// ---- a polite status message (e.g. "Role updated") ----

/** @type {ReturnType<typeof setTimeout> | undefined} */
let toastTimer;
/** @param {string} message */
export function toast(message) {
  const el = document.getElementById('toast');
  if (!el) return;
  el.textContent = message;
  el.classList.add('show');
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.classList.remove('show'); el.textContent = ''; }, 4000);
}

// ---- shared page parts ----

/**
 * Runs a button's action with the button disabled; an error goes to `slot` (role=alert), or to
 * a toast without one. `failure` is said before the error ("Could not send a test: ...").
 * @param {HTMLButtonElement} btn
 * @param {Element | null} slot emptied when the action starts
 * @param {() => unknown} fn
 * @param {string} [failure]
 */
export async function busy(btn, slot, fn, failure) {
  btn.disabled = true;
  if (slot) replace(slot);
  try {
    await fn();
  } catch (err) {
    const text = failure ? `${failure}: ${errorText(err)}` : errorText(err);
    if (slot) replace(slot, alertBox(text)); else toast(text);
  } finally {
    btn.disabled = false;
  }
}

/**
 * What a page says to a role it is not offered to (api.js `can()` decides).
 * @param {Pick<PageContext, 'view'>} ctx
 * @param {string} team the name of the team acted on (api.js `actingTeam().name`)
 */
export function noAccess({ view }, team) {
  view.append(
    alertBox("You don't have access to this page.", { kind: 'info' }),
    h('p', null, `Ask an owner or an admin of ${team} if you need it. `, h('a', { href: '/' }, 'Go to the overview')));
}

/**
 * A figure in a box: its label, its value large, and a note under it.
 * @param {Child} label @param {Child} value @param {Child} [note] @param {string} [kind] e.g. warn
 */
export function tile(label, value, note, kind) {
  return h('div', { class: ['tile', kind] },
    h('p', { class: 'tile-label' }, label),
    h('p', { class: 'tile-value' }, value),
    note && h('p', { class: 'tile-note' }, note));
}

/** A <section> with its <h2>. @param {Child} title @param {...Child} content */
export const section = (title, ...content) => h('section', { class: 'section' }, h('h2', null, title), content);

/**
 * Paging links for a hosted `pagination` object; hrefFor(page) is the address of a page.
 * @param {{page: number, totalPages: number, totalCount: number} | null | undefined} p
 * @param {(page: number) => string} hrefFor
 */
export function pager(p, hrefFor) {
  if (!p || !p.totalPages || p.totalPages <= 1) {
    return p ? h('p', { class: 'pager muted' }, `${num(p.totalCount)} ${p.totalCount === 1 ? 'entry' : 'entries'}`) : null;
  }
  /** @param {number} page @param {string} text @param {string} rel */
  const link = (page, text, rel) => (page >= 1 && page <= p.totalPages
    ? h('a', { class: 'btn secondary small', href: hrefFor(page), rel }, text)
    : h('span', { class: 'btn secondary small disabled', 'aria-disabled': 'true' }, text));
  return h('nav', { class: 'pager', 'aria-label': 'Pages' },
    link(p.page - 1, 'Previous', 'prev'),
    h('span', { class: 'muted' }, `Page ${num(p.page)} of ${num(p.totalPages)} · ${num(p.totalCount)} entries`),
    link(p.page + 1, 'Next', 'next'));
}

export const ACTIONS = null; // a column without a visible title (table() names it for screen readers)
/** @param {URLSearchParams} query */
export const pageOf = (query) => Math.max(1, Number.parseInt(query.get('page') || '1', 10) || 1);

/**
 * The address of this page with some query parameters changed (null or '' removes one), so that
 * filters live in the address and a filtered view can be shared: hrefWith({ page: 2 }).
 * @param {Record<string, unknown>} changes
 * @param {string} [base]
 */
export function hrefWith(changes, base = location.pathname + location.search) {
  const url = new URL(base, location.origin);
  for (const [k, v] of Object.entries(changes)) {
    if (v == null || v === '') url.searchParams.delete(k);
    else url.searchParams.set(k, String(v));
  }
  return url.pathname + url.search;
}

/**
 * Runs fn every `ms` while the page that asked is shown: the router aborts `signal` when the
 * page changes. fn's errors are left to fn; a failing run does not stop the next one.
 * @param {number} ms
 * @param {AbortSignal} signal
 * @param {() => unknown} fn
 */
export function every(ms, signal, fn) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const tick = async () => {
    if (signal.aborted) return;
    try { await fn(); } catch { /* the next run tries again */ }
    if (!signal.aborted) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  signal.addEventListener('abort', () => clearTimeout(timer), { once: true });
}

// ---- SVG (sizes and colours as attributes: the CSP refuses inline styles) ----

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * An SVG element: svg('rect', {x: 1, class: 'bar'}, ...children). Values are attributes.
 * @param {string} tag
 * @param {Record<string, unknown> | null} attrs
 * @param {...Child} children
 * @returns {SVGElement}
 */
export function svg(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v != null) el.setAttribute(k, String(v));
  for (const c of children.flat()) if (c != null) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return el;
}

/**
 * A small dot in a colour (a tag's, a stage's), grey when the colour is not #rrggbb.
 * @param {string | null | undefined} color
 * @param {string} className
 */
export function colorDot(color, className) {
  const fill = /^#[0-9a-f]{6}$/i.test(String(color || '')) ? color : '#858d9b';
  return svg('svg', { class: className, width: 10, height: 10, viewBox: '0 0 10 10', 'aria-hidden': 'true' },
    svg('circle', { cx: 5, cy: 5, r: 5, fill }));
}

/**
 * A tag as a chip: its colour, its name, and `extra` (a Remove button).
 * @param {{name: string, color?: string | null}} t
 * @param {...Child} extra
 */
export const tagChip = (t, ...extra) => h('span', { class: 'tag-chip' }, colorDot(t.color, 'tag-dot'), h('span', null, t.name), extra);
