// @ts-check
// Knowledge: /knowledge (the team's knowledge bases) and /knowledge/{knowledgebaseId} (its Q&A
// references, webpages, documents and a search box). Every request goes through api.js: `api()`,
// and `upload()` for documents (an XMLHttpRequest, for its upload progress).
import { h, replace, field, form, loader, table, badge, time, num, alertBox, errorText, confirmDialog, toast, navigate, section, pager, pageOf, hrefWith, every, uid, ACTIONS, formDialog as domFormDialog, cap, enc, focusTitle, plural, areaField, liveTable, viewDialog, append } from './dom.js';
import { api, upload, can, actingTeam, ApiError } from './api.js';
import { parseCsv } from './pages-import.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').Item} Item */
/** @typedef {() => Promise<void>} Refresh reads the knowledge base again and updates its lists */

const INTERVALS = [['off', 'Never'], ['daily', 'Daily'], ['weekly', 'Weekly']];
/** @param {string} id @param {string} [rest] */
const kbPath = (id, rest = '') => `/v1/knowledgebase/${enc(id)}${rest}`;
/** @param {Json | null | undefined} kb */
const kbName = (kb) => kb?.name || 'Untitled knowledge base';
const REF_PAGE = 20;
const POLL_MS = 2000;

/** A <textarea> field, as the knowledge pages style it. @param {Parameters<typeof areaField>[0]} spec */
const area = (spec) => areaField({ class: 'kb-ta', ...spec });

/** @param {Parameters<typeof domFormDialog>[0]} spec */
const formDialog = (spec) => domFormDialog({ ...spec, className: 'kb-dialog' });

/** Asks before deleting a knowledge base (from the list or its page); true once deleted. @param {Json} kb */
function confirmDeleteKb(kb) {
  return confirmDialog({
    title: `Delete “${kbName(kb)}”?`,
    body: 'Its references, webpages and documents are deleted with it, and agents linked to it lose it. This cannot be undone.',
    confirm: 'Delete',
    action: () => api('DELETE', kbPath(kb.id)),
  });
}

/**
 * The Delete button of a webpage or document: confirmed, then the list is read again.
 * @param {{kind: string, name: string, path: string, body: string, refresh: Refresh}} spec
 */
function deleteSource({ kind, name, path, body, refresh }) {
  return h('button', {
    type: 'button', class: 'btn danger-quiet small', 'data-key': 'delete', 'aria-label': `Delete ${kind} ${name}`,
    onclick: async () => {
      const done = await confirmDialog({
        title: `Delete the ${kind} “${name}”?`, body, confirm: 'Delete', action: () => api('DELETE', path),
      });
      if (done) { toast(`${cap(kind)} “${name}” deleted`); focusTitle(); await refresh().catch((err) => toast(errorText(err))); }
    },
  }, 'Delete');
}

/** Q&A entries (manual or extracted) as a list of question and answer. @param {Json[] | null | undefined} items @param {string} [empty] */
function entries(items, empty = 'Nothing was extracted.') {
  if (!items?.length) return h('p', { class: 'empty' }, empty);
  return h('ol', { class: 'kb-entries' }, items.map((e) => h('li', null,
    h('p', { class: 'kb-q' }, e.question), h('p', { class: 'kb-a' }, e.answer))));
}

// ---- statuses of webpages and documents ----

/** @type {Record<string, [string, string]>} */
const STATUS = {
  pending: ['Pending', 'warn'], refreshing: ['Refreshing', 'warn'], ready: ['Ready', 'kb-ok'], failed: ['Failed', 'kb-failed'],
};
/** Whether a webpage or document is being read. @param {Json} x */
const busy = (x) => x.status === 'pending' || x.status === 'refreshing' || x.isUpdating === true;
/** @param {Json} x */
function statusCell(x) {
  const [text, kind] = STATUS[x.status] || [x.status || 'Unknown', ''];
  return h('td', null, badge(busy(x) ? `${text}…` : text, kind),
    x.failureReason && h('p', { class: 'kb-reason' }, x.failureReason));
}

// "in 23 hours (at 17:05 on 27 Nov)"
const clockFmt = new Intl.DateTimeFormat('en-GB', { hour: '2-digit', minute: '2-digit' });
const dayMonthFmt = new Intl.DateTimeFormat('en-GB', { day: 'numeric', month: 'short' });
/** @param {Date} when @param {number} [now] */
function inWords(when, now = Date.now()) {
  const sec = Math.max(1, Math.round((when.getTime() - now) / 1000));
  let span;
  if (sec < 60) span = plural(sec, 'second');
  else if (sec < 3600) span = plural(Math.round(sec / 60), 'minute');
  else if (sec < 10 * 3600) {
    const hrs = Math.floor(sec / 3600);
    const min = Math.round((sec % 3600) / 60);
    span = min ? `${plural(hrs, 'hour')} ${plural(min, 'minute')}` : plural(hrs, 'hour');
  } else if (sec < 72 * 3600) span = plural(Math.round(sec / 3600), 'hour');
  else span = plural(Math.round(sec / 86400), 'day');
  return `in ${span} (at ${clockFmt.format(when)} on ${dayMonthFmt.format(when)})`;
}

