// @ts-check
// Contacts: /contacts/import, a CSV file read in the browser and sent in chunks to
// POST /v1/contacts/bulk, with a column mapping, progress and the failed rows as a CSV.
import { h, append, replace, table, num, alertBox, errorText, uid, section, opt } from './dom.js';
import { api, cachedGet, forgetCached as forget, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */

// ---------------------------------------------------------------- CSV

/**
 * RFC 4180: quoted fields, "" inside quotes, commas and newlines inside quotes, CRLF or LF.
 * @param {string} text
 * @returns {string[][]}
 */
export function parseCsv(text) {
  /** @type {string[][]} */
  const rows = [];
  /** @type {string[]} */
  let row = [];
  let cell = '';
  let quoted = false;
  let i = 0;
  if (text.charCodeAt(0) === 0xfeff) i = 1;
  for (; i < text.length; i++) {
    const ch = text[i];
    if (quoted) {
      if (ch === '"') {
        if (text[i + 1] === '"') { cell += '"'; i++; } else quoted = false;
      } else cell += ch;
    } else if (ch === '"') quoted = true;
    else if (ch === ',') { row.push(cell); cell = ''; }
    else if (ch === '\n' || ch === '\r') {
      if (ch === '\r' && text[i + 1] === '\n') i++;
      row.push(cell); cell = '';
      rows.push(row); row = [];
    } else cell += ch;
  }
  if (cell !== '' || row.length) { row.push(cell); rows.push(row); }
  return rows.filter((r) => r.length > 1 || r[0] !== '');
}

/** @param {string} v */
const csvCell = (v) => (/[",\r\n]/.test(v) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
/** @param {string[][]} rows */
const toCsv = (rows) => rows.map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';

// ---------------------------------------------------------------- /contacts/import

/** @type {Array<[string, string, RegExp]>} */
const TARGETS = [
  ['firstName', 'First name', /^(first|given|fore)[ _-]?name$|^first$|^vorname$|^prénom$/],
  ['lastName', 'Last name', /^(last|family|sur)[ _-]?name$|^surname$|^last$|^nachname$/],
  ['number', 'Phone number', /phone|mobile|^(tel|telephone|cell|number|phone[ _-]?number|msisdn)$/],
  ['email', 'Email', /e-?mail/],
  ['carrier', 'Carrier', /^carrier$/],
  ['tagNames', 'Tags (comma-separated)', /^tags?$|labels?/],
  ['note', 'First note', /^notes?$|^comments?$/],
];
const CHUNK = 1000;

/**
 * What a column holds, by its header: a custom field, else one of TARGETS not taken yet, else ''.
 * @param {string} header @param {Set<string>} used @param {Json[]} fields the custom fields
 */
function guess(header, used, fields) {
  const k = header.trim().toLowerCase();
  for (const f of fields) if (k === f.name.toLowerCase() || k === f.label.toLowerCase()) return `cf:${f.name}`;
  for (const [v, label, re] of TARGETS) if (!used.has(v) && (re.test(k) || k === v.toLowerCase() || k === label.toLowerCase())) return v;
  return '';
}

/** A cell as its custom field's type wants it. @param {Json | undefined} f @param {string} raw */
function cellValue(f, raw) {
  if (!f) return raw;
  if (f.type === 'number' && raw !== '' && !Number.isNaN(Number(raw))) return Number(raw);
  if (f.type === 'boolean' && /^(true|yes|y|1)$/i.test(raw)) return true;
  if (f.type === 'boolean' && /^(false|no|n|0)$/i.test(raw)) return false;
  return raw;
}

/** @param {PageContext} ctx */
export function importPage({ view, signal }) {
  const input = h('input', { type: 'file', id: uid('csv'), accept: '.csv,text/csv', 'aria-describedby': 'csv-hint' });
  const work = h('div');
  view.append(
    h('p', { class: 'lead' }, 'Add many contacts at once from a CSV file. The file is read in your browser; each row becomes a contact.'),
    h('div', { class: 'card import-pick' },
      h('div', { class: 'field' }, h('label', { for: input.id }, 'CSV file'), input,
        h('p', { class: 'hint', id: 'csv-hint' }, 'The first row names the columns. A phone number is required on every row; numbers already in the team are refused.'))),
    work);
  input.addEventListener('change', async () => {
    const file = input.files?.[0];
    if (!file) return replace(work);
    replace(work, h('p', { class: 'muted', 'aria-busy': 'true' }, 'Reading the file…'));
    try {
      const rows = parseCsv(await file.text());
      if (rows.length < 2) throw new Error('The file has no rows under its header.');
      /** @type {Json[]} */
      const fields = await cachedGet('/v1/contacts/custom-fields').catch(() => []);
      if (!signal.aborted) replace(work, mapping(file.name, rows[0], rows.slice(1), fields, signal));
    } catch (err) {
      replace(work, alertBox(`Could not read ${file.name}: ${errorText(err)}`));
    }
  });
}

/**
 * The columns with what each maps to, the first rows, and the Import button.
 * @param {string} fileName @param {string[]} header @param {string[][]} rows under the header
 * @param {Json[]} fields the custom fields @param {AbortSignal} signal
 */
function mapping(fileName, header, rows, fields, signal) {
  /** @type {Set<string>} */
  const used = new Set();
  const choices = [opt('', 'Ignore'), ...TARGETS.map(([v, t]) => opt(v, t)), ...fields.map((f) => opt(`cf:${f.name}`, `Custom: ${f.label}`))];
  const selects = header.map((name, i) => {
    const g = guess(name, used, fields);
    if (g) used.add(g);
    return h('select', { id: uid('map'), class: 'compact', 'aria-label': `Column ${i + 1} “${name || 'untitled'}” maps to`, value: g },
      choices.map(([v, t]) => h('option', { value: v }, t)));
  });
  const preview = rows.slice(0, 5);
  const err = h('div');
  const out = h('div');
  const start = h('button', { type: 'button', class: 'btn primary' }, `Import ${num(rows.length)} contacts`);
  start.addEventListener('click', async () => {
    replace(err);
    const map = selects.map((s) => s.value);
    const dup = map.filter((v, i) => v && map.indexOf(v) !== i);
    if (!map.includes('number')) return replace(err, alertBox('Choose the column that holds the phone number.'));
    if (dup.length) return replace(err, alertBox(`Two columns map to the same field (${dup.join(', ')}).`));
    start.disabled = true;
    selects.forEach((s) => { s.disabled = true; });
    await runImport(header, rows, map, fields, out, signal);
  });
  return [
    section(`Columns of ${fileName}`,
      h('p', { class: 'muted' }, `${num(rows.length)} rows. Choose what each column holds; the first rows are shown under it.`),
      h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Columns and preview' },
        h('table', { class: 'dense import-preview' },
          h('caption', { class: 'sr-only' }, 'Columns, their mapping and the first rows'),
          h('thead', null,
            h('tr', null, header.map((n) => h('th', { scope: 'col' }, n || h('span', { class: 'muted' }, '(untitled)')))),
            h('tr', { class: 'map-row' }, selects.map((s) => h('td', null, s)))),
          h('tbody', null, preview.map((r) => h('tr', null, header.map((_, i) => h('td', null, r[i] ?? '')))))))),
    err,
    h('div', { class: 'form-actions import-go' }, start),
    out,
  ];
}

/**
 * A row as a contact of POST /v1/contacts/bulk.
 * @param {string[]} r @param {string[]} map what each column maps to ('' for none) @param {Json[]} fields
 */
function rowToContact(r, map, fields) {
  /** @type {Json} */
  const c = {};
  map.forEach((target, i) => {
    const raw = (r[i] ?? '').trim();
    if (!target || raw === '') return;
    if (target === 'tagNames') c.tagNames = raw.split(/[,;|]/).map((t) => t.trim()).filter(Boolean);
    else if (target.startsWith('cf:')) {
      const name = target.slice(3);
      (c.customFields ||= {})[name] = cellValue(fields.find((f) => f.name === name), raw);
    } else c[target] = raw;
  });
  return c;
}

/** @param {number} ms @param {AbortSignal} signal @returns {Promise<void>} */
const sleep = (ms, signal) => new Promise((res) => {
  const t = setTimeout(res, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); res(); }, { once: true });
});

