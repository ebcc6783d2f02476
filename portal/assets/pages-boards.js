// @ts-check
// Boards: /boards (the team's kanban boards), /boards/{boardId} (a board: a column per stage,
// its contacts loaded per column in pages, moved by drag and drop or by each card's "Move to"
// list; the stages edited below the board).
import {
  h, append, replace, field, form, loader, table, badge, time, num, alertBox, errorText,
  confirmDialog, toast, section, ACTIONS, uid, colorDot, enc, focusTitle, plural, contactName, phoneText,
} from './dom.js';
import { api, can, actingTeam, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').ListAnswer} ListAnswer */
/**
 * A column of the board: its stage and elements, how many contacts it holds (`total`), the ids of
 * the cards it shows, the next page to read and how many cards moved out since the last read.
 * @typedef {object} Column
 * @property {Json} stage
 * @property {HTMLElement} el
 * @property {HTMLUListElement} listEl
 * @property {HTMLSpanElement} count
 * @property {HTMLButtonElement} more
 * @property {number} total
 * @property {number} next
 * @property {number} outs
 * @property {Set<string>} ids
 * @property {(n: number) => void} setCount
 * @property {() => Promise<void>} load
 */
/**
 * What the columns and cards of a board share; `dragging` is the card being dragged.
 * @typedef {object} BoardCtx
 * @property {Json} board
 * @property {Json[]} stages in their order
 * @property {Map<string, Column>} cols by stage id
 * @property {boolean} writer
 * @property {HTMLElement} notice
 * @property {AbortSignal} signal
 * @property {number} per contacts per page
 * @property {{contact: Json, li: Card, col: Column} | null} [dragging]
 */

const PAGE = 50; // contacts per column and per "Load more" (?limit=1..100 in the address changes it)

/** @param {string | null | undefined} color */
const dot = (color) => colorDot(color, 'stage-dot');

/**
 * The API's details for `stages[i].name` as words (the form shows them above the button).
 * @param {unknown} err what a `catch` caught @param {string[]} [names] the stages' names, in order
 */
function stageDetails(err, names = []) {
  if (!(err instanceof ApiError)) return err;
  err.details = err.details.map((d) => {
    const m = /^stages\[(\d+)\]\.(\w+)$/.exec(String(d.field || ''));
    if (m) return { message: `Stage ${Number(m[1]) + 1}${names[Number(m[1])] ? ` (“${names[Number(m[1])]}”)` : ''}: ${d.message}.` };
    if (d.field === 'stages') return { field: 'stages', message: d.message };
    return d;
  });
  return err;
}

// ---------------------------------------------------------------- /boards

/** @param {PageContext} ctx */
export function list({ view }) {
  const writer = can('write');
  /** @type {() => Promise<void>} */
  let reload;
  const boards = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/boards');
    return table(writer ? ['Board', 'Stages', 'Contacts', 'Created', ACTIONS] : ['Board', 'Stages', 'Contacts', 'Created'],
      items.map((b) => boardRow(b, writer, () => reload())),
      { caption: 'Boards', empty: writer ? 'No boards yet. Create one above.' : 'No boards yet.' });
  });
  /** @type {import('./dom.js').Child[]} */ 
  const parts = [h('p', { class: 'lead' }, 'Kanban boards of ', h('strong', null, actingTeam().name),
    ': each column is a stage, each card a contact. Open a board to move its contacts between stages.')];
  if (writer) {
    parts.push(section('Create a board', form({
      className: 'grid',
      fields: [
        field({ name: 'name', label: 'Board name', required: true, maxlength: 100, autocomplete: 'off', placeholder: 'e.g. Sales pipeline' }),
        field({ name: 'stages', label: 'Stages', required: true, autocomplete: 'off', value: 'New, In progress, Done',
          hint: 'The columns, left to right, separated by commas.' }),
      ],
      submit: 'Create board',
      onSubmit: async (v, f) => {
        const names = String(v.stages).split(',').map((s) => s.trim()).filter(Boolean);
        let b;
        try {
          b = await api('POST', '/v1/boards', { name: v.name, stages: names.map((name) => ({ name })) });
        } catch (err) { throw stageDetails(err, names); }
        f.reset();
        toast(`Board “${b.name}” created`);
        reload?.();
      },
    })));
  }
  parts.push(section('Boards', boards));
  append(view, parts);
}