// ---------------------------------------------------------------- /knowledge

/** @param {PageContext} ctx */
export function list({ view }) {
  const writer = can('write');
  /** @type {() => Promise<void>} */
  let reload;
  const box = loader(async (again) => {
    reload = again;
    /** @type {[Json[] | null, Json[] | null]} */
    const [kbs, agents] = await Promise.all([
      api('GET', '/v1/knowledgebase'),
      api('GET', '/v1/agents').catch(() => null), // only to name the agents linked to each one
    ]);
    /** @type {Map<string, Json[]>} */
    const byKb = new Map();
    for (const a of agents || []) {
      const k = a.knowledgebase?.id;
      if (k) byKb.set(k, [...(byKb.get(k) || []), a]);
    }
    return table(['Name', 'Agent', 'Webpages', 'Documents', 'Q&A', 'Updated', ACTIONS],
      (kbs || []).map((kb) => kbRow(kb, agents ? byKb.get(kb.id) || [] : null, writer, () => reload())),
      { caption: 'Knowledge bases', empty: writer ? 'No knowledge bases yet. Create one above.' : 'No knowledge bases yet.' });
  });
  const create = writer && form({
    className: 'inline',
    fields: [
      field({ name: 'name', label: 'Name', required: true, maxlength: 255, autocomplete: 'off', placeholder: 'e.g. Support FAQ' }),
      field({ name: 'description', label: 'Description (optional)', maxlength: 5000, autocomplete: 'off' }),
    ],
    submit: 'Create knowledge base',
    onSubmit: async (v) => {
      const kb = await api('POST', '/v1/knowledgebase', { name: v.name, description: v.description || null });
      toast(`Knowledge base “${kbName(kb)}” created`);
      navigate(`/knowledge/${enc(kb.id)}`);
    },
  });
  append(view, [
    h('p', { class: 'lead' }, 'Knowledge bases hold what the agents of ', h('strong', null, actingTeam().name),
      ' know: Q&A references, webpages and documents. Agents search them while they talk.'),
    create && section('Create a knowledge base', create),
    section('Knowledge bases', box)]);
}

/**
 * @param {Json} kb @param {Json[] | null} agents those linked to it, null when they could not be read
 * @param {boolean} writer @param {() => void} reload
 */
