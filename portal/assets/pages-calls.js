// @ts-check
// Calls and chats: /calls, /calls/{callId}, /chats, /chats/{chatId}.
// Lists keep their filters, sort and page in the address (the filter form is filled from it and
// its submit navigates); a detail page keeps the list's query, so "Back" returns to that page.
import {
  h, replace, field, form, loader, table, badge, time, num, alertBox, errorText, showFormError,
  confirmDialog, toast, navigate, section, pager, pageOf, hrefWith, every, enc, liveTable, phone, phoneText,
} from './dom.js';
import { api, can, withTeam, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./dom.js').FieldSpec} FieldSpec */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').ListAnswer} ListAnswer */

// ---------------------------------------------------------------- shared parts

/** 75 → "1:15", 3725 → "1:02:05". @param {unknown} sec */
function clock(sec) {
  if (typeof sec !== 'number' || !Number.isFinite(sec)) return '—';
  const s = Math.max(0, Math.floor(sec));
  const hh = Math.floor(s / 3600);
  const mm = Math.floor((s % 3600) / 60);
  const ss = String(s % 60).padStart(2, '0');
  return hh ? `${hh}:${String(mm).padStart(2, '0')}:${ss}` : `${mm}:${ss}`;
}

/** A duration for people: "1 min 15 s" (and the clock as its title). @param {unknown} sec */
function duration(sec) {
  if (typeof sec !== 'number') return null;
  const m = Math.floor(sec / 60);
  const text = m ? `${m} min ${sec % 60} s` : `${sec} s`;
  return h('span', { class: 'nowrap', title: clock(sec) }, text);
}

/** @param {unknown} v */
function score(v) {
  if (typeof v !== 'number') return h('span', { class: 'muted' }, '—');
  return v >= 0 && v <= 1 ? `${Math.round(v * 100)}%` : num(v);
}

/** @type {Record<string, string>} */
const STATUS_KIND = { completed: 'cc-ok', 'in-progress': 'accent', active: 'accent', ended: '', 'no-answer': 'warn', failed: 'warn', busy: 'warn' };
/** @param {string} s */
const statusBadge = (s) => badge(String(s || '—').replace(/[-_]/g, ' '), STATUS_KIND[s] ?? '');

// A call's outcome (issue 41), in words: the API's values are for programs.
/** @type {Record<string, string>} */
export const SENTIMENTS = { positive: 'Positive', neutral: 'Neutral', negative: 'Negative', unknown: 'Unknown' };
/** @type {Record<string, string>} */
const SENTIMENT_KIND = { positive: 'cc-ok', negative: 'warn' };
/** @type {Record<string, string>} */
export const REASONS = {
  customer_hangup: 'Customer hung up', agent_hangup: 'Agent hung up', transfer: 'Transferred', voicemail: 'Reached voicemail',
  no_answer: 'No answer', busy: 'Line busy', error: 'Error', other: 'Other reason',
};
/** @param {boolean | null | undefined} ok */
const successText = (ok) => (ok === true ? 'Successful' : ok === false ? 'Not successful' : 'Success unknown');
/** @param {string | null | undefined} s */
const sentimentText = (s) => (s ? `${SENTIMENTS[s] || s} sentiment` : null);
/** @param {string | null | undefined} r */
const reasonText = (r) => (r ? REASONS[r] || r : null);
/** "12 credits" (a call's cost), "—" when unknown. @param {unknown} n */
const credits = (n) => (typeof n === 'number' ? `${num(n)} ${n === 1 ? 'credit' : 'credits'}` : h('span', { class: 'muted' }, '—'));

/** A call's outcome in a list cell: success, sentiment and how it ended, in words. @param {Json} c */
function outcome(c) {
  const a = c.analysis;
  if (!a && !c.disconnectionReason) return h('span', { class: 'muted' }, '—');
  return h('span', { class: 'cc-outcome' },
    a && a.successful != null && badge(successText(a.successful), a.successful ? 'cc-ok' : 'warn'),
    a && a.sentiment && h('span', { class: 'cc-sentiment' }, sentimentText(a.sentiment)),
    c.disconnectionReason && h('span', { class: 'cc-reason' }, reasonText(c.disconnectionReason)));
}

/** @param {Json | null | undefined} a */
const agentLink = (a) => (a ? h('a', { href: `/agents/${enc(a.id)}` }, a.name || a.id) : h('span', { class: 'muted' }, 'None'));

/**
 * The query of a list page (filters, sort, page) that its detail links carry.
 * @param {URLSearchParams} query @param {string[]} keys
 */
function keep(query, keys) {
  const q = new URLSearchParams();
  for (const k of [...keys, 'page']) {
    const v = query.get(k);
    if (v) q.set(k, v);
  }
  const s = q.toString();
  return s ? `?${s}` : '';
}

/**
 * The API's query string for a list: the known keys of the address, then page (and limit).
 * @param {URLSearchParams} query @param {string[]} keys @param {number} page
 */
function apiQuery(query, keys, page) {
  const q = new URLSearchParams();
  for (const k of keys) {
    const v = (query.get(k) || '').trim();
    if (v) q.set(k, v);
  }
  q.set('page', String(page));
  if (!q.has('limit')) q.set('limit', '20');
  return q;
}