/**
 * Sends the rows in chunks, with progress; then the summary, and the failed rows as a CSV.
 * @param {string[]} header @param {string[][]} rows @param {string[]} map @param {Json[]} fields
 * @param {HTMLElement} out @param {AbortSignal} signal
 */
async function runImport(header, rows, map, fields, out, signal) {
  const bar = h('progress', { max: rows.length, value: 0, id: uid('prog') });
  const status = h('p', { role: 'status', class: 'import-status' }, 'Starting…');
  replace(out, section('Import', h('label', { for: bar.id }, 'Progress'), bar, status));
  let created = 0;
  /** @type {Array<{row: number, code: string, reason: string}>} */
  const failed = []; // {row: index in rows, code, reason}
  for (let at = 0; at < rows.length && !signal.aborted;) {
    const chunk = rows.slice(at, at + CHUNK);
    status.textContent = `Sending rows ${num(at + 1)} to ${num(at + chunk.length)} of ${num(rows.length)}…`;
    let res;
    try {
      res = await api('POST', '/v1/contacts/bulk', { contacts: chunk.map((r) => rowToContact(r, map, fields)) });
    } catch (err) {
      if (err instanceof ApiError && err.status === 429) {
        for (let s = err.retryAfter || 10; s > 0 && !signal.aborted; s--) {
          status.textContent = `The server asks us to slow down: waiting ${s} s, then sending rows ${num(at + 1)}–${num(at + chunk.length)} again.`;
          await sleep(1000, signal);
        }
        continue;
      }
      replace(out, alertBox(`The import stopped at row ${num(at + 1)}: ${errorText(err)} ${created ? `${num(created)} contacts were created before it.` : ''}`));
      return;
    }
    created += (res.created || []).length;
    for (const f of res.failed || []) {
      /** @type {import('./api.js').ErrorDetail[]} */
      const details = f.details || [];
      const reason = details.filter((d) => d.field !== 'contactId').map((d) => `${d.field} ${d.message}`).join('; ');
      failed.push({ row: at + f.index, code: f.code, reason: reason ? `${f.error}: ${reason}` : f.error });
    }
    at += chunk.length;
    bar.value = at;
    status.textContent = `${num(at)} of ${num(rows.length)} rows sent.`;
  }
  forget();
  if (signal.aborted) return;
  const summary = h('h2', { tabindex: '-1' }, `${num(created)} created, ${num(failed.length)} failed`);
  /** @type {import('./dom.js').Child[]} */ 
  const parts = [h('div', { class: ['card', failed.length ? 'import-done warn' : 'success'] }, summary,
    h('p', null, h('a', { href: '/contacts' }, 'Go to the contacts')))];
  if (failed.length) {
    const blob = new Blob([toCsv([[...header, 'error'], ...failed.map((f) => [...header.map((_, i) => rows[f.row][i] ?? ''), f.reason])])], { type: 'text/csv' });
    const href = URL.createObjectURL(blob);
    signal.addEventListener('abort', () => URL.revokeObjectURL(href), { once: true });
    parts.push(section('Failed rows',
      h('p', null, h('a', { class: 'btn secondary', href, download: 'failed-rows.csv' }, 'Download failed rows (CSV)')),
      table(['Row', ...header.slice(0, 3), 'Reason'], failed.map((f) => h('tr', null,
        h('td', { class: 'num' }, num(f.row + 2)),
        header.slice(0, 3).map((_, i) => h('td', null, rows[f.row][i] ?? '')),
        h('td', null, f.reason))), { caption: 'Failed rows and why', dense: true })));
  }
  status.textContent = `Done: ${num(rows.length)} rows sent.`;
  append(out, parts);
  summary.focus();
}