function kbRow(kb, agents, writer, reload) {
  const c = kb.counts || {};
  /** @type {Child} */
  let agentCell = h('span', { class: 'muted' }, '—');
  if (agents?.length) {
    agentCell = agents.map((a, i) => [i ? ', ' : '', h('a', { href: `/agents/${enc(a.id)}` }, a.name || 'Untitled agent')]);
  } else if (agents) agentCell = h('span', { class: 'muted' }, 'Not linked');
  return h('tr', null,
    h('th', { scope: 'row' }, h('a', { href: `/knowledge/${enc(kb.id)}` }, kbName(kb)),
      kb.description && h('p', { class: 'kb-sub' }, kb.description)),
    h('td', null, agentCell),
    h('td', { class: 'num' }, num(c.webpages)),
    h('td', { class: 'num' }, num(c.documents)),
    h('td', { class: 'num' }, num(c.references)),
    h('td', null, time(kb.updatedAt)),
    h('td', { class: 'actions' }, writer && h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete knowledge base ${kbName(kb)}`,
      onclick: async () => {
        const done = await confirmDeleteKb(kb);
        if (done) { toast(`Knowledge base “${kbName(kb)}” deleted`); reload(); focusTitle(); }
      },
    }, 'Delete')));
}

// ---------------------------------------------------------------- /knowledge/{id}

/** @param {PageContext} ctx */
export function detail(ctx) {
  const { view } = ctx;
  const id = ctx.params[0];
  view.append(
    h('p', { class: 'kb-back' }, h('a', { href: '/knowledge' }, '← All knowledge bases')),
    loader(async () => {
      const kb = await api('GET', kbPath(id));
      return knowledgebase(kb, ctx);
    }));
}

/** @param {Json} kb @param {PageContext} ctx */
function knowledgebase(kb, ctx) {
  const id = kb.id;
  const writer = can('write');
  const announcer = h('p', { class: 'sr-only', role: 'status' });
  const h1 = document.querySelector('main h1');
  if (h1) h1.textContent = kbName(kb);
  document.title = `${kbName(kb)} · Switchboard`;

  // Everything shown comes from one GET of the knowledge base; refresh() fetches it again and
  // updates the three lists; polling runs it every 2 s while a webpage or document is in progress.
  // The three lists are added below.
  const parts = /** @type {{refs: ReturnType<typeof references>, pages: ReturnType<typeof webpages>, docs: ReturnType<typeof documents>}} */ ({});
  /** @type {AbortController | null} */
  let polling = null;
  const refresh = async () => {
    const fresh = await api('GET', kbPath(id));
    if (ctx.signal.aborted) return;
    parts.refs.update(fresh.references || []);
    parts.pages.update(fresh.webpages || []);
    parts.docs.update(fresh.documents || []);
    poll();
  };
  const poll = () => {
    const active = [...parts.pages.items(), ...parts.docs.items()].some(busy) || parts.docs.waiting();
    if (active && !polling && !ctx.signal.aborted) {
      polling = new AbortController();
      ctx.signal.addEventListener('abort', () => polling?.abort(), { once: true });
      every(POLL_MS, polling.signal, refresh);
    } else if (!active && polling) {
      polling.abort();
      polling = null;
    }
  };
  /** @param {string} text */
  const say = (text) => { announcer.textContent = text; };
  parts.refs = references(kb, ctx, writer, refresh);
  parts.pages = webpages(kb, writer, refresh, say);
  parts.docs = documents(kb, ctx, writer, refresh, say);
  parts.refs.update(kb.references || []);
  parts.pages.update(kb.webpages || []);
  parts.docs.update(kb.documents || []);
  poll();

  return [
    header(kb, writer),
    announcer,
    section('Q&A references', parts.refs.el),
    section('Webpages', parts.pages.el),
    section('Documents', parts.docs.el),
    section('Search', search(kb)),
  ];
}

/** @param {Json} kb @param {boolean} writer */
function header(kb, writer) {
  const desc = h('p', { class: 'lead' }, kb.description || 'No description.');
  const actions = writer && h('div', { class: 'form-actions' },
    h('button', {
      type: 'button', class: 'btn secondary small',
      onclick: async () => {
        const done = await formDialog({
          title: 'Edit the knowledge base',
          fields: [
            field({ name: 'name', label: 'Name', required: true, maxlength: 255, value: kb.name || '', autocomplete: 'off' }),
            area({ name: 'description', label: 'Description', maxlength: 5000, value: kb.description || '' }),
          ],
          submit: 'Save',
          onSubmit: async (v) => {
            const saved = await api('PUT', kbPath(kb.id), { name: v.name, description: v.description || null });
            Object.assign(kb, { name: saved.name, description: saved.description });
          },
        });
        if (done) {
          const h1 = document.querySelector('main h1');
          if (h1) h1.textContent = kbName(kb);
          desc.textContent = kb.description || 'No description.';
          toast('Knowledge base saved');
        }
      },
    }, 'Edit name and description'),
    h('button', {
      type: 'button', class: 'btn danger-quiet small',
      onclick: async () => {
        const done = await confirmDeleteKb(kb);
        if (done) { toast(`Knowledge base “${kbName(kb)}” deleted`); navigate('/knowledge'); }
      },
    }, 'Delete knowledge base'));
  return h('div', { class: 'kb-head' }, desc, actions);
}

// ---- Q&A references: filter (?q=), page (?page=), add, edit, delete ----

/** @param {Json} kb @param {PageContext} ctx @param {boolean} writer @param {Refresh} refresh */
function references(kb, ctx, writer, refresh) {
  const q = (ctx.query.get('q') || '').trim();
  const page = pageOf(ctx.query);
  const listBox = h('div');
  const filterId = uid('q');
  const input = h('input', { id: filterId, name: 'q', type: 'search', value: q, autocomplete: 'off' });
  const filter = h('form', { class: 'kb-filter', role: 'search', 'aria-label': 'Reference filter' },
    h('div', { class: 'field' }, h('label', { for: filterId }, 'Filter references'), input),
    h('div', { class: 'form-actions' },
      h('button', { type: 'submit', class: 'btn secondary' }, 'Filter'),
      q && h('a', { class: 'btn secondary', href: hrefWith({ q: null, page: null }) }, 'Clear filter')));
  filter.addEventListener('submit', (ev) => {
    ev.preventDefault();
    navigate(hrefWith({ q: input.value.trim(), page: null }));
  });
  const add = writer && form({
    className: 'grid',
    fields: [
      area({ name: 'question', label: 'Question', required: true, maxlength: 5000 }),
      area({ name: 'answer', label: 'Answer', required: true, maxlength: 50000 }),
    ],
    submit: 'Add reference',
    onSubmit: async (v, f) => {
      await api('POST', kbPath(kb.id, '/references'), { question: v.question, answer: v.answer });
      f.reset();
      toast('Reference added');
      await refresh();
    },
  });
  /** @type {Json[]} */
  let items = [];
  /** @param {Json[]} refs */
  const update = (refs) => {
    items = refs;
    const needle = q.toLowerCase();
    const shown = needle ? refs.filter((r) => `${r.question}\n${r.answer}`.toLowerCase().includes(needle)) : refs;
    const totalPages = Math.max(1, Math.ceil(shown.length / REF_PAGE));
    const p = Math.min(page, totalPages);
    const rows = shown.slice((p - 1) * REF_PAGE, p * REF_PAGE).map((r) => refRow(kb, r, writer, refresh));
    replace(listBox,
      table(['Question', 'Answer', 'Updated', ACTIONS], rows, {
        caption: 'Q&A references',
        empty: needle ? `No reference matches “${q}”.` : 'No Q&A references yet.',
      }),
      pager({ page: p, totalPages, totalCount: shown.length }, (n) => hrefWith({ page: n })));
  };
  const el = [
    h('p', { class: 'muted' }, 'Questions and answers written by hand; they are searchable as soon as they are saved.'),
    add && h('details', { class: 'kb-add', open: !(kb.references || []).length },
      h('summary', null, 'Add a reference'), add),
    writer && h('details', { class: 'kb-add' }, h('summary', null, 'Import references from a CSV file'), csvImport(kb, refresh)),
    filter,
    listBox,
  ];
  return { el, update, items: () => items };
}

// ---- Q&A references from a CSV file, 500 a request to POST .../references/bulk ----

const IMPORT_CHUNK = 500;

/** The question and answer columns: named in a header row, else the first two columns. @param {string[][]} rows */
function qaColumns(rows) {
  const head = (rows[0] || []).map((c) => c.trim().toLowerCase());
  const question = head.indexOf('question');
  const answer = head.indexOf('answer');
  if (question >= 0 && answer >= 0) return { question, answer, skip: 1 };
  return { question: 0, answer: 1, skip: 0 };
}

/** @param {Json} kb @param {Refresh} refresh */
function csvImport(kb, refresh) {
  const id = uid('csv');
  const hintId = `${id}-hint`;
  const input = h('input', { id, type: 'file', accept: '.csv,text/csv', 'aria-describedby': hintId });
  const out = h('div', { 'aria-live': 'polite' });
  input.addEventListener('change', async () => {
    const file = input.files && input.files[0];
    if (!file) return;
    input.disabled = true;
    try {
      await importRows(kb, parseCsv(await file.text()), out);
      await refresh();
    } catch (err) {
      replace(out, alertBox(`The import stopped: ${errorText(err)}`));
    } finally {
      input.disabled = false;
      input.value = '';
    }
  });
  return h('div', { class: 'kb-import' },
    h('div', { class: 'field' }, h('label', { for: id }, 'Choose a CSV file of questions and answers'), input,
      h('p', { id: hintId, class: 'hint' }, 'One reference a row: the columns named question and answer in a header row, or else the first two columns.')),
    out);
}

/** @param {Json} kb @param {string[][]} rows the file's @param {HTMLElement} out */
async function importRows(kb, rows, out) {
  const cols = qaColumns(rows);
  const items = rows.slice(cols.skip).map((r) => ({ question: r[cols.question] ?? '', answer: r[cols.answer] ?? '' }));
  if (!items.length) { replace(out, alertBox('The file has no rows.')); return; }
  const bar = h('progress', { max: items.length, value: 0, 'aria-label': 'Import progress' });
  const status = h('p', { role: 'status' }, 'Starting…');
  replace(out, bar, status);
  let created = 0;
  /** @type {Array<{row: number, reason: string}>} */
  const failed = []; // {row: line in the file, reason}
  for (let at = 0; at < items.length; at += IMPORT_CHUNK) {
    const chunk = items.slice(at, at + IMPORT_CHUNK);
    status.textContent = `Sending rows ${num(at + 1)} to ${num(at + chunk.length)} of ${num(items.length)}…`;
    const res = await api('POST', kbPath(kb.id, '/references/bulk'), { references: chunk });
    created += (res.created || []).length;
    for (const f of res.failed || []) {
      const reason = (f.details || []).map((/** @type {import('./api.js').ErrorDetail} */ d) => `${d.field || 'row'} ${d.message}`).join('; ');
      failed.push({ row: at + f.index + cols.skip + 1, reason: reason ? `${f.error}: ${reason}` : f.error });
    }
    bar.value = at + chunk.length;
  }
  status.textContent = `${plural(created, 'reference', 'references')} added, ${num(failed.length)} failed.`;
  toast(`${plural(created, 'reference', 'references')} imported`);
  if (failed.length) {
    out.append(table(['Row', 'Reason'], failed.map((f) => h('tr', null,
      h('td', { class: 'num' }, num(f.row)), h('td', null, f.reason))), { caption: 'Rows not imported', dense: true }));
  }
}

/** @param {Json} kb @param {Json} r a reference @param {boolean} writer @param {Refresh} refresh */
function refRow(kb, r, writer, refresh) {
  const path = kbPath(kb.id, `/references/${enc(r.id)}`);
  return h('tr', null,
    h('th', { scope: 'row', class: 'kb-cell' }, h('span', { class: 'kb-clamp' }, r.question)),
    h('td', { class: 'kb-cell' }, h('span', { class: 'kb-clamp' }, r.answer)),
    h('td', null, time(r.updatedAt)),
    h('td', { class: 'actions' }, writer && [
      h('button', {
        type: 'button', class: 'btn secondary small', 'aria-label': `Edit reference: ${r.question.slice(0, 80)}`,
        onclick: async () => {
          const done = await formDialog({
            title: 'Edit the reference',
            fields: [
              area({ name: 'question', label: 'Question', required: true, maxlength: 5000, value: r.question }),
              area({ name: 'answer', label: 'Answer', required: true, maxlength: 50000, value: r.answer, rows: 6 }),
            ],
            submit: 'Save',
            onSubmit: (v) => api('PUT', path, { question: v.question, answer: v.answer }),
          });
          if (done) { toast('Reference saved'); await refresh().catch((err) => toast(errorText(err))); }
        },
      }, 'Edit'),
      ' ',
      h('button', {
        type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete reference: ${r.question.slice(0, 80)}`,
        onclick: async () => {
          const done = await confirmDialog({
            title: 'Delete this reference?',
            body: r.question,
            confirm: 'Delete',
            action: () => api('DELETE', path),
          });
          if (done) { toast('Reference deleted'); focusTitle(); await refresh().catch((err) => toast(errorText(err))); }
        },
      }, 'Delete'),
    ]));
}