/**
 * A filter form filled from the address; its submit navigates to base?<non-default values>.
 * @param {string} base @param {URLSearchParams} query @param {FieldSpec[]} fields
 * @param {Record<string, string>} defaults
 */
function filterForm(base, query, fields, defaults) {
  const keys = fields.map((f) => f.name);
  const active = keys.some((k) => query.get(k) && query.get(k) !== defaults[k]);
  const f = form({
    className: 'grid cc-filters',
    fields: fields.map((spec) => field({ ...spec, value: query.get(spec.name) ?? defaults[spec.name] ?? '' })),
    submit: 'Apply filters',
    secondary: active && h('a', { class: 'btn secondary', href: base }, 'Clear filters'),
    onSubmit: async (v) => {
      const q = new URLSearchParams();
      for (const k of keys) {
        const val = String(v[k] ?? '').trim();
        if (val && val !== defaults[k]) q.set(k, val);
      }
      const s = q.toString();
      navigate(`${base}${s ? `?${s}` : ''}`);
    },
  });
  f.setAttribute('aria-label', 'Filters');
  f.setAttribute('role', 'search');
  return f;
}

/**
 * The filter form folded behind a "Filters" disclosure (a <details>: it does not fill the first
 * screen), with the active filters as chips above the list, each a link to the same page
 * without it. The form opens by itself when the API refuses a filter (its error is beside the
 * field). `ready` (the agents arriving) redraws the chips with the agent's name.
 * @param {HTMLFormElement} formEl
 * @param {URLSearchParams} query
 * @param {FieldSpec[]} fields
 * @param {Record<string, string>} defaults
 * @param {Promise<unknown>} [ready]
 */
function foldedFilters(formEl, query, fields, defaults, ready) {
  const active = fields.filter((f) => query.get(f.name) && query.get(f.name) !== defaults[f.name]);
  const box = h('details', { class: 'cc-filter-box', open: false },
    h('summary', { class: 'btn secondary' }, 'Filters', active.length ? ` (${active.length} active)` : ''),
    formEl);
  const chips = h('ul', { class: 'cc-chips', 'aria-label': 'Active filters' });
  /** @param {string} name */
  const valueText = (name) => {
    const control = formEl.elements.namedItem(name);
    if (control instanceof HTMLSelectElement) return control.selectedOptions[0]?.textContent || query.get(name);
    return query.get(name);
  };
  const draw = () => replace(chips, active.map((f) => {
    const text = `${f.label}: ${valueText(f.name)}`;
    // The name comes from the content (not aria-label, which getByLabel-style lookups of the
    // form's own fields would also find): "Remove the filter Direction: Incoming".
    return h('li', null, h('a', { class: 'cc-chip', href: hrefWith({ [f.name]: null, page: null }) },
      h('span', { class: 'sr-only' }, 'Remove the filter '), h('span', null, text), h('span', { class: 'cc-chip-x', 'aria-hidden': 'true' }, '×')));
  }), active.length > 1 && h('li', null, h('a', { class: 'cc-chip-clear', href: location.pathname }, 'Clear all')));
  draw();
  ready?.then(draw, () => {});
  // A refused filter: show the form, so that the error beside its field is seen.
  formEl.addEventListener('invalid-filters', () => { box.open = true; });
  return h('div', { class: 'cc-filter-bar' }, box, active.length ? chips : null);
}

/**
 * The agents for a filter's select: filled when they arrive; the chosen id stays listed.
 * @param {HTMLFormElement} formEl @param {string | null} chosen
 */
export function fillAgents(formEl, chosen) {
  const select = /** @type {HTMLSelectElement} */ (formEl.elements.namedItem('agentId'));
  if (!select) return Promise.resolve();
  if (chosen) select.append(h('option', { value: chosen }, `Agent ${chosen}`));
  select.value = chosen || '';
  return api('GET', '/v1/agents').then((agents) => {
    const list = (/** @type {Json[] | null} */ (agents) || []).slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
    replace(select, h('option', { value: '' }, 'All agents'), list.map((a) => h('option', { value: a.id }, a.name || a.id)),
      chosen && !list.some((a) => a.id === chosen) && h('option', { value: chosen }, `Agent ${chosen}`));
    select.value = chosen || '';
    for (const o of select.options) o.defaultSelected = o.value === (chosen || '');
  }).catch(() => { /* the select keeps "All agents" and the chosen id */ });
}

/**
 * A list's 400 (filters the API refuses) is shown beside the fields it names, with a way out;
 * other failures go to the loader (with its "Try again").
 * @param {string} path @param {HTMLFormElement} formEl @param {string} base the list without filters
 * @returns {Promise<ListAnswer & {bad?: HTMLElement}>}
 */
async function listOrBadFilters(path, formEl, base) {
  try {
    return await api('GET', path, undefined, { full: true });
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 400) throw err;
    formEl.dispatchEvent(new Event('invalid-filters'));
    if (err.details?.length) showFormError(formEl, err);
    return { bad: alertBox(`These filters are not valid${err.details?.length ? ': correct the marked fields' : ` (${errorText(err)})`}.`, {
      action: h('a', { class: 'btn secondary small', href: base }, 'Clear filters'),
    }) };
  }
}