/** @param {Json} b a Board @param {boolean} writer @param {() => void} reload */
function boardRow(b, writer, reload) {
  /** @type {Json[]} */
  const stages = b.stages || [];
  return h('tr', null,
    h('th', { scope: 'row' }, h('a', { href: `/boards/${enc(b.id)}` }, b.name)),
    h('td', null, h('span', { class: 'board-stages' }, stages.map((s) => h('span', { class: 'board-stage' }, dot(s.color), s.name)))),
    h('td', { class: 'num' }, num(b.contactCount)),
    h('td', null, time(b.createdAt, { day: true })),
    writer && h('td', { class: 'actions' }, h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete board ${b.name}`,
      onclick: async () => {
        const done = await confirmDialog({
          title: `Delete the board “${b.name}”?`,
          body: `Its ${plural(b.contactCount, 'contact')} stay in your contacts; they are only taken off this board. This cannot be undone.`,
          confirm: 'Delete board',
          action: () => api('DELETE', `/v1/boards/${enc(b.id)}`),
        });
        if (done) { toast(`Board “${b.name}” deleted`); reload(); focusTitle(); }
      },
    }, 'Delete')));
}

// ---------------------------------------------------------------- /boards/{boardId}

/** @param {PageContext} ctx */
export function detail({ view, params, query, signal }) {
  const boardId = params[0];
  const per = Math.min(100, Math.max(1, Number.parseInt(query.get('limit') || '', 10) || PAGE));
  view.append(loader(async (again) => {
    let board;
    try {
      board = await api('GET', `/v1/boards/${enc(boardId)}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        return [alertBox('This board does not exist, or it belongs to another team.', { kind: 'info' }),
          h('p', null, h('a', { href: '/boards' }, 'Back to the boards'))];
      }
      throw err;
    }
    if (signal.aborted) return [];
    const title = document.querySelector('main h1');
    if (title) title.textContent = board.name;
    document.title = `${board.name} · Boards · Switchboard`;
    return boardView(board, again, signal, per);
  }, 'Loading the board…'));
}

/** @param {Json} board @param {() => void} reload @param {AbortSignal} signal @param {number} per */
function boardView(board, reload, signal, per) {
  const writer = can('write');
  /** @type {Json[]} */
  const stages = [...(board.stages || [])].sort((a, b) => a.position - b.position);
  const notice = h('div', { class: 'board-notice', role: 'alert' });
  /** @type {Map<string, Column>} */
  const cols = new Map(); // stageId → column state
  /** @type {BoardCtx} */
  const ctx = { board, stages, cols, writer, notice, signal, per };
  for (const s of stages) cols.set(s.id, column(s, ctx));
  /** @type {import('./dom.js').Child[]} */ 
  const parts = [
    h('p', { class: 'board-meta' }, h('a', { href: '/boards' }, 'All boards'), ' · ',
      plural(board.contactCount, 'contact'), ' in ', plural(stages.length, 'stage'),
      writer ? ' · Drag a card to another column, or use its “Move to” list.' : ''),
    notice,
    h('div', { class: 'kanban', role: 'region', 'aria-label': `Columns of ${board.name}`, tabindex: '0' },
      [...cols.values()].map((c) => c.el)),
  ];
  if (writer) parts.push(stageEditor(board, stages, reload));
  return parts;
}