/** A message slot per row that survives the row being rebuilt. */
function slots() {
  /** @type {Map<string, HTMLElement>} */
  const map = new Map();
  return (/** @type {string} */ id) => {
    if (!map.has(id)) map.set(id, h('div', { class: 'row-error', role: 'alert' }));
    return /** @type {HTMLElement} */ (map.get(id));
  };
}

/** Says a webpage's or document's new status. @param {(text: string) => void} say */
const announceChange = (say) => (/** @type {Json} */ before, /** @type {Json} */ after) => {
  if (before.status !== after.status) say(`${after.name}: ${(STATUS[after.status] || [after.status])[0]}`);
};

// ---- webpages: add, status (polled), refresh (409 / 429 in words), content, delete ----

/** @param {Json} kb @param {boolean} writer @param {Refresh} refresh @param {(text: string) => void} say */
function webpages(kb, writer, refresh, say) {
  const msg = slots();
  /** @param {Json} w */
  const view = (w) => viewDialog({ title: `Content of ${w.name}`, className: 'kb-dialog wide', load: async () => {
    const d = await api('GET', kbPath(kb.id, `/webpages/${enc(w.id)}`));
    return [h('p', { class: 'muted kb-url' }, d.url), entries(d.content)];
  } });
  /** @param {Json} w @param {HTMLButtonElement} btn */
  const doRefresh = async (w, btn) => {
    const slot = msg(w.id);
    replace(slot);
    btn.disabled = true;
    try {
      await api('POST', kbPath(kb.id, `/webpages/${enc(w.id)}/refresh`));
      toast(`Refreshing ${w.name}`);
      await refresh();
    } catch (err) {
      btn.disabled = false;
      replace(slot, refreshError(err));
    }
  };
  // The page's schedule, changed in place (PUT refreshInterval).
  /** @param {Json} w */
  const scheduleSelect = (w) => {
    const select = h('select', { class: 'compact', 'aria-label': `How often ${w.name} refreshes itself`, value: w.refreshInterval || 'off' },
      INTERVALS.map(([v, t]) => h('option', { value: v }, t)));
    select.addEventListener('change', async () => {
      select.disabled = true;
      try {
        await api('PUT', kbPath(kb.id, `/webpages/${enc(w.id)}`), { refreshInterval: select.value });
        toast(`${w.name} now refreshes itself: ${select.value}`);
        await refresh();
      } catch (err) {
        select.value = w.refreshInterval || 'off';
        toast(`Could not change the schedule: ${errorText(err)}`);
      } finally {
        select.disabled = false;
      }
    });
    return select;
  };
  /** @param {Item} w */
  const rowFor = (w) => h('tr', null,
    h('th', { scope: 'row', class: 'kb-cell' }, w.name, h('p', { class: 'kb-sub kb-url' }, w.url),
      w.notes && h('p', { class: 'kb-sub' }, w.notes)),
    statusCell(w),
    h('td', { class: 'num' }, num(w.entryCount)),
    h('td', null, time(w.lastScrapedAt, { empty: 'Never' })),
    h('td', null, writer ? scheduleSelect(w) : cap(w.refreshInterval || 'off'),
      w.nextRefreshAt && h('p', { class: 'kb-sub' }, 'Next ', time(w.nextRefreshAt))),
    h('td', { class: 'actions' },
      h('button', {
        type: 'button', class: 'btn secondary small', 'data-key': 'view', 'aria-label': `Content of ${w.name}`, onclick: () => view(w),
      }, 'Content'),
      writer && [' ', h('button', {
        type: 'button', class: 'btn secondary small', 'data-key': 'refresh', 'aria-label': `Refresh ${w.name}`,
        onclick: (/** @type {Event} */ ev) => doRefresh(w, /** @type {HTMLButtonElement} */ (ev.currentTarget)),
      }, 'Refresh'), ' ', deleteSource({ kind: 'webpage', name: w.name, path: kbPath(kb.id, `/webpages/${enc(w.id)}`),
        body: 'What was extracted from it is deleted too.', refresh })],
      msg(w.id)));
  const t = liveTable({
    headers: ['Webpage', 'Status', 'Entries', 'Last scraped', 'Refreshes itself', ACTIONS],
    caption: 'Webpages',
    empty: 'No webpages yet.',
    rowFor,
    onChange: announceChange(say),
  });
  const add = writer && form({
    className: 'inline',
    fields: [
      field({ name: 'url', label: 'Address (URL)', type: 'url', required: true, maxlength: 2048, autocomplete: 'off' }),
      field({ name: 'name', label: 'Name (optional)', maxlength: 255, autocomplete: 'off', hint: 'The address when left empty.' }),
      field({ name: 'refreshInterval', label: 'Refreshes itself', type: 'select', options: INTERVALS, value: 'off' }),
    ],
    submit: 'Add webpage',
    onSubmit: async (v, f) => {
      const w = await api('POST', kbPath(kb.id, '/webpages'), { url: v.url, name: v.name || v.url, refreshInterval: v.refreshInterval });
      f.reset();
      toast(`Webpage “${w.name}” added; it is being read`);
      await refresh();
    },
  });
  return {
    el: [h('p', { class: 'muted' }, 'Pages are read in the background; their questions and answers become searchable. A page can be refreshed once a day.'),
      add, h('div', { class: 'kb-gap' }), t.el],
    update: t.update,
    items: t.items,
  };
}