/** Clicking anywhere on a row follows its first link (the link itself is the keyboard way). @param {MouseEvent} ev */
function rowClick(ev) {
  if (/** @type {Element} */ (ev.target).closest('a, button, input, select, label') || window.getSelection()?.toString()) return;
  const a = /** @type {HTMLElement} */ (ev.currentTarget).querySelector('a[href]');
  if (a) navigate(/** @type {string} */ (a.getAttribute('href')));
}

/** Facts as a list of terms: [term, value] pairs; a false or null pair is left out. @param {Array<[string, Child] | false | null | undefined>} pairs */
function facts(pairs) {
  return h('dl', { class: 'cc-facts' }, pairs.filter((p) => !!p).map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, v ?? '—'))));
}

// ---------------------------------------------------------------- /calls

const CALL_FILTERS = ['search', 'number', 'callType', 'agentId', 'sentiment', 'successful', 'disconnectionReason', 'minDuration', 'maxDuration', 'dateFrom', 'dateTo'];
const CALL_KEYS = [...CALL_FILTERS, 'sortBy', 'sortOrder', 'limit'];
/** @type {Record<string, string>} */
const CALL_DEFAULTS = { callType: 'all', sortBy: 'createdAt', sortOrder: 'desc', limit: '20' };

/** @returns {FieldSpec[]} */
function callFields() {
  return [
    { name: 'search', label: 'Search', type: 'search', maxlength: 200, hint: 'Numbers, transcript or summary', autocomplete: 'off' },
    { name: 'number', label: 'Phone number', type: 'tel', maxlength: 64, hint: 'Either side, any spelling', autocomplete: 'off' },
    { name: 'callType', label: 'Direction', type: 'select', options: [['all', 'Both directions'], ['incoming', 'Incoming'], ['outgoing', 'Outgoing']] },
    { name: 'agentId', label: 'Agent', type: 'select', options: [['', 'All agents']] },
    { name: 'successful', label: 'Success', type: 'select', options: [['', 'Any'], ['true', 'Successful'], ['false', 'Not successful']] },
    { name: 'sentiment', label: 'Sentiment', type: 'select', options: [['', 'Any sentiment'], ...Object.entries(SENTIMENTS)] },
    { name: 'disconnectionReason', label: 'How it ended', type: 'select', options: [['', 'Any way'], ...Object.entries(REASONS)] },
    { name: 'minDuration', label: 'Shortest (seconds)', type: 'number', min: 0, max: 31536000, step: 1, inputmode: 'numeric' },
    { name: 'maxDuration', label: 'Longest (seconds)', type: 'number', min: 0, max: 31536000, step: 1, inputmode: 'numeric' },
    { name: 'dateFrom', label: 'Started on or after', type: 'date' },
    { name: 'dateTo', label: 'Started on or before', type: 'date' },
    { name: 'sortBy', label: 'Sort by', type: 'select', options: [['createdAt', 'Start time'], ['duration', 'Duration'], ['endedAt', 'End time']] },
    { name: 'sortOrder', label: 'Order', type: 'select', options: [['desc', 'Newest / longest first'], ['asc', 'Oldest / shortest first']] },
    { name: 'limit', label: 'Per page', type: 'select', options: [['20', '20'], ['50', '50'], ['100', '100']] },
  ];
}

/** @param {Json} c */
const callKey = (c) => JSON.stringify([c.createdAt, c.type, c.from, c.to, c.agent, c.duration, c.status, c.score, c.flagged, c.favorite, c.spam,
  c.analysis?.successful, c.analysis?.sentiment, c.disconnectionReason]);

/** @param {Json} c a Call @param {string} back the list's query, for the detail's link back */
function callRow(c, back) {
  const incoming = c.type === 'INCOMING';
  const marks = [c.favorite && badge('Favorite', 'accent'), c.flagged && badge('Flagged', 'warn'), c.spam && badge('Spam', 'warn')].filter(Boolean);
  // Direction sits under the time and the two numbers one under the other, so that every
  // column fits a laptop's 1280 px (issue 55); on a phone the row is a card (table.cards).
  return h('tr', { 'data-id': c.id, class: 'cc-row', onclick: rowClick },
    h('th', { scope: 'row', class: 'card-first' }, h('a', { href: `/calls/${enc(c.id)}${back}` }, time(c.createdAt)), ' ',
      h('span', { class: 'cc-dir' }, badge(incoming ? 'Incoming' : 'Outgoing', incoming ? 'cc-in' : 'cc-out'))),
    h('td', { class: 'cc-parties card-wide card-plain' }, h('span', { class: 'cc-party' }, phone(c.from), h('span', { class: 'muted', 'aria-hidden': 'true' }, ' →')),
      h('span', { class: 'sr-only' }, ' to '), ' ', h('span', { class: 'cc-party' }, phone(c.to))),
    h('td', null, c.agent ? c.agent.name : h('span', { class: 'muted' }, '—')),
    h('td', { class: 'num cc-dur' }, c.duration == null ? h('span', { class: 'muted' }, 'ongoing') : clock(c.duration)),
    h('td', { class: 'card-plain' }, statusBadge(c.status), marks.length ? [' ', marks] : null),
    h('td', { class: 'cc-result card-wide card-plain' }, outcome(c)),
    h('td', { class: 'num' }, score(c.score)));
}