/** @param {Json} stage @param {BoardCtx} ctx @returns {Column} */
function column(stage, ctx) {
  const headId = uid('col');
  const count = h('span', { class: 'col-count' }, '…');
  const countText = h('span', { class: 'sr-only' });
  const listEl = h('ul', { class: 'col-cards', 'aria-labelledby': headId });
  const status = h('div', { class: 'col-status' });
  const more = h('button', { type: 'button', class: 'btn secondary small col-more', hidden: true }, 'Load more');
  const el = h('section', { class: 'kanban-col', 'data-stage': stage.id, 'aria-labelledby': headId },
    h('h2', { class: 'col-head', id: headId }, dot(stage.color), h('span', { class: 'col-name' }, stage.name), count, countText),
    listEl, status, more);
  // setCount and load are added below.
  const col = /** @type {Column} */ ({ stage, el, listEl, count, more, total: 0, next: 1, outs: 0, ids: new Set() });
  col.setCount = (n) => {
    col.total = Math.max(0, n);
    count.textContent = num(col.total);
    countText.textContent = ` (${col.total === 1 ? 'contact' : 'contacts'})`;
    const shown = listEl.children.length;
    more.hidden = shown >= col.total;
    more.textContent = `Load more (${num(Math.max(0, col.total - shown))} more)`;
    listEl.classList.toggle('empty-col', shown === 0);
  };
  col.load = async () => {
    more.disabled = true;
    el.setAttribute('aria-busy', 'true');
    replace(status);
    try {
      // Moves out of this column shift the pages on the server: read back far enough to miss none.
      const from = Math.max(1, col.next - Math.ceil(col.outs / ctx.per));
      /** @type {ListAnswer | undefined} */
      let res;
      for (let p = from; p <= col.next; p += 1) {
        const q = new URLSearchParams({ boardId: ctx.board.id, stageId: stage.id, page: String(p), limit: String(ctx.per), sortBy: 'createdAt', sortOrder: 'desc' });
        res = /** @type {ListAnswer} */ (await api('GET', `/v1/contacts?${q}`, undefined, { full: true }));
        if (ctx.signal.aborted) return;
        for (const c of res.data || []) {
          if ([...ctx.cols.values()].some((o) => o.ids.has(c.id))) continue;
          col.ids.add(c.id);
          listEl.append(card(c, col, ctx));
        }
      }
      col.next += 1;
      col.outs = 0;
      col.setCount(res?.pagination?.totalCount ?? listEl.children.length);
    } catch (err) {
      replace(status, alertBox(`Could not load the contacts of “${stage.name}”: ${errorText(err)}`, {
        action: h('button', { type: 'button', class: 'btn secondary small', onclick: col.load }, 'Try again'),
      }));
    } finally {
      more.disabled = false;
      el.removeAttribute('aria-busy');
    }
  };
  more.addEventListener('click', col.load);
  if (ctx.writer) {
    /** @param {DragEvent} ev */
    const over = (ev) => {
      if (!ctx.dragging) return;
      ev.preventDefault();
      if (ev.dataTransfer) ev.dataTransfer.dropEffect = 'move';
      el.classList.add('drop-target');
    };
    el.addEventListener('dragenter', over);
    el.addEventListener('dragover', over);
    el.addEventListener('dragleave', (ev) => { if (!el.contains(/** @type {Node | null} */ (ev.relatedTarget))) el.classList.remove('drop-target'); });
    el.addEventListener('drop', (ev) => {
      ev.preventDefault();
      el.classList.remove('drop-target');
      const d = ctx.dragging;
      ctx.dragging = null;
      if (d && d.col !== col) move(d.contact, d.li, d.col, col, ctx, false);
    });
  }
  col.load();
  return col;
}

/** A contact's card: an <li> that knows its column. @typedef {HTMLLIElement & {col: Column}} Card */

/** @param {Json} c a Contact @param {Column} col @param {BoardCtx} ctx */
function card(c, col, ctx) {
  const name = contactName(c);
  const li = /** @type {Card} */ (h('li', { class: 'kanban-card', 'data-contact': c.id },
    h('h3', { class: 'card-name' }, h('a', { href: `/contacts/${enc(c.id)}`, draggable: 'false' }, name)),
    c.number && h('p', { class: 'card-phone' }, phoneText(c.number)),
    (c.tags || []).length > 0 && h('p', { class: 'card-tags' }, c.tags.map((/** @type {import('./api.js').Tag} */ t) => badge(t.name)))));
  if (!ctx.writer) return li;
  li.setAttribute('draggable', 'true');
  li.addEventListener('dragstart', (ev) => {
    ctx.dragging = { contact: c, li, col: li.col };
    if (ev.dataTransfer) {
      ev.dataTransfer.effectAllowed = 'move';
      ev.dataTransfer.setData('text/plain', name);
    }
    li.classList.add('dragging');
  });
  li.addEventListener('dragend', () => {
    li.classList.remove('dragging');
    ctx.cols.forEach((o) => o.el.classList.remove('drop-target'));
  });
  li.col = col;
  li.append(mover(c, li, ctx));
  return li;
}