/** The words for a refused refresh: 409 already running, 429 with when it can run again. @param {unknown} err */
function refreshError(err) {
  if (!(err instanceof ApiError)) return errorText(err);
  if (err.status === 409) return 'This page is already being refreshed. Wait until its status is Ready or Failed.';
  if (err.status === 429) {
    // The body's nextAvailableAt, else Retry-After (seconds): both name the same moment.
    const next = Date.parse(err.body?.nextAvailableAt || '');
    const when = Number.isFinite(next) ? new Date(next) : err.retryAfter ? new Date(Date.now() + err.retryAfter * 1000) : null;
    const daily = /24 hours|nextAvailableAt/i.test(`${err.message} ${err.hint || ''}`);
    if (daily) return `This page was refreshed in the last 24 hours. ${when ? `You can refresh this page again ${inWords(when)}.` : 'Try again tomorrow.'}`;
    return `Too many requests for now. ${when ? `You can try again ${inWords(when)}.` : 'Try again in a minute.'}`;
  }
  return errorText(err);
}

// ---- documents: upload (file input or drop, with progress), status (polled), content, delete ----

const ACCEPT = '.txt,.text,.md,.markdown,.html,.htm,.pdf,.docx,.csv';

/** @param {unknown} b bytes */
const size = (b) => (typeof b !== 'number' ? '' : b < 1024 ? `${b} B` : b < 1048576 ? `${(b / 1024).toFixed(1)} KB` : `${(b / 1048576).toFixed(1)} MB`);