/** @param {PageContext} ctx */
export function callList({ view, query, signal }) {
  const page = pageOf(query);
  const q = apiQuery(query, CALL_KEYS, page);
  const back = keep(query, CALL_KEYS);
  const filters = filterForm('/calls', query, callFields(), CALL_DEFAULTS);
  const folded = foldedFilters(filters, query, callFields(), CALL_DEFAULTS, fillAgents(filters, query.get('agentId')));
  // Unchanged rows are kept as they are on a refresh.
  const rows = liveTable({
    headers: ['Time', 'From → To', 'Agent', 'Duration', 'Status', 'Outcome', 'Score'],
    caption: 'Calls', dense: true, cards: true,
    empty: q.toString().replace(/(^|&)(page|limit)=\d+/g, '') ? 'No call matches these filters.' : 'No calls yet. Calls appear here as your agents take and make them.',
    rowFor: (c) => callRow(c, back),
    sig: callKey,
  });
  const results = h('div', { class: 'cc-results' }, rows.el);
  const pagerSlot = h('div');
  const note = h('p', { class: 'muted small cc-live' });
  let last = '';

  /** @param {ListAnswer} res */
  const draw = (res) => {
    rows.update(res.data || []);
    const p = JSON.stringify(res.pagination);
    if (p !== last) { last = p; replace(pagerSlot, pager(res.pagination, (n) => hrefWith({ page: n > 1 ? n : null }))); }
  };
  const list = loader(async () => {
    const res = await listOrBadFilters(`/v1/calls?${q}`, filters, '/calls');
    if (res.bad) return res.bad;
    draw(res);
    if (page === 1) note.textContent = 'This page refreshes itself every 5 seconds.';
    return [results, pagerSlot, note];
  });
  if (page === 1) {
    every(5000, signal, async () => {
      if (list.getAttribute('aria-busy') === 'true' || !results.isConnected) return;
      const res = await api('GET', `/v1/calls?${q}`, undefined, { full: true });
      if (!signal.aborted) draw(res);
    });
  }
  view.append(
    h('p', { class: 'lead' }, 'Phone calls of your agents, newest first. Open one for its transcript, recording and timeline.'),
    folded,
    section('Calls', exportLink(query, { what: 'calls', filters: CALL_FILTERS, defaults: CALL_DEFAULTS }), list));
}

/**
 * "Export CSV": GET /v1/{calls,chats}/export with the list's filters (every matching row, not
 * only this page), a plain link so that the browser streams the file to disk; the session
 * cookie signs it.
 * @param {URLSearchParams} query
 * @param {{what: 'calls' | 'chats', filters: string[], defaults: Record<string, string>}} list
 */
function exportLink(query, { what, filters, defaults }) {
  const q = new URLSearchParams();
  for (const k of filters) {
    const v = (query.get(k) || '').trim();
    if (v && v !== defaults[k]) q.set(k, v);
  }
  const s = q.toString();
  const rows = what === 'calls' ? 'call' : 'chat';
  return h('p', { class: 'cc-export' },
    h('a', { class: 'btn secondary small', href: withTeam(`${what === 'calls' ? '/v1/calls/export' : '/v1/chats/export'}${s ? `?${s}` : ''}`), download: `${what}.csv` }, 'Export CSV'),
    h('span', { class: 'muted small' }, s ? ` Every ${rows} that matches these filters, not only this page.` : ` Every ${rows}, not only this page.`));
}

// ---------------------------------------------------------------- /calls/{id}

/** @param {PageContext} ctx */
export function callDetail({ view, params, query }) {
  const id = params[0];
  const back = `/calls${keep(query, CALL_KEYS)}`;
  view.append(
    h('p', { class: 'cc-back' }, h('a', { href: back }, '← Back to calls')),
    loader(async (again) => callView(await api('GET', `/v1/calls/${enc(id)}`), back, again)));
}

