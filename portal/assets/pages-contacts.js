// @ts-check
// Contacts: /contacts (search, filters, a new contact) and /contacts/{contactId} (details, custom
// fields, tags, assignments, boards and stage, notes, calls and chats). The CSV import is in
// pages-import.js, tags and custom fields in pages-contact-settings.js.
import { h, replace, field, form, loader, table, badge, time, num, fullName, uid, confirmDialog, toast, navigate, section, pager, pageOf, hrefWith, showFormError, enc, contactName, areaField, tagChip as chip, opt, append, phone, busy } from './dom.js';
import { api, can, cachedGet, primeCache, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').ListAnswer} ListAnswer */
/** @typedef {import('./api.js').Tag} Tag */
/**
 * What the sections of a contact's page share: the contact, the team's custom fields, tags,
 * boards and users, whether the person may change it, and the page's reload.
 * @typedef {{c: Json, fields: Json[], tags: Tag[], boards: Json[], users: Json[], write: boolean, reload: () => Promise<void>}} ContactCtx
 */

/** The button whose click is handled. @param {Event} ev */
const clicked = (ev) => /** @type {HTMLButtonElement} */ (ev.currentTarget);

/** @param {Json[]} boards @param {string} id */
const boardName = (boards, id) => boards.find((b) => b.id === id)?.name || 'Unknown board';
// ---------------------------------------------------------------- /contacts

const SORTS = [['createdAt', 'Created'], ['firstName', 'First name'], ['lastName', 'Last name'], ['email', 'Email'], ['number', 'Phone number']];
const FILTERS = ['search', 'tagIds', 'boardId', 'stageId', 'assignedUserId', 'sortBy', 'sortOrder'];

/** @param {PageContext} ctx */
export function list({ view, query, signal }) {
  const page = pageOf(query);
  const q = Object.fromEntries(FILTERS.map((k) => [k, (query.get(k) || '').trim()]));
  const filtered = ['search', 'tagIds', 'boardId', 'stageId', 'assignedUserId'].some((k) => q[k]);
  const filterSlot = h('div', { class: 'contacts-filters' });
  const results = loader(async () => {
    const p = new URLSearchParams({ page: String(page), limit: '25' });
    for (const k of FILTERS) if (q[k]) p.set(k, q[k]);
    /** @type {[ListAnswer, Json[], Json[]]} */
    const [res, boards, users] = await Promise.all([
      api('GET', `/v1/contacts?${p}`, undefined, { full: true }),
      cachedGet('/v1/boards').catch(() => []),
      cachedGet('/v1/users').catch(() => []),
    ]);
    if (signal.aborted) return [];
    primeCache('/v1/tags', res.availableTags || []);
    replace(filterSlot, filterForm(q, res.availableTags || [], boards || [], users || []));
    const rows = (res.data || []).map((c) => h('tr', null,
      h('th', { scope: 'row' }, h('a', { href: `/contacts/${enc(c.id)}` }, contactName(c))),
      h('td', null, phone(c.number, { className: 'nowrap' })),
      h('td', null, c.email || h('span', { class: 'muted' }, '—')),
      h('td', null, (c.tags || []).length ? h('span', { class: 'tag-list' }, c.tags.map((/** @type {Tag} */ t) => chip(t))) : h('span', { class: 'muted' }, '—')),
      h('td', null, c.crmStage ? [c.crmStage.name, h('br'), h('span', { class: 'muted small' }, boardName(boards || [], c.crmStage.boardId))] : h('span', { class: 'muted' }, '—')),
      h('td', null, time(c.createdAt, { day: true }))));
    return [
      table(['Name', 'Phone number', 'Email', 'Tags', 'Stage', 'Created'], rows,
        { caption: 'Contacts', empty: filtered ? 'No contact matches these filters.' : page > 1 ? 'No contacts on this page.' : 'No contacts yet.' }),
      pager(res.pagination, (n) => hrefWith({ page: n > 1 ? n : null })),
    ];
  });
  const actions = can('write') && h('div', { class: 'contacts-actions' },
    newContact(), h('a', { class: 'btn secondary', href: '/contacts/import' }, 'Import CSV'));
  append(view, [
    h('p', { class: 'lead' }, 'The people your agents talk to. Search, filter and open a contact to edit it.'),
    actions,
    filterSlot,
    section(filtered ? 'Matching contacts' : 'Contacts', results)]);
}

/**
 * The filters, as they are in the address.
 * @param {Record<string, string>} q @param {Tag[]} tags @param {Json[]} boards @param {Json[]} users
 */
function filterForm(q, tags, boards, users) {
  const tagOpts = [opt('', 'Any tag'), ...tags.map((t) => opt(t.id, t.name))];
  if (q.tagIds && !tags.some((t) => t.id === q.tagIds)) tagOpts.push(opt(q.tagIds, q.tagIds.includes(',') ? `${q.tagIds.split(',').length} tags (all of them)` : 'Unknown tag'));
  const stageSel = h('select', { name: 'stageId', id: uid('stage'), 'aria-describedby': '', value: q.stageId },
    h('option', { value: '' }, 'Any stage'),
    boards.map((b) => h('optgroup', { label: b.name }, (b.stages || []).map((/** @type {Json} */ s) => h('option', { value: s.id }, s.name)))));
  const f = form({
    className: 'inline',
    fields: [
      field({ name: 'search', label: 'Search', type: 'search', value: q.search, maxlength: 200, placeholder: 'Name, email or number', autocomplete: 'off' }),
      field({ name: 'tagIds', label: 'Tag', type: 'select', value: q.tagIds, options: tagOpts }),
      field({ name: 'boardId', label: 'Board', type: 'select', value: q.boardId, options: [opt('', 'Any board'), ...boards.map((b) => opt(b.id, b.name))] }),
      h('div', { class: 'field' }, h('label', { for: stageSel.id }, 'Stage'), stageSel),
      field({ name: 'assignedUserId', label: 'Assigned to', type: 'select', value: q.assignedUserId, options: [opt('', 'Anyone or no one'), ...users.map((u) => opt(u.id, fullName(u)))] }),
      field({ name: 'sortBy', label: 'Sort by', type: 'select', value: q.sortBy || 'createdAt', options: SORTS }),
      field({ name: 'sortOrder', label: 'Order', type: 'select', value: q.sortOrder || 'desc', options: [opt('desc', 'Descending'), opt('asc', 'Ascending')] }),
    ],
    submit: 'Apply',
    secondary: FILTERS.some((k) => q[k]) && h('a', { class: 'btn secondary', href: '/contacts' }, 'Clear'),
    onSubmit: async (v) => {
      /** @type {Record<string, string | null>} */
      const changes = { page: null };
      for (const k of FILTERS) changes[k] = (v[k] || '').trim() || null;
      if (changes.sortBy === 'createdAt' && !q.sortBy) changes.sortBy = null;
      if (changes.sortOrder === 'desc' && !q.sortOrder) changes.sortOrder = null;
      navigate(hrefWith(changes, '/contacts'));
    },
  });
  f.setAttribute('aria-label', 'Filter contacts');
  f.setAttribute('role', 'search');
  return f;
}

function newContact() {
  const f = form({
    className: 'grid',
    fields: [
      field({ name: 'firstName', label: 'First name', maxlength: 100, autocomplete: 'off' }),
      field({ name: 'lastName', label: 'Last name', maxlength: 100, autocomplete: 'off' }),
      field({ name: 'number', label: 'Phone number', type: 'tel', required: true, maxlength: 64, autocomplete: 'off', hint: 'Any spelling; stored as +15551234567.' }),
      field({ name: 'email', label: 'Email', type: 'email', maxlength: 254, autocomplete: 'off' }),
    ],
    submit: 'Create contact',
    onSubmit: async (v, formEl) => {
      /** @type {Record<string, string>} */
      const body = { number: v.number };
      for (const k of ['firstName', 'lastName', 'email']) if (v[k]) body[k] = v[k];
      let c;
      try {
        c = await api('POST', '/v1/contacts', body);
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        // CONTACT_EXISTS names the contact that has the number: link to it.
        const other = err.details.find((d) => d.field === 'contactId')?.message;
        if (err.code !== 'CONTACT_EXISTS' || !other) throw err;
        err.details = err.details.filter((d) => d.field !== 'contactId');
        showFormError(formEl, err);
        formEl.querySelector('.form-alert .alert')?.append(h('a', { href: `/contacts/${enc(other)}` }, 'Open that contact'));
        return;
      }
      toast(`Contact ${contactName(c)} created`);
      navigate(`/contacts/${enc(c.id)}`);
    },
  });
  return h('details', { class: 'contacts-new' }, h('summary', { class: 'btn primary' }, 'New contact'), f);
}

// ---------------------------------------------------------------- /contacts/{id}

const NOTE_KINDS = [['general', 'General'], ['info', 'Info'], ['warning', 'Warning'], ['danger', 'Danger']];

/** @param {PageContext} ctx */
export function detail({ view, params, signal }) {
  const id = params[0];
  view.append(loader(async (reload) => {
    /** @type {[Json, Json[], Tag[], Json[], Json[]]} */
    const [c, fields, tags, boards, users] = await Promise.all([
      api('GET', `/v1/contacts/${enc(id)}`),
      cachedGet('/v1/contacts/custom-fields').catch(() => []),
      cachedGet('/v1/tags').catch(() => []),
      cachedGet('/v1/boards').catch(() => []),
      cachedGet('/v1/users').catch(() => []),
    ]);
    if (signal.aborted) return [];
    const write = can('write');
    /** @type {ContactCtx} */
    const ctx = { c, fields, tags, boards, users, write, reload };
    return [
      h('div', { class: 'contact-head' },
        h('p', { class: 'contact-name' }, contactName(c)),
        h('p', { class: 'muted' }, phone(c.number, { link: true }), ' · added ', time(c.createdAt), ' · ', h('a', { href: '/contacts' }, 'All contacts'))),
      h('div', { class: 'contact-grid' },
        h('div', null, fieldsSection(ctx), notesSection(ctx)),
        h('div', null, tagsSection(ctx), assignSection(ctx), boardsSection(ctx))),
      historySection(c),
      write && section('Delete this contact', h('p', { class: 'muted' }, 'Its notes are deleted with it.'),
        h('button', {
          type: 'button', class: 'btn danger-quiet',
          onclick: async () => {
            const done = await confirmDialog({
              title: `Delete ${contactName(c)}?`,
              body: 'The contact and its notes are deleted. This cannot be undone.',
              confirm: 'Delete contact',
              action: () => api('DELETE', `/v1/contacts/${enc(c.id)}`),
            });
            if (done) { toast(`${contactName(c)} deleted`); navigate('/contacts'); }
          },
        }, 'Delete contact')),
    ];
  }));
}

/** The field of a custom field. @param {Json} f the CustomField @param {unknown} value the contact's */
function customControl(f, value) {
  const name = `customFields.${f.name}`;
  const base = { name, label: f.label, required: f.required || null };
  const v = value == null ? '' : value;
  switch (f.type) {
    case 'number': return field({ ...base, type: 'number', step: 'any', value: v });
    case 'date': return field({ ...base, type: 'date', value: v });
    case 'boolean': return field({ ...base, type: 'select', value: v === true ? 'true' : v === false ? 'false' : '', options: [opt('', '—'), opt('true', 'Yes'), opt('false', 'No')] });
    case 'select': {
      const options = (f.options || []).map((/** @type {string} */ o) => opt(o, o));
      if (v !== '' && !(f.options || []).includes(String(v))) options.push(opt(String(v), String(v)));
      return field({ ...base, type: 'select', value: v, options: [opt('', '—'), ...options] });
    }
    default: return field({ ...base, value: typeof v === 'object' ? JSON.stringify(v) : v, maxlength: 5000 });
  }
}

/** A custom field's value as the API takes it. @param {Json} f @param {string} raw */
function customValue(f, raw) {
  if (raw === '') return null;
  if (f.type === 'number') return Number(raw);
  if (f.type === 'boolean') return raw === 'true';
  return raw;
}

/** @param {ContactCtx} ctx */
function fieldsSection({ c, fields, write }) {
  /** @type {Array<[string, string, Record<string, unknown>]>} */
  const spec = [
    ['firstName', 'First name', { maxlength: 100 }], ['lastName', 'Last name', { maxlength: 100 }],
    ['number', 'Phone number', { type: 'tel', required: true, maxlength: 64 }],
    ['email', 'Email', { type: 'email', maxlength: 254 }], ['carrier', 'Carrier', { maxlength: 100 }],
  ];
  const base = spec.map(([name, label, attrs]) => field({ name, label, value: c[name] ?? '', autocomplete: 'off', ...attrs }));
  const custom = fields.map((f) => customControl(f, c.customFields?.[f.name]));
  const all = [...base, ...custom];
  if (!write) {
    for (const el of all) /** @type {HTMLInputElement} */ (el.querySelector('input, select')).disabled = true;
    return section('Details', h('div', { class: 'form grid' }, all));
  }
  const f = form({
    className: 'grid',
    fields: [...base, fields.length ? h('fieldset', null, h('legend', null, 'Custom fields'), custom) : null],
    submit: 'Save changes',
    onSubmit: async (v) => {
      /** @type {Json} */
      const body = {};
      for (const k of ['firstName', 'lastName', 'email', 'carrier']) if ((v[k] || '') !== (c[k] || '')) body[k] = v[k] || null;
      if (v.number !== c.number) body.number = v.number;
      /** @type {Record<string, unknown>} */
      const cf = {};
      for (const fd of fields) {
        const nv = customValue(fd, v[`customFields.${fd.name}`] ?? '');
        const ov = c.customFields?.[fd.name] ?? null;
        if (nv !== ov && !(typeof ov === 'object' && ov && JSON.stringify(ov) === String(nv))) cf[fd.name] = nv;
      }
      if (Object.keys(cf).length) body.customFields = cf;
      if (!Object.keys(body).length) { toast('Nothing to save'); return; }
      const saved = await api('PUT', `/v1/contacts/${enc(c.id)}`, body);
      Object.assign(c, saved);
      document.querySelector('.contact-name')?.replaceChildren(contactName(saved));
      toast('Contact saved');
    },
  });
  return section('Details', f);
}

/** @param {ContactCtx} ctx */
function tagsSection({ c, tags, write }) {
  const box = h('div');
  const err = h('div', { class: 'row-error', role: 'alert' });
  /** @param {string[]} ids @param {HTMLButtonElement} btn @param {string} msg */
  const save = async (ids, btn, msg) => busy(btn, err, async () => {
    const saved = await api('PUT', `/v1/contacts/${enc(c.id)}`, { tagIds: ids });
    c.tags = saved.tags;
    toast(msg);
    draw();
  });
  const draw = () => {
    /** @type {Set<string>} */
    const have = new Set((c.tags || []).map((/** @type {Tag} */ t) => t.id));
    const free = tags.filter((t) => !have.has(t.id));
    const sel = h('select', { id: uid('addtag'), class: 'compact' }, free.map((t) => h('option', { value: t.id }, t.name)));
    replace(box,
      (c.tags || []).length ? h('ul', { class: 'tag-list plain' }, c.tags.map((/** @type {Tag} */ t) => h('li', null, chip(t, write && h('button', {
        type: 'button', class: 'chip-remove', 'aria-label': `Remove tag ${t.name}`,
        onclick: (/** @type {Event} */ ev) => save(c.tags.filter((/** @type {Tag} */ x) => x.id !== t.id).map((/** @type {Tag} */ x) => x.id), clicked(ev), `Tag ${t.name} removed`),
      }, '×'))))) : h('p', { class: 'muted' }, 'No tags.'),
      write && free.length > 0 && h('div', { class: 'inline-add' },
        h('label', { for: sel.id }, 'Tag to add'), sel,
        h('button', { type: 'button', class: 'btn secondary small', onclick: (/** @type {Event} */ ev) => save([...have, sel.value], clicked(ev), 'Tag added') }, 'Add tag')),
      write && !tags.length && h('p', { class: 'hint' }, 'No tags yet: ', h('a', { href: '/settings/tags' }, 'create some')),
      err);
  };
  draw();
  return section('Tags', box);
}

/** @param {ContactCtx} ctx */
function assignSection({ c, users, write }) {
  const box = h('div');
  const err = h('div', { class: 'row-error', role: 'alert' });
  /** @type {Json[]} */
  let assigned = [];
  /** @param {Json} a an assignment */
  const who = (a) => { const u = users.find((x) => x.id === a.id) || a; return u.email ? fullName(u) : `User ${a.id.slice(0, 8)}`; };
  const draw = () => {
    const have = new Set(assigned.map((a) => a.id));
    const free = users.filter((u) => !have.has(u.id));
    const sel = h('select', { id: uid('assign'), class: 'compact' }, free.map((u) => h('option', { value: u.id }, fullName(u))));
    replace(box,
      assigned.length ? h('ul', { class: 'plain people' }, assigned.map((a) => h('li', null, who(a), ' ', badge(a.role),
        write && h('button', {
          type: 'button', class: 'btn danger-quiet small', 'aria-label': `Unassign ${who(a)}`,
          onclick: (/** @type {Event} */ ev) => busy(clicked(ev), err, async () => {
            assigned = await api('PUT', `/v1/contacts/${enc(c.id)}/assignments`, { userIds: assigned.filter((x) => x.id !== a.id).map((x) => x.id) });
            toast(`${who(a)} unassigned`); draw();
          }),
        }, 'Unassign')))) : h('p', { class: 'muted' }, 'Nobody is assigned.'),
      write && free.length > 0 && h('div', { class: 'inline-add' },
        h('label', { for: sel.id }, 'Person to assign'), sel,
        h('button', {
          type: 'button', class: 'btn secondary small',
          onclick: (/** @type {Event} */ ev) => busy(clicked(ev), err, async () => {
            assigned = await api('POST', `/v1/contacts/${enc(c.id)}/assignments`, { userIds: [sel.value] });
            toast('Assigned'); draw();
          }),
        }, 'Assign')),
      err);
  };
  return section('Assigned to', loader(async () => {
    assigned = await api('GET', `/v1/contacts/${enc(c.id)}/assignments`);
    draw();
    return box;
  }));
}

/** @param {ContactCtx} ctx */
function boardsSection({ c, boards, write, reload }) {
  const err = h('div', { class: 'row-error', role: 'alert' });
  const on = new Set(c.boardIds || []);
  const current = c.crmStage ? `${c.crmStage.name} (${boardName(boards, c.crmStage.boardId)})` : 'None';
  if (!boards.length) return section('Boards', h('p', { class: 'muted' }, 'The team has no boards. ', h('a', { href: '/boards' }, 'Go to Boards')));
  const listed = h('ul', { class: 'plain' }, boards.filter((b) => on.has(b.id)).map((b) => h('li', null, h('a', { href: `/boards/${enc(b.id)}` }, b.name))));
  if (!write) return section('Boards', on.size ? listed : h('p', { class: 'muted' }, 'On no board.'), h('p', null, 'Stage: ', current));
  const checks = boards.map((b) => {
    const cid = uid('board');
    return h('div', { class: 'check' }, h('input', { type: 'checkbox', id: cid, value: b.id, checked: on.has(b.id) }), h('label', { for: cid }, b.name));
  });
  const saveBoards = h('button', {
    type: 'button', class: 'btn secondary small',
    onclick: (/** @type {Event} */ ev) => busy(clicked(ev), err, async () => {
      const ids = checks.map((d) => /** @type {HTMLInputElement} */ (d.querySelector('input'))).filter((i) => i.checked).map((i) => i.value);
      await api('PUT', `/v1/contacts/${enc(c.id)}/boards`, { boardIds: ids });
      toast('Boards saved'); reload();
    }),
  }, 'Save boards');
  const stageSel = h('select', { id: uid('stage'), class: 'compact', value: c.crmStage?.id || '' },
    h('option', { value: '' }, 'Choose a stage'),
    boards.map((b) => h('optgroup', { label: b.name }, (b.stages || []).map((/** @type {Json} */ s) => h('option', { value: s.id }, s.name)))));
  const move = h('button', {
    type: 'button', class: 'btn secondary small',
    onclick: (/** @type {Event} */ ev) => busy(clicked(ev), err, async () => {
      if (!stageSel.value) throw new Error('Choose a stage first.');
      await api('PUT', `/v1/contacts/${enc(c.id)}`, { crmStageId: stageSel.value });
      toast('Stage changed'); reload();
    }),
  }, 'Move');
  return section('Boards and stage',
    h('fieldset', { class: 'boards-set' }, h('legend', null, 'On the boards'), checks),
    h('div', { class: 'form-actions' }, saveBoards),
    h('p', { class: 'stage-now' }, 'Current stage: ', h('strong', null, current)),
    h('div', { class: 'inline-add' }, h('label', { for: stageSel.id }, 'Move to stage'), stageSel, move),
    err);
}

/** @param {ContactCtx} ctx */
function notesSection({ c, write }) {
  /** @type {Json[]} */
  let notes = [];
  const box = h('div');
  // Drawn from what the writes answer: no list request after each add or delete.
  const draw = () => replace(box, !notes.length ? h('p', { class: 'empty' }, 'No notes yet.')
    : h('ul', { class: 'notes plain' }, notes.map((n) => h('li', { class: ['note', `note-${n.type}`] },
      h('div', { class: 'note-meta' }, badge(NOTE_KINDS.find(([k]) => k === n.type)?.[1] || n.type, n.type === 'danger' || n.type === 'warning' ? 'warn' : ''),
        ' ', time(n.createdAt), n.createdBy && h('span', { class: 'muted small' }, ` · ${n.createdBy}`)),
      h('p', { class: 'note-text' }, n.note),
      write && h('button', {
        type: 'button', class: 'btn danger-quiet small', 'aria-label': 'Delete this note',
        onclick: async () => {
          const done = await confirmDialog({
            title: 'Delete this note?', body: n.note.length > 140 ? `${n.note.slice(0, 140)}…` : n.note, confirm: 'Delete note',
            action: () => api('DELETE', `/v1/contacts/${enc(c.id)}/notes/${enc(n.id)}`),
          });
          if (done) { notes = notes.filter((x) => x.id !== n.id); draw(); toast('Note deleted'); }
        },
      }, 'Delete')))));
  const listBox = loader(async () => {
    notes = await api('GET', `/v1/contacts/${enc(c.id)}/notes`);
    draw();
    return box;
  });
  const add = write && form({
    fields: [
      areaField({ name: 'note', label: 'New note', required: true, maxlength: 5000 }),
      field({ name: 'type', label: 'Kind', type: 'select', value: 'general', options: NOTE_KINDS }),
    ],
    submit: 'Add note',
    onSubmit: async (v, f) => {
      const n = await api('POST', `/v1/contacts/${enc(c.id)}/notes`, { note: v.note, type: v.type });
      f.reset();
      notes = [n, ...notes];
      draw();
      toast('Note added');
    },
  });
  return section('Notes', add, listBox);
}

/** The contact's calls (by its number) and chats (by its number or e-mail). @param {Json} c */
function historySection(c) {
  const calls = loader(async () => {
    /** @type {ListAnswer} */
    const res = await api('GET', `/v1/calls?number=${enc(c.number)}&limit=20`, undefined, { full: true });
    return [table(['Started', 'Direction', 'Other party', 'Duration', 'Status'], (res.data || []).map((x) => h('tr', null,
      h('td', null, h('a', { href: `/calls/${enc(x.id)}` }, time(x.createdAt))),
      h('td', null, x.type === 'INCOMING' ? 'Incoming' : 'Outgoing'),
      h('td', null, phone(x.from === c.number ? x.to : x.from, { className: 'nowrap' })),
      h('td', { class: 'num' }, typeof x.duration === 'number' ? `${num(x.duration)} s` : '—'),
      h('td', null, badge(x.status || '—')))), { caption: 'Calls with this contact', dense: true, empty: 'No calls with this number.' }),
    (res.pagination?.totalCount ?? 0) > 20 && h('p', null, h('a', { href: `/calls?number=${enc(c.number)}` }, `All ${num(res.pagination?.totalCount)} calls`))];
  });
  // GET /v1/chats has no contact or number filter: `search` finds a substring of a message,
  // the contact's number or e-mail, so the answers are narrowed to this contact here.
  const chats = loader(async () => {
    const keys = [c.number, c.email].filter(Boolean);
    /** @type {Map<string, Json>} */
    const found = new Map();
    for (const k of keys) {
      const res = await api('GET', `/v1/chats?search=${enc(k)}&limit=50`);
      for (const x of res || []) if (x.contact && (x.contact.number === c.number || (c.email && x.contact.email === c.email))) found.set(x.id, x);
    }
    const items = [...found.values()].sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt)));
    return table(['Started', 'Channel', 'Messages', 'Status', 'Summary'], items.map((x) => h('tr', null,
      h('td', null, h('a', { href: `/chats/${enc(x.id)}` }, time(x.createdAt))),
      h('td', null, x.channel),
      h('td', { class: 'num' }, num(x.messageCount)),
      h('td', null, badge(x.status || '—')),
      h('td', null, x.summary || h('span', { class: 'muted' }, '—')))), { caption: 'Chats with this contact', dense: true, empty: 'No chats with this number or email.' });
  });
  return [section('Calls', calls), section('Chats', chats)];
}