/**
 * @param {Json} kb @param {PageContext} ctx @param {boolean} writer @param {Refresh} refresh
 * @param {(text: string) => void} say
 */
function documents(kb, ctx, writer, refresh, say) {
  /** @param {Json} d */
  const view = (d) => viewDialog({ title: `Content of ${d.name}`, className: 'kb-dialog wide', load: async () => {
    const full = await api('GET', kbPath(kb.id, `/documents/${enc(d.id)}`));
    return entries(full.content, full.status === 'pending' ? 'The text is still being extracted.' : 'Nothing was extracted.');
  } });
  // The document just uploaded: its status as it changes, then what was extracted from it.
  const recent = h('div', { class: 'kb-recent', 'aria-live': 'polite' });
  /** @type {string | null} */
  let watching = null; // id of the uploaded document until it is ready or failed
  /** @param {Json} d */
  const showRecent = async (d) => {
    const [text, kind] = STATUS[d.status] || [d.status, ''];
    const head = h('p', null, h('strong', null, d.name), ' ', badge(busy(d) ? `${text}…` : text, kind),
      ' ', h('span', { class: 'muted' }, busy(d) ? 'Extracting its text…' : `${plural(d.entryCount || 0, 'entry', 'entries')} extracted`));
    if (busy(d)) { replace(recent, h('div', { class: 'card' }, head)); return; }
    watching = null;
    let body;
    try {
      const full = await api('GET', kbPath(kb.id, `/documents/${enc(d.id)}`));
      body = full.failureReason ? alertBox(full.failureReason) : entries(full.content);
    } catch (err) {
      body = alertBox(errorText(err));
    }
    replace(recent, h('div', { class: 'card' }, head, body,
      h('button', { type: 'button', class: 'btn secondary small', onclick: () => replace(recent) }, 'Done')));
  };
  /** @param {Item} d */
  const rowFor = (d) => h('tr', null,
    h('th', { scope: 'row', class: 'kb-cell' }, d.name,
      d.fileName && d.fileName !== d.name && h('p', { class: 'kb-sub' }, d.fileName)),
    h('td', { class: 'nowrap' }, size(d.size)),
    statusCell(d),
    h('td', { class: 'num' }, num(d.entryCount)),
    h('td', null, time(d.createdAt)),
    h('td', { class: 'actions' },
      h('button', {
        type: 'button', class: 'btn secondary small', 'data-key': 'view', 'aria-label': `Content of ${d.name}`, onclick: () => view(d),
      }, 'Content'),
      writer && [' ', deleteSource({ kind: 'document', name: d.name, path: kbPath(kb.id, `/documents/${enc(d.id)}`),
        body: 'The file and what was extracted from it are deleted.', refresh })]));
  const t = liveTable({
    headers: ['Document', 'Size', 'Status', 'Entries', 'Uploaded', ACTIONS], caption: 'Documents', empty: 'No documents yet.', rowFor, onChange: announceChange(say),
  });

  /** @type {Child} */
  let zone = null;
  if (writer) {
    /** @type {HTMLElement} */
    let dropZone;
    const id = uid('file');
    const hintId = `${id}-hint`;
    const input = h('input', { id, type: 'file', class: 'kb-file', accept: ACCEPT, 'aria-describedby': hintId });
    const progress = h('progress', { max: 100, value: 0, 'aria-label': 'Upload progress', hidden: true });
    const note = h('p', { class: 'kb-progress-note', role: 'status' });
    const error = h('div', { class: 'kb-upload-error' });
    let uploading = false;
    /** @param {File | undefined} file */
    const start = async (file) => {
      if (!file || uploading) return;
      uploading = true;
      replace(error);
      input.disabled = true;
      dropZone.setAttribute('aria-busy', 'true');
      progress.hidden = false;
      progress.value = 0;
      note.textContent = `Uploading ${file.name}…`;
      try {
        const doc = await upload(kbPath(kb.id, '/documents'), file, {
          onProgress: (part) => {
            if (part == null) progress.removeAttribute('value');
            else progress.value = Math.round(part * 100);
          },
          signal: ctx.signal,
        });
        progress.value = 100;
        note.textContent = `${file.name} uploaded.`;
        watching = doc.id;
        showRecent(doc);
        await refresh();
      } catch (err) {
        note.textContent = '';
        replace(error, alertBox(errorText(err)));
      } finally {
        uploading = false;
        input.disabled = false;
        input.value = '';
        progress.hidden = true;
        dropZone.removeAttribute('aria-busy');
      }
    };
    input.addEventListener('change', () => start(input.files?.[0]));
    dropZone = h('div', { class: 'kb-drop' },
      h('label', { for: id }, h('span', { class: 'kb-drop-title' }, 'Choose a file to upload'), ' or drop it here'),
      input,
      h('p', { class: 'hint', id: hintId }, 'Text, Markdown, HTML, PDF, Word (.docx) or CSV. Its text is extracted in the background.'),
      progress, note);
    dropZone.addEventListener('dragover', (ev) => { ev.preventDefault(); dropZone.classList.add('over'); });
    dropZone.addEventListener('dragleave', () => dropZone.classList.remove('over'));
    dropZone.addEventListener('drop', (ev) => {
      ev.preventDefault();
      dropZone.classList.remove('over');
      start(ev.dataTransfer?.files?.[0]);
    });
    zone = [dropZone, error];
  }
  return {
    el: [zone, recent, h('div', { class: 'kb-gap' }), t.el],
    update: (/** @type {Item[]} */ items) => {
      t.update(items);
      const w = watching && items.find((x) => x.id === watching);
      if (!w) watching = null;
      else if (!busy(w)) showRecent(w);
    },
    items: t.items,
    waiting: () => Boolean(watching),
  };
}