/** @param {Json} c a Call @param {string} back @param {() => void} again */
function callView(c, back, again) {
  const incoming = c.type === 'INCOMING';
  const start = Date.parse(c.createdAt);
  const rowError = h('div', { class: 'cc-row-error' });
  const actions = can('write')
    ? h('div', { class: 'cc-actions', role: 'group', 'aria-label': 'Mark this call' },
      toggle(c, 'favorite', 'Favorite', rowError), toggle(c, 'flagged', 'Flagged', rowError), toggle(c, 'spam', 'Spam', rowError),
      h('button', {
        type: 'button', class: 'btn danger-quiet small cc-delete',
        onclick: async () => {
          const done = await confirmDialog({
            title: 'Delete this call?',
            body: `The call from ${phoneText(c.from)} to ${phoneText(c.to)}, with its transcript, timeline and recording, is deleted. This cannot be undone.`,
            confirm: 'Delete call',
            action: () => api('DELETE', `/v1/calls/${enc(c.id)}`),
          });
          if (done) { toast('Call deleted'); navigate(back); }
        },
      }, 'Delete call'))
    : h('p', { class: 'cc-marks' }, [c.favorite && badge('Favorite', 'accent'), c.flagged && badge('Flagged', 'warn'), c.spam && badge('Spam', 'warn')].filter(Boolean));

  const player = conversation(c, start);
  const summary = c.analysis?.summary || c.summary;
  return [
    c.duration == null && alertBox('This call is in progress: its transcript grows as it goes on.', {
      kind: 'info', action: h('button', { type: 'button', class: 'btn secondary small', onclick: () => again() }, 'Refresh'),
    }),
    h('div', { class: 'card cc-head' },
      facts([
        ['Direction', badge(incoming ? 'Incoming' : 'Outgoing', incoming ? 'cc-in' : 'cc-out')],
        ['From', phone(c.from, { link: true })],
        ['To', phone(c.to, { link: true })],
        ['Agent', agentLink(c.agent)],
        ['Status', statusBadge(c.status)],
        ['Started', time(c.createdAt)],
        ['Ended', time(c.endedAt, { empty: 'In progress' })],
        ['Duration', c.duration == null ? h('span', { class: 'muted' }, 'In progress') : duration(c.duration)],
        ['How it ended', reasonText(c.disconnectionReason) ?? h('span', { class: 'muted' }, '—')],
        ['Cost', credits(c.cost)],
        ['Score', score(c.score)],
      ]),
      actions, rowError),
    section('Summary', summary ? h('p', { class: 'cc-summary' }, summary) : h('p', { class: 'muted' }, 'No summary.')),
    section('Analysis', analysisView(c.analysis)),
    section('Contact', contactBox(c)),
    player,
    section('Timeline', timeline(c.timeline || [], start)),
  ];
}