/** The keyboard way: a "Move to" list of the other stages. @param {Json} c @param {Card} li @param {BoardCtx} ctx */
function mover(c, li, ctx) {
  const id = uid('move');
  const select = h('select', { id, class: 'compact card-move' },
    h('option', { value: '' }, 'Move to…'),
    ctx.stages.filter((s) => s.id !== li.col.stage.id).map((s) => h('option', { value: s.id }, s.name)));
  select.addEventListener('change', () => {
    const to = ctx.cols.get(select.value);
    if (to) move(c, li, li.col, to, ctx, true);
  });
  return h('div', { class: 'card-mover' }, h('label', { for: id, class: 'sr-only' }, `Move ${contactName(c)} to another stage`), select);
}

/**
 * Moves a card to another column at once, and the contact to its stage (back on an error).
 * @param {Json} c @param {Card} li @param {Column} from @param {Column} to @param {BoardCtx} ctx
 * @param {boolean} byKeyboard the focus goes back to the card's "Move to" list
 */
async function move(c, li, from, to, ctx, byKeyboard) {
  const name = contactName(c);
  const before = li.nextSibling;
  replace(ctx.notice);
  // The card moves at once; on an error it goes back where it was.
  to.listEl.prepend(li);
  li.col = to;
  from.ids.delete(c.id);
  to.ids.add(c.id);
  from.outs += 1;
  from.setCount(from.total - 1);
  to.setCount(to.total + 1);
  li.classList.add('moving');
  li.setAttribute('aria-busy', 'true');
  const refreshMover = () => {
    const old = /** @type {Element} */ (li.querySelector('.card-mover'));
    const fresh = mover(c, li, ctx);
    old.replaceWith(fresh);
    if (byKeyboard) fresh.querySelector('select')?.focus();
  };
  try {
    await api('PUT', `/v1/contacts/${enc(c.id)}`, { crmStageId: to.stage.id });
    toast(`${name} moved to ${to.stage.name}`);
    refreshMover();
  } catch (err) {
    from.listEl.insertBefore(li, before && before.parentNode === from.listEl ? before : null);
    li.col = from;
    to.ids.delete(c.id);
    from.ids.add(c.id);
    from.outs -= 1;
    to.setCount(to.total - 1);
    from.setCount(from.total + 1);
    refreshMover();
    replace(ctx.notice, alertBox(`Could not move ${name} to “${to.stage.name}”: ${errorText(err)}`));
  } finally {
    li.classList.remove('moving');
    li.removeAttribute('aria-busy');
  }
}

// ---------------------------------------------------------------- the stages editor

/**
 * A stage of the editor: its id (null for a new one), its <li>, its name and buttons.
 * @typedef {{id: string | null, el: HTMLLIElement, input: HTMLInputElement, label: HTMLLabelElement, up: HTMLButtonElement, down: HTMLButtonElement, remove: HTMLButtonElement}} StageRow
 */