// ---- search: query, limit, threshold; the credit balance beside it ----
// Results are listed by rank (meaning and words fused), best first; the threshold is a minimum similarity.

/** @param {Json} kb */
function search(kb) {
  const balance = h('strong', { class: 'kb-balance-value' }, '…');
  const loadBalance = async () => {
    try {
      const me = await api('GET', '/v1/me');
      balance.textContent = num(me.credits?.balance);
    } catch {
      balance.textContent = 'unavailable';
    }
  };
  loadBalance();
  const results = h('div', { class: 'kb-results', 'aria-live': 'polite' });
  const f = form({
    className: 'inline',
    fields: [
      field({ name: 'query', label: 'Search for', type: 'search', required: true, maxlength: 2000, autocomplete: 'off', class: 'kb-query' }),
      field({ name: 'limit', label: 'Results at most', type: 'number', min: 1, max: 50, step: 1, value: 10 }),
      field({ name: 'threshold', label: 'Minimum similarity (0 to 1)', type: 'number', min: 0, max: 1, step: 0.01, value: 0.1 }),
    ],
    submit: 'Search',
    onSubmit: async (v) => {
      const qs = new URLSearchParams({ query: v.query });
      if (v.limit) qs.set('limit', v.limit);
      if (v.threshold !== '') qs.set('threshold', v.threshold);
      let ans;
      try {
        ans = await api('GET', `${kbPath(kb.id, '/search')}?${qs}`, undefined, { full: true });
      } catch (err) {
        if (err instanceof ApiError && err.status === 402) {
          err.message = 'The team has no credits left: a search costs 1 credit.';
          replace(results);
        }
        loadBalance();
        throw err;
      }
      const meta = ans.meta || {};
      const hits = ans.data || [];
      replace(results,
        h('p', { class: 'kb-meta' }, `${plural(hits.length, 'result')} for “${meta.query ?? v.query}”`,
          ` · this search cost ${plural(meta.creditsUsed ?? 1, 'credit')}`),
        hits.length ? h('ol', { class: 'kb-hits' }, hits.map(hit)) : h('p', { class: 'empty' }, 'Nothing matched. Try other words or a lower minimum similarity.'));
      await loadBalance();
    },
  });
  return [
    h('p', { class: 'kb-balance', 'aria-live': 'polite' }, 'Credit balance: ', balance, h('span', { class: 'muted' }, ' · each search costs 1 credit')),
    f,
    results,
  ];
}