/** A value of the analysis' custom fields, as text: yes/no, a number, a string, or JSON. @param {unknown} v */
function customValue(v) {
  if (v == null || v === '') return h('span', { class: 'muted' }, '—');
  if (typeof v === 'boolean') return v ? 'Yes' : 'No';
  if (typeof v === 'number') return num(v);
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** The analysis the runtime reported: sentiment, success and the agent's custom fields. @param {Json | null | undefined} a */
function analysisView(a) {
  if (!a) return h('p', { class: 'muted' }, 'No analysis: the runtime has not reported one for this call.');
  const custom = Object.entries(a.custom || {});
  return [
    facts([
      ['Sentiment', a.sentiment ? badge(SENTIMENTS[a.sentiment] || a.sentiment, SENTIMENT_KIND[a.sentiment] ?? '') : '—'],
      ['Success', a.successful == null ? h('span', { class: 'muted' }, 'Unknown') : badge(successText(a.successful), a.successful ? 'cc-ok' : 'warn')],
    ]),
    h('h3', { class: 'cc-sub' }, 'Custom fields'),
    custom.length
      ? h('dl', { class: 'cc-custom' }, custom.map(([k, v]) => h('div', null, h('dt', null, k), h('dd', null, customValue(v)))))
      : h('p', { class: 'muted' }, 'No custom fields: the agent’s post-call analysis asks for none.'),
  ];
}

/**
 * A mark of the call (favorite, flagged, spam) as a toggle button (PATCH).
 * @param {Json} c @param {string} key @param {string} label @param {HTMLElement} errSlot
 */
function toggle(c, key, label, errSlot) {
  const btn = h('button', { type: 'button', class: 'btn secondary small cc-toggle', 'aria-pressed': String(Boolean(c[key])), 'data-flag': key }, label);
  let busy = false;
  btn.addEventListener('click', async () => {
    if (busy) return;
    busy = true;
    btn.setAttribute('aria-busy', 'true');
    replace(errSlot);
    const want = btn.getAttribute('aria-pressed') !== 'true';
    try {
      const r = await api('PATCH', `/v1/calls/${enc(c.id)}`, { [key]: want });
      c[key] = Boolean(r?.[key]);
      btn.setAttribute('aria-pressed', String(c[key]));
      toast(`${label}: ${c[key] ? 'on' : 'off'}`);
    } catch (err) {
      replace(errSlot, alertBox(`Could not change “${label}”: ${errorText(err)}`));
    } finally {
      busy = false;
      btn.removeAttribute('aria-busy');
    }
  });
  return btn;
}

/** The contacts with either number of the call (GET /v1/contacts?number=: any spelling of it). @param {Json} c */
function contactBox(c) {
  /** @type {string[]} */
  const numbers = [...new Set([c.type === 'INCOMING' ? c.from : c.to, c.type === 'INCOMING' ? c.to : c.from].filter(Boolean))];
  return loader(async () => {
    /** @type {Json[]} */
    const found = [];
    await Promise.all(numbers.map(async (n) => {
      const list = await api('GET', `/v1/contacts?number=${enc(n)}&limit=1`).catch((err) => {
        if (err.status === 400) return []; // not a phone number (a SIP address, say): no contact
        throw err;
      });
      for (const x of list || []) if (!found.some((f) => f.id === x.id)) found.push(x);
    }));
    if (!found.length) return h('p', { class: 'muted' }, `No contact has the number ${numbers.map(phoneText).join(' or ')}.`);
    return h('ul', { class: 'cc-contacts' }, found.map((x) => h('li', null,
      h('a', { href: `/contacts/${enc(x.id)}` }, [x.firstName, x.lastName].filter(Boolean).join(' ') || x.email || phoneText(x.number)),
      ' ', phone(x.number, { link: true, className: 'muted nowrap' }),
      x.email ? [' · ', h('span', { class: 'muted' }, x.email)] : null)));
  }, 'Looking for a contact…');
}

/**
 * The recording and the transcript: a line is a button that seeks the audio; the spoken line is marked.
 * @param {Json} c a Call @param {number} start when it started (ms)
 */
function conversation(c, start) {
  /** @type {Array<Json & {at: number}>} */
  const segs = (c.transcript || []).map((/** @type {Json} */ s) => ({ ...s, at: Math.max(0, (Date.parse(s.timestamp) - start) / 1000 || 0) }));
  const url = c.recordingUrl;
  const audioNote = h('div', { class: 'cc-audio-note' });
  const audio = url ? h('audio', { controls: true, preload: 'metadata', src: url, class: 'cc-audio', 'aria-label': 'Recording of the call' }) : null;
  const box = h('ol', { class: 'cc-transcript' });
  const frag = document.createDocumentFragment();
  const lines = segs.map((s, i) => {
    const inner = [
      h('span', { class: 'cc-who' }, s.speaker === 'agent' ? 'Agent' : 'Caller'),
      ' ',
      h('span', { class: 'cc-at', title: new Date(s.timestamp).toISOString() }, clock(s.at)),
      h('span', { class: 'cc-text' }, s.text),
    ];
    const el = audio
      ? h('button', { type: 'button', class: 'cc-bubble', 'data-i': i }, inner)
      : h('div', { class: 'cc-bubble' }, inner);
    frag.append(h('li', { class: ['cc-line', s.speaker === 'agent' ? 'cc-agent' : 'cc-caller'] }, el));
    return el;
  });
  box.append(frag);
  const scroller = h('div', { class: 'cc-scroll', tabindex: '0', role: 'region', 'aria-label': 'Transcript' }, box);

  if (audio) {
    let current = -1;
    /** @param {number} i */
    const mark = (i) => {
      if (i === current) return;
      if (current >= 0) { lines[current].removeAttribute('aria-current'); lines[current].classList.remove('cc-now'); }
      current = i;
      if (i < 0) return;
      const el = lines[i];
      el.setAttribute('aria-current', 'true');
      el.classList.add('cc-now');
      if (!audio.paused) { // keep the spoken line in view inside the transcript box (not the page)
        const top = el.offsetTop;
        if (top < scroller.scrollTop || top + el.offsetHeight > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = Math.max(0, top - scroller.clientHeight / 3);
      }
    };
    /** @param {number} t */
    const at = (t) => { // the last line that started at or before t
      let lo = 0; let hi = segs.length - 1; let ans = -1;
      while (lo <= hi) { const mid = (lo + hi) >> 1; if (segs[mid].at <= t + 0.05) { ans = mid; lo = mid + 1; } else hi = mid - 1; }
      return ans;
    };
    audio.addEventListener('timeupdate', () => mark(at(audio.currentTime)));
    audio.addEventListener('seeked', () => mark(at(audio.currentTime)));
    box.addEventListener('click', (ev) => {
      const b = /** @type {HTMLElement | null} */ (/** @type {Element} */ (ev.target).closest('button[data-i]'));
      if (!b) return;
      const s = segs[Number(b.dataset.i)];
      audio.currentTime = s.at;
      mark(Number(b.dataset.i));
      audio.play().catch(() => { /* the user can press play */ });
    });
    audio.addEventListener('loadedmetadata', () => {
      if (Number.isFinite(audio.duration) && typeof c.duration === 'number' && audio.duration + 2 < c.duration) {
        replace(audioNote, h('p', { class: 'muted small' }, `The recording (${clock(audio.duration)}) is shorter than the call (${clock(c.duration)}): later lines play its end.`));
      }
    });
    audio.addEventListener('error', () => {
      const again = h('button', {
        type: 'button', class: 'btn secondary small',
        onclick: async () => {
          try {
            const fresh = await api('GET', `/v1/calls/${enc(c.id)}`);
            replace(audioNote);
            if (fresh.recordingUrl) { audio.src = fresh.recordingUrl; audio.load(); }
          } catch (err) { replace(audioNote, alertBox(errorText(err))); }
        },
      }, 'Load the recording again');
      replace(audioNote, alertBox('The recording could not be played (its link lasts 15 minutes).', { action: again }));
    });
  }
  return section('Conversation',
    audio ? player(audio, audioNote) : h('p', { class: 'muted' }, 'This call has no recording.'),
    segs.length
      ? [audio && h('p', { class: 'muted small' }, 'Choose a line to play the recording from there.'), scroller]
      : h('p', { class: 'muted' }, 'No transcript.'));
}

/**
 * The recording's player, `#recording` of the call's page: the exported sheets link there, as
 * the recording's own link lasts 15 minutes. Opened by such a link, the page shows it.
 * @param {HTMLAudioElement} audio @param {HTMLElement} note
 */
function player(audio, note) {
  const box = h('div', { class: 'cc-player', id: 'recording' }, audio, note);
  if (location.hash === '#recording') setTimeout(() => box.scrollIntoView({ block: 'center' }), 0);
  return box;
}

/** @param {Json[]} events the call's timeline @param {number} start */
function timeline(events, start) {
  if (!events.length) return h('p', { class: 'muted' }, 'No events.');
  /** @param {unknown} v */
  // In words, as the analysis' values are: "ok: yes", not the program's "true".
  const value = (v) => (typeof v === 'boolean' ? (v ? 'yes' : 'no') : v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v));
  return h('ol', { class: 'cc-timeline' }, events.map((e) => h('li', null,
    h('span', { class: 'cc-at', title: e.at }, `+${clock((Date.parse(e.at) - start) / 1000)}`),
    ' ', h('code', null, e.type), ' ',
    Object.entries(e.data || {}).map(([k, v]) => h('span', { class: 'cc-kv' }, h('span', { class: 'muted' }, `${k}: `), value(v))))));
}

// ---------------------------------------------------------------- /chats

const CHAT_FILTERS = ['search', 'channel', 'status', 'agentId', 'dateFrom', 'dateTo'];
const CHAT_KEYS = [...CHAT_FILTERS, 'sortBy', 'sortOrder', 'limit'];
/** @type {Record<string, string>} */
const CHAT_DEFAULTS = { sortBy: 'createdAt', sortOrder: 'desc', limit: '20' };
/** @type {Record<string, string>} */
const CHANNELS = { web: 'Web', 'web-agent': 'Web agent', 'voice-widget': 'Voice widget', whatsapp: 'WhatsApp' };

/** @returns {FieldSpec[]} */
function chatFields() {
  return [
    { name: 'search', label: 'Search', type: 'search', maxlength: 200, hint: 'Messages, contact number or e-mail', autocomplete: 'off' },
    { name: 'channel', label: 'Channel', type: 'select', options: [['', 'All channels'], ...Object.entries(CHANNELS)] },
    { name: 'status', label: 'Status', type: 'select', options: [['', 'Any status'], ['active', 'Active'], ['ended', 'Ended']] },
    { name: 'agentId', label: 'Agent', type: 'select', options: [['', 'All agents']] },
    { name: 'dateFrom', label: 'Started on or after', type: 'date' },
    { name: 'dateTo', label: 'Started on or before', type: 'date' },
    { name: 'sortBy', label: 'Sort by', type: 'select', options: [['createdAt', 'Start time'], ['lastMessageAt', 'Last message']] },
    { name: 'sortOrder', label: 'Order', type: 'select', options: [['desc', 'Newest first'], ['asc', 'Oldest first']] },
    { name: 'limit', label: 'Per page', type: 'select', options: [['20', '20'], ['50', '50'], ['100', '100']] },
  ];
}

/** @param {Json | null | undefined} ct a chat's contact */
const contactText = (ct) => (ct?.number && phoneText(ct.number)) || ct?.email || 'Unknown contact';

/** @param {PageContext} ctx */
export function chatList({ view, query }) {
  const page = pageOf(query);
  const q = apiQuery(query, CHAT_KEYS, page);
  const back = keep(query, CHAT_KEYS);
  const filters = filterForm('/chats', query, chatFields(), CHAT_DEFAULTS);
  fillAgents(filters, query.get('agentId'));
  const filtered = CHAT_KEYS.some((k) => query.get(k) && query.get(k) !== CHAT_DEFAULTS[k]);
  const list = loader(async () => {
    const res = await listOrBadFilters(`/v1/chats?${q}`, filters, '/chats');
    if (res.bad) return res.bad;
    // The channel under the start, the last message's time under the count: every column fits
    // a laptop's 1280 px (issue 55); on a phone the row is a card (table.cards).
    const rows = (res.data || []).map((c) => h('tr', { 'data-id': c.id, class: 'cc-row', onclick: rowClick },
      h('th', { scope: 'row', class: 'card-first' }, h('a', { href: `/chats/${enc(c.id)}${back}` }, time(c.createdAt)), h('br'),
        h('span', { class: 'cc-channel muted small' }, CHANNELS[c.channel] || c.channel)),
      h('td', { class: 'card-wide card-plain' }, h('span', { class: c.contact?.number ? 'nowrap' : 'wrap-anywhere' }, contactText(c.contact)),
        c.summary && h('span', { class: 'cc-sum muted small', title: c.summary }, c.summary)),
      h('td', null, c.agent ? c.agent.name : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'cc-status card-plain' }, statusBadge(c.status)),
      h('td', { class: 'card-plain' }, h('span', { class: 'nowrap' }, num(c.messageCount), c.messageCount === 1 ? ' message' : ' messages'),
        h('br'), h('span', { class: 'muted small' }, 'last ', time(c.lastMessageAt)))));
    return [
      table(['Started', 'Contact and summary', 'Agent', 'Status', 'Messages'], rows, {
        caption: 'Chats', dense: true, cards: true, empty: filtered ? 'No chat matches these filters.' : 'No chats yet.',
      }),
      pager(res.pagination, (n) => hrefWith({ page: n > 1 ? n : null })),
    ];
  });
  view.append(
    h('p', { class: 'lead' }, 'Conversations of your chat agents on the web, in widgets and on WhatsApp.'),
    filters,
    section('Chats', exportLink(query, { what: 'chats', filters: CHAT_FILTERS, defaults: CHAT_DEFAULTS }), list));
}