/** @param {Json} board @param {Json[]} stages @param {() => void} reload */
function stageEditor(board, stages, reload) {
  const rowsEl = h('ol', { class: 'stage-rows' });
  /** @type {StageRow[]} */
  let rows = [];
  const labels = () => {
    rows.forEach((r, i) => {
      r.input.name = `stages[${i}].name`;
      r.label.textContent = `Stage ${i + 1}`;
      r.up.disabled = i === 0;
      r.down.disabled = i === rows.length - 1;
      r.remove.disabled = rows.length === 1;
      const n = r.input.value.trim() || `stage ${i + 1}`;
      r.up.setAttribute('aria-label', `Move ${n} up`);
      r.down.setAttribute('aria-label', `Move ${n} down`);
      r.remove.setAttribute('aria-label', `Remove ${n}`);
    });
  };
  const renumber = () => { labels(); replace(rowsEl, rows.map((r) => r.el)); };
  /** @param {StageRow} r @param {number} by @param {HTMLButtonElement} btn */
  const shift = (r, by, btn) => {
    const i = rows.indexOf(r);
    const j = i + by;
    if (j < 0 || j >= rows.length) return;
    [rows[i], rows[j]] = [rows[j], rows[i]];
    renumber();
    (btn.disabled ? r.input : btn).focus();
  };
  /** @param {Json | null} s a stage of the board, null for a new one */
  const addRow = (s) => {
    const f = field({ name: 'stage', label: 'Stage', required: true, maxlength: 50, autocomplete: 'off', value: s?.name ?? '' });
    // el and the buttons are added below.
    const r = /** @type {StageRow} */ ({ id: s?.id || null, input: f.querySelector('input'), label: f.querySelector('label') });
    r.up = h('button', { type: 'button', class: 'btn secondary small', onclick: () => shift(r, -1, r.up) }, 'Up');
    r.down = h('button', { type: 'button', class: 'btn secondary small', onclick: () => shift(r, 1, r.down) }, 'Down');
    r.remove = h('button', { type: 'button', class: 'btn danger-quiet small', onclick: () => {
      const i = rows.indexOf(r);
      rows = rows.filter((x) => x !== r);
      renumber();
      (rows[Math.min(i, rows.length - 1)]?.input || addBtn).focus();
    } }, 'Remove');
    r.input.addEventListener('change', labels);
    r.el = h('li', { class: 'stage-row' }, dot(s?.color), f,
      h('span', { class: 'stage-tag muted small' }, s ? '' : 'new'), h('div', { class: 'stage-buttons' }, r.up, r.down, r.remove));
    rows.push(r);
    return r;
  };
  const fill = () => { rows = []; stages.forEach(addRow); renumber(); };
  const addBtn = h('button', { type: 'button', class: 'btn secondary small', onclick: () => {
    const r = addRow(null);
    renumber();
    r.input.focus();
  } }, 'Add a stage');
  const undo = h('button', { type: 'button', class: 'btn secondary', onclick: () => {
    fill();
    nameInput.value = board.name;
    replace(/** @type {Element} */ (editor.querySelector('.form-alert')));
    toast('Changes undone');
  } }, 'Undo changes');
  const nameField = field({ name: 'name', label: 'Board name', required: true, maxlength: 100, autocomplete: 'off', value: board.name });
  const nameInput = /** @type {HTMLInputElement} */ (nameField.querySelector('input'));
  const editor = form({
    className: 'stack stage-editor',
    fields: [
      nameField,
      h('fieldset', { class: 'stage-set' }, h('legend', null, 'Stages, left to right'), rowsEl, h('div', null, addBtn)),
      h('p', { class: 'hint' }, 'Changes take effect when you save. A stage that still holds contacts cannot be removed: move them first.'),
    ],
    submit: 'Save board',
    secondary: undo,
    onSubmit: async (v) => {
      const list = rows.map((r) => (r.id ? { id: r.id, name: r.input.value.trim() } : { name: r.input.value.trim() }));
      try {
        await api('PUT', `/v1/boards/${enc(board.id)}`, { name: v.name, stages: list });
      } catch (err) {
        if (err instanceof ApiError && err.status === 409) {
          const held = err.details.map((d) => /stage (\S+) \((.*)\) holds (\d+)/.exec(d.message || '')).filter((m) => m !== null);
          if (held.length) {
            err.message = held.map(([, , n, k]) => `The stage “${n}” still holds ${plural(Number(k), 'contact')}, so it cannot be removed.`).join(' ');
            err.details = [];
          }
        }
        throw err; // stages[i].name errors are shown beside their row (the inputs carry that name)
      }
      toast('Board saved');
      reload();
    },
  });
  fill();
  return section('Edit the board', editor);
}