/** @type {Record<string, string>} */
const SOURCE = { manual: 'Q&A reference', webpage: 'Webpage', document: 'Document' };
/** A search result. @param {Json} r */
function hit(r) {
  const ref = r.reference || {};
  const src = ref.source || {};
  /** @param {unknown} n */
  const percent = (n) => (typeof n === 'number' ? `${(n * 100).toFixed(1)}%` : '—');
  // Issue 55: the fused `relevance` is made of ranks (the first result of any query has about
  // 100%), so it is not shown as a measure: the place in the order is, as a rank, and the
  // similarity of meaning, which does compare across queries, with its meter.
  const sim = percent(r.similarity);
  return h('li', { class: 'kb-hit' },
    h('p', { class: 'kb-q' }, ref.question),
    h('p', { class: 'kb-a' }, ref.answer),
    h('p', { class: 'kb-hit-meta' },
      h('span', { class: 'kb-rel', title: 'The place of this entry in the results: meaning and words together decide the order.' },
        'Rank ', h('strong', null, typeof r.rank === 'number' ? `#${r.rank}` : '—')),
      badge(SOURCE[src.type] || ref.type || 'Entry', src.type === 'manual' ? 'accent' : ''),
      src.name && h('span', { class: 'muted' }, src.name),
      h('span', { class: 'kb-sim', title: 'Similarity of meaning between the question and this entry: what the minimum similarity filters. It compares across questions.' },
        'Similarity ', h('strong', null, sim)),
      typeof r.similarity === 'number' && h('meter', {
        min: 0, max: 1, value: Math.max(0, Math.min(1, r.similarity)), 'aria-label': `Similarity ${sim}`,
      })));
}