// ---------------------------------------------------------------- /chats/{id}

/** @type {Record<string, string>} */
const ROLE_TEXT = { user: 'Contact', agent: 'Agent', system: 'System' };

/** @param {PageContext} ctx */
export function chatDetail({ view, params, query }) {
  const id = params[0];
  const back = `/chats${keep(query, CHAT_KEYS)}`;
  const size = Math.min(500, Math.max(1, Number.parseInt(query.get('messagesLimit') || '50', 10) || 50));
  view.append(
    h('p', { class: 'cc-back' }, h('a', { href: back }, '← Back to chats')),
    loader(async () => chatView(await api('GET', `/v1/chats/${enc(id)}?messagesLimit=${size}`), back, size)));
}

/** @param {Json} c a Chat @param {string} back @param {number} size messages per page */
function chatView(c, back, size) {
  /** @type {Json[]} */
  const messages = [...(c.messages || [])];
  const thread = h('ol', { class: 'cc-thread', 'aria-label': 'Messages, oldest first' });
  const scroller = h('div', { class: 'cc-scroll cc-chat', tabindex: '0', role: 'region', 'aria-label': 'Messages' }, thread);
  const status = h('p', { class: 'sr-only', role: 'status' });
  const olderSlot = h('div', { class: 'cc-older' });
  /** @param {Json} m */
  const msg = (m) => h('li', { class: ['cc-line', m.role === 'user' ? 'cc-caller' : m.role === 'agent' ? 'cc-agent' : 'cc-system'], 'data-id': m.id },
    h('div', { class: 'cc-bubble' },
      h('span', { class: 'cc-who' }, ROLE_TEXT[m.role] || m.role), ' ', h('span', { class: 'cc-at' }, time(m.createdAt)),
      h('span', { class: 'cc-text' }, m.text)));
  thread.append(...messages.map(msg));
  let more = messages.length < (c.messageCount || 0) && messages.length >= size;
  const older = h('button', { type: 'button', class: 'btn secondary small' }, 'Load older messages');
  const olderError = h('div');
  let busy = false;
  older.addEventListener('click', async () => {
    if (busy || !messages.length) return;
    busy = true;
    older.setAttribute('aria-busy', 'true');
    replace(olderError);
    try {
      const res = await api('GET', `/v1/chats/${enc(c.id)}?messagesLimit=${size}&messagesBefore=${enc(messages[0].id)}`);
      /** @type {Json[]} */
      const got = (res.messages || []).filter((/** @type {Json} */ m) => !messages.some((x) => x.id === m.id));
      const before = scroller.scrollHeight;
      const top = scroller.scrollTop;
      messages.unshift(...got);
      more = got.length >= size && messages.length < (res.messageCount || c.messageCount || 0);
      // The button gives way to the start-of-chat note before measuring: both are above the reader.
      if (!more) replace(olderSlot, h('p', { class: 'muted small' }, 'This is the start of the chat.'));
      thread.prepend(...got.map(msg));
      scroller.scrollTop = top + (scroller.scrollHeight - before); // the reader stays where they were
      status.textContent = got.length ? `${got.length} older ${got.length === 1 ? 'message' : 'messages'} loaded.` : 'No older messages.';
      if (!more) scroller.focus({ preventScroll: true });
    } catch (err) {
      replace(olderError, alertBox(`Could not load older messages: ${errorText(err)}`));
    } finally {
      busy = false;
      older.removeAttribute('aria-busy');
    }
  });
  replace(olderSlot, more ? [older, olderError] : h('p', { class: 'muted small' }, messages.length ? 'This is the start of the chat.' : 'No messages.'));
  requestAnimationFrame(() => { scroller.scrollTop = scroller.scrollHeight; }); // the newest at the bottom, in view

  const del = can('write') && h('button', {
    type: 'button', class: 'btn danger-quiet small',
    onclick: async () => {
      const done = await confirmDialog({
        title: 'Delete this chat?',
        body: `The chat with ${contactText(c.contact)} and its ${num(c.messageCount)} messages are deleted. This cannot be undone.`,
        confirm: 'Delete chat',
        action: () => api('DELETE', `/v1/chats/${enc(c.id)}`),
      });
      if (done) { toast('Chat deleted'); navigate(back); }
    },
  }, 'Delete chat');
  return [
    h('div', { class: 'card cc-head' },
      facts([
        ['Contact', contactText(c.contact)],
        c.contact?.number && c.contact?.email ? ['E-mail', c.contact.email] : null,
        ['Channel', CHANNELS[c.channel] || c.channel],
        ['Agent', agentLink(c.agent)],
        ['Status', statusBadge(c.status)],
        ['Started', time(c.createdAt)],
        ['Ended', time(c.endedAt, { empty: c.status === 'active' ? 'Active' : '—' })],
        ['Messages', num(c.messageCount)],
      ]),
      del && h('div', { class: 'cc-actions' }, del)),
    section('Summary', c.summary ? h('p', { class: 'cc-summary' }, c.summary) : h('p', { class: 'muted' }, 'No summary.')),
    section('Messages', olderSlot, scroller, status),
  ];
}
