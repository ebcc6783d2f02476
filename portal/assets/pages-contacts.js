// Contacts: /contacts, /contacts/import, /contacts/{contactId}; /settings/tags, /settings/custom-fields.
import {
  h, replace, field, form, loader, table, badge, time, num, fullName, alertBox, errorText, uid,
  confirmDialog, toast, navigate, section, pager, pageOf, hrefWith, showFormError, ACTIONS, colorDot,
} from './dom.js';
import { api, can, actingTeam } from './api.js';

const enc = encodeURIComponent;
const contactName = (c) => [c.firstName, c.lastName].filter(Boolean).join(' ') || c.email || c.number || 'Unnamed contact';
const focusTitle = () => document.querySelector('main h1')?.focus();
const opt = (v, t) => [v, t];

// ---------------------------------------------------------------- small shared parts

const dot = (color) => colorDot(color, 'tag-dot');
const chip = (t, ...extra) => h('span', { class: 'tag-chip' }, dot(t.color), h('span', null, t.name), extra);

/** A <textarea> shaped like dom.js field(), so that showFormError puts errors beside it. */
function areaField({ name, label, ...attrs }) {
  const id = uid(name);
  return h('div', { class: 'field' },
    h('label', { for: id }, label),
    h('textarea', { id, name, rows: 3, 'aria-describedby': `${id}-error`, ...attrs }),
    h('p', { class: 'field-error', id: `${id}-error`, hidden: true }));
}

/** A 409 (a name in use) without details names the field it is about, so it is shown beside it. */
function onField(err, name) {
  if (err && err.status === 409 && !(err.details || []).length) err.details = [{ field: name, message: err.message }];
  return err;
}

/** Runs a button's action with the button disabled; an error goes to `slot` (role=alert). */
async function busy(btn, slot, fn) {
  btn.disabled = true;
  if (slot) replace(slot);
  try { await fn(); } catch (err) { if (slot) replace(slot, alertBox(errorText(err))); else toast(errorText(err)); } finally { btn.disabled = false; }
}

// The team's boards, users, tags and custom fields change seldom: kept 30 s per team, so that
// moving between contacts does not spend the standard rate limit (100 a minute) on them.
const memo = new Map();
function cachedGet(path) {
  const key = `${actingTeam().id} ${path}`;
  const hit = memo.get(key);
  if (hit && Date.now() - hit.at < 30000) return hit.p;
  const p = api('GET', path);
  memo.set(key, { at: Date.now(), p });
  p.catch(() => memo.delete(key));
  return p;
}
const forget = () => memo.clear();

const boardName = (boards, id) => boards.find((b) => b.id === id)?.name || 'Unknown board';

// ---------------------------------------------------------------- /contacts

const SORTS = [['createdAt', 'Created'], ['firstName', 'First name'], ['lastName', 'Last name'], ['email', 'Email'], ['number', 'Phone number']];
const FILTERS = ['search', 'tagIds', 'boardId', 'stageId', 'assignedUserId', 'sortBy', 'sortOrder'];

export function list(view, { query, signal }) {
  const page = pageOf(query);
  const q = Object.fromEntries(FILTERS.map((k) => [k, (query.get(k) || '').trim()]));
  const filtered = ['search', 'tagIds', 'boardId', 'stageId', 'assignedUserId'].some((k) => q[k]);
  const filterSlot = h('div', { class: 'contacts-filters' });
  const results = loader(async () => {
    const p = new URLSearchParams({ page: String(page), limit: '25' });
    for (const k of FILTERS) if (q[k]) p.set(k, q[k]);
    const [res, boards, users] = await Promise.all([
      api('GET', `/v1/contacts?${p}`, undefined, { full: true }),
      cachedGet('/v1/boards').catch(() => []),
      cachedGet('/v1/users').catch(() => []),
    ]);
    if (signal.aborted) return [];
    memo.set(`${actingTeam().id} /v1/tags`, { at: Date.now(), p: Promise.resolve(res.availableTags || []) });
    replace(filterSlot, filterForm(q, res.availableTags || [], boards || [], users || []));
    const rows = (res.data || []).map((c) => h('tr', null,
      h('th', { scope: 'row' }, h('a', { href: `/contacts/${enc(c.id)}` }, contactName(c))),
      h('td', { class: 'nowrap' }, c.number),
      h('td', null, c.email || h('span', { class: 'muted' }, '—')),
      h('td', null, (c.tags || []).length ? h('span', { class: 'tag-list' }, c.tags.map((t) => chip(t))) : h('span', { class: 'muted' }, '—')),
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
  view.append(
    h('p', { class: 'lead' }, 'The people your agents talk to. Search, filter and open a contact to edit it.'),
    actions,
    filterSlot,
    section(filtered ? 'Matching contacts' : 'Contacts', results));
}

function filterForm(q, tags, boards, users) {
  const tagOpts = [opt('', 'Any tag'), ...tags.map((t) => opt(t.id, t.name))];
  if (q.tagIds && !tags.some((t) => t.id === q.tagIds)) tagOpts.push(opt(q.tagIds, q.tagIds.includes(',') ? `${q.tagIds.split(',').length} tags (all of them)` : 'Unknown tag'));
  const stageSel = h('select', { name: 'stageId', id: uid('stage'), 'aria-describedby': '', value: q.stageId },
    h('option', { value: '' }, 'Any stage'),
    boards.map((b) => h('optgroup', { label: b.name }, (b.stages || []).map((s) => h('option', { value: s.id }, s.name)))));
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
      const body = { number: v.number };
      for (const k of ['firstName', 'lastName', 'email']) if (v[k]) body[k] = v[k];
      let c;
      try {
        c = await api('POST', '/v1/contacts', body);
      } catch (err) {
        // CONTACT_EXISTS names the contact that has the number: link to it.
        const other = (err.details || []).find((d) => d.field === 'contactId')?.message;
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

export function detail(view, { params, signal }) {
  const id = params[0];
  view.append(loader(async (reload) => {
    const [c, fields, tags, boards, users] = await Promise.all([
      api('GET', `/v1/contacts/${enc(id)}`),
      cachedGet('/v1/contacts/custom-fields').catch(() => []),
      cachedGet('/v1/tags').catch(() => []),
      cachedGet('/v1/boards').catch(() => []),
      cachedGet('/v1/users').catch(() => []),
    ]);
    if (signal.aborted) return [];
    const write = can('write');
    const ctx = { c, fields, tags, boards, users, write, reload };
    return [
      h('div', { class: 'contact-head' },
        h('p', { class: 'contact-name' }, contactName(c)),
        h('p', { class: 'muted' }, c.number, ' · added ', time(c.createdAt), ' · ', h('a', { href: '/contacts' }, 'All contacts'))),
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

function customControl(f, value) {
  const name = `customFields.${f.name}`;
  const base = { name, label: f.label, required: f.required || null };
  const v = value == null ? '' : value;
  switch (f.type) {
    case 'number': return field({ ...base, type: 'number', step: 'any', value: v });
    case 'date': return field({ ...base, type: 'date', value: v });
    case 'boolean': return field({ ...base, type: 'select', value: v === true ? 'true' : v === false ? 'false' : '', options: [opt('', '—'), opt('true', 'Yes'), opt('false', 'No')] });
    case 'select': {
      const options = (f.options || []).map((o) => opt(o, o));
      if (v !== '' && !(f.options || []).includes(String(v))) options.push(opt(String(v), String(v)));
      return field({ ...base, type: 'select', value: v, options: [opt('', '—'), ...options] });
    }
    default: return field({ ...base, value: typeof v === 'object' ? JSON.stringify(v) : v, maxlength: 5000 });
  }
}

function customValue(f, raw) {
  if (raw === '') return null;
  if (f.type === 'number') return Number(raw);
  if (f.type === 'boolean') return raw === 'true';
  return raw;
}

function fieldsSection({ c, fields, write }) {
  const base = [
    ['firstName', 'First name', { maxlength: 100 }], ['lastName', 'Last name', { maxlength: 100 }],
    ['number', 'Phone number', { type: 'tel', required: true, maxlength: 64 }],
    ['email', 'Email', { type: 'email', maxlength: 254 }], ['carrier', 'Carrier', { maxlength: 100 }],
  ].map(([name, label, attrs]) => field({ name, label, value: c[name] ?? '', autocomplete: 'off', ...attrs }));
  const custom = fields.map((f) => customControl(f, c.customFields?.[f.name]));
  const all = [...base, ...custom];
  if (!write) {
    for (const el of all) el.querySelector('input, select').disabled = true;
    return section('Details', h('div', { class: 'form grid' }, all));
  }
  const f = form({
    className: 'grid',
    fields: [...base, fields.length ? h('fieldset', null, h('legend', null, 'Custom fields'), custom) : null],
    submit: 'Save changes',
    onSubmit: async (v) => {
      const body = {};
      for (const k of ['firstName', 'lastName', 'email', 'carrier']) if ((v[k] || '') !== (c[k] || '')) body[k] = v[k] || null;
      if (v.number !== c.number) body.number = v.number;
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

function tagsSection({ c, tags, write }) {
  const box = h('div');
  const err = h('div', { class: 'row-error', role: 'alert' });
  const save = async (ids, btn, msg) => busy(btn, err, async () => {
    const saved = await api('PUT', `/v1/contacts/${enc(c.id)}`, { tagIds: ids });
    c.tags = saved.tags;
    toast(msg);
    draw();
  });
  const draw = () => {
    const have = new Set((c.tags || []).map((t) => t.id));
    const free = tags.filter((t) => !have.has(t.id));
    const sel = h('select', { id: uid('addtag'), class: 'compact' }, free.map((t) => h('option', { value: t.id }, t.name)));
    replace(box,
      (c.tags || []).length ? h('ul', { class: 'tag-list plain' }, c.tags.map((t) => h('li', null, chip(t, write && h('button', {
        type: 'button', class: 'chip-remove', 'aria-label': `Remove tag ${t.name}`,
        onclick: (ev) => save(c.tags.filter((x) => x.id !== t.id).map((x) => x.id), ev.currentTarget, `Tag ${t.name} removed`),
      }, '×'))))) : h('p', { class: 'muted' }, 'No tags.'),
      write && free.length > 0 && h('div', { class: 'inline-add' },
        h('label', { for: sel.id }, 'Tag to add'), sel,
        h('button', { type: 'button', class: 'btn secondary small', onclick: (ev) => save([...have, sel.value], ev.currentTarget, 'Tag added') }, 'Add tag')),
      write && !tags.length && h('p', { class: 'hint' }, 'No tags yet: ', h('a', { href: '/settings/tags' }, 'create some')),
      err);
  };
  draw();
  return section('Tags', box);
}

function assignSection({ c, users, write }) {
  const box = h('div');
  const err = h('div', { class: 'row-error', role: 'alert' });
  let assigned = [];
  const who = (a) => { const u = users.find((x) => x.id === a.id) || a; return u.email ? fullName(u) : `User ${a.id.slice(0, 8)}`; };
  const draw = () => {
    const have = new Set(assigned.map((a) => a.id));
    const free = users.filter((u) => !have.has(u.id));
    const sel = h('select', { id: uid('assign'), class: 'compact' }, free.map((u) => h('option', { value: u.id }, fullName(u))));
    replace(box,
      assigned.length ? h('ul', { class: 'plain people' }, assigned.map((a) => h('li', null, who(a), ' ', badge(a.role),
        write && h('button', {
          type: 'button', class: 'btn danger-quiet small', 'aria-label': `Unassign ${who(a)}`,
          onclick: (ev) => busy(ev.currentTarget, err, async () => {
            assigned = await api('PUT', `/v1/contacts/${enc(c.id)}/assignments`, { userIds: assigned.filter((x) => x.id !== a.id).map((x) => x.id) });
            toast(`${who(a)} unassigned`); draw();
          }),
        }, 'Unassign')))) : h('p', { class: 'muted' }, 'Nobody is assigned.'),
      write && free.length > 0 && h('div', { class: 'inline-add' },
        h('label', { for: sel.id }, 'Person to assign'), sel,
        h('button', {
          type: 'button', class: 'btn secondary small',
          onclick: (ev) => busy(ev.currentTarget, err, async () => {
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
    onclick: (ev) => busy(ev.currentTarget, err, async () => {
      const ids = checks.map((d) => d.querySelector('input')).filter((i) => i.checked).map((i) => i.value);
      await api('PUT', `/v1/contacts/${enc(c.id)}/boards`, { boardIds: ids });
      toast('Boards saved'); reload();
    }),
  }, 'Save boards');
  const stageSel = h('select', { id: uid('stage'), class: 'compact', value: c.crmStage?.id || '' },
    h('option', { value: '' }, 'Choose a stage'),
    boards.map((b) => h('optgroup', { label: b.name }, (b.stages || []).map((s) => h('option', { value: s.id }, s.name)))));
  const move = h('button', {
    type: 'button', class: 'btn secondary small',
    onclick: (ev) => busy(ev.currentTarget, err, async () => {
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

function notesSection({ c, write }) {
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

function historySection(c) {
  const calls = loader(async () => {
    const res = await api('GET', `/v1/calls?number=${enc(c.number)}&limit=20`, undefined, { full: true });
    return [table(['Started', 'Direction', 'Other party', 'Duration', 'Status'], (res.data || []).map((x) => h('tr', null,
      h('td', null, h('a', { href: `/calls/${enc(x.id)}` }, time(x.createdAt))),
      h('td', null, x.type === 'INCOMING' ? 'Incoming' : 'Outgoing'),
      h('td', { class: 'nowrap' }, x.from === c.number ? x.to : x.from),
      h('td', { class: 'num' }, typeof x.duration === 'number' ? `${num(x.duration)} s` : '—'),
      h('td', null, badge(x.status || '—')))), { caption: 'Calls with this contact', dense: true, empty: 'No calls with this number.' }),
    res.pagination?.totalCount > 20 && h('p', null, h('a', { href: `/calls?number=${enc(c.number)}` }, `All ${num(res.pagination.totalCount)} calls`))];
  });
  // GET /v1/chats has no contact or number filter: `search` finds a substring of a message,
  // the contact's number or e-mail, so the answers are narrowed to this contact here.
  const chats = loader(async () => {
    const keys = [c.number, c.email].filter(Boolean);
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

// ---------------------------------------------------------------- CSV

/** RFC 4180: quoted fields, "" inside quotes, commas and newlines inside quotes, CRLF or LF. */
export function parseCsv(text) {
  const rows = [];
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

const csvCell = (v) => (/[",\r\n]/.test(v) ? `"${String(v).replace(/"/g, '""')}"` : String(v));
const toCsv = (rows) => rows.map((r) => r.map(csvCell).join(',')).join('\r\n') + '\r\n';

// ---------------------------------------------------------------- /contacts/import

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

function guess(header, used, fields) {
  const k = header.trim().toLowerCase();
  for (const f of fields) if (k === f.name.toLowerCase() || k === f.label.toLowerCase()) return `cf:${f.name}`;
  for (const [v, label, re] of TARGETS) if (!used.has(v) && (re.test(k) || k === v.toLowerCase() || k === label.toLowerCase())) return v;
  return '';
}

function cellValue(f, raw) {
  if (!f) return raw;
  if (f.type === 'number' && raw !== '' && !Number.isNaN(Number(raw))) return Number(raw);
  if (f.type === 'boolean' && /^(true|yes|y|1)$/i.test(raw)) return true;
  if (f.type === 'boolean' && /^(false|no|n|0)$/i.test(raw)) return false;
  return raw;
}

export function importPage(view, { signal }) {
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
      const fields = await cachedGet('/v1/contacts/custom-fields').catch(() => []);
      if (!signal.aborted) replace(work, mapping(file.name, rows[0], rows.slice(1), fields, signal));
    } catch (err) {
      replace(work, alertBox(`Could not read ${file.name}: ${errorText(err)}`));
    }
  });
}

function mapping(fileName, header, rows, fields, signal) {
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

function rowToContact(r, map, fields) {
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

const sleep = (ms, signal) => new Promise((res) => {
  const t = setTimeout(res, ms);
  signal.addEventListener('abort', () => { clearTimeout(t); res(); }, { once: true });
});

async function runImport(header, rows, map, fields, out, signal) {
  const bar = h('progress', { max: rows.length, value: 0, id: uid('prog') });
  const status = h('p', { role: 'status', class: 'import-status' }, 'Starting…');
  replace(out, section('Import', h('label', { for: bar.id }, 'Progress'), bar, status));
  let created = 0;
  const failed = []; // {row: index in rows, code, reason}
  for (let at = 0; at < rows.length && !signal.aborted;) {
    const chunk = rows.slice(at, at + CHUNK);
    status.textContent = `Sending rows ${num(at + 1)} to ${num(at + chunk.length)} of ${num(rows.length)}…`;
    let res;
    try {
      res = await api('POST', '/v1/contacts/bulk', { contacts: chunk.map((r) => rowToContact(r, map, fields)) });
    } catch (err) {
      if (err.status === 429) {
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
      const reason = (f.details || []).filter((d) => d.field !== 'contactId').map((d) => `${d.field} ${d.message}`).join('; ');
      failed.push({ row: at + f.index, code: f.code, reason: reason ? `${f.error}: ${reason}` : f.error });
    }
    at += chunk.length;
    bar.value = at;
    status.textContent = `${num(at)} of ${num(rows.length)} rows sent.`;
  }
  forget();
  if (signal.aborted) return;
  const summary = h('h2', { tabindex: '-1' }, `${num(created)} created, ${num(failed.length)} failed`);
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
  out.append(...parts);
  summary.focus();
}

// ---------------------------------------------------------------- /settings/tags

export function tags(view) {
  const write = can('write');
  const editSlot = h('div');
  let reload;
  const list = loader(async (again) => {
    reload = again;
    const items = await api('GET', '/v1/tags');
    return table(['Tag', 'Colour', ACTIONS], items.map((t) => h('tr', null,
      h('th', { scope: 'row' }, chip(t)),
      h('td', null, h('code', null, t.color)),
      h('td', { class: 'actions' }, write && [
        h('button', { type: 'button', class: 'btn secondary small', 'aria-label': `Edit tag ${t.name}`, onclick: () => editTag(t) }, 'Edit'), ' ',
        h('button', {
          type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete tag ${t.name}`,
          onclick: async () => {
            const done = await confirmDialog({
              title: `Delete the tag “${t.name}”?`, body: 'It is taken off every contact that carries it.', confirm: 'Delete tag',
              action: () => api('DELETE', `/v1/tags/${enc(t.id)}`),
            });
            if (done) { forget(); toast(`Tag ${t.name} deleted`); replace(editSlot); reload(); focusTitle(); }
          },
        }, 'Delete')]))), { caption: 'Tags', empty: 'No tags yet.' });
  });
  const tagFields = (t = {}) => [
    field({ name: 'name', label: 'Name', required: true, maxlength: 50, value: t.name, autocomplete: 'off' }),
    field({ name: 'color', label: 'Colour', type: 'color', value: (t.color || '#6B7280').toLowerCase() }),
  ];
  const editTag = (t) => {
    const f = form({
      className: 'inline', fields: tagFields(t), submit: 'Save tag',
      secondary: h('button', { type: 'button', class: 'btn secondary', onclick: () => replace(editSlot) }, 'Cancel'),
      onSubmit: async (v) => {
        try { await api('PUT', `/v1/tags/${enc(t.id)}`, { name: v.name, color: v.color.toUpperCase() }); } catch (err) { throw onField(err, 'name'); }
        forget(); toast('Tag saved'); replace(editSlot); reload();
      },
    });
    const head = h('h2', { tabindex: '-1' }, `Edit the tag “${t.name}”`);
    replace(editSlot, h('section', { class: 'section' }, head, f));
    f.elements.namedItem('name').focus();
  };
  view.append(
    h('p', { class: 'lead' }, 'Tags sort contacts into groups; filter the contact list by them. Names are unique regardless of case.'),
    write && section('Create a tag', form({
      className: 'inline', fields: tagFields(), submit: 'Create tag',
      onSubmit: async (v, f) => {
        let t;
        try { t = await api('POST', '/v1/tags', { name: v.name, color: v.color.toUpperCase() }); } catch (err) { throw onField(err, 'name'); }
        forget(); f.reset(); toast(`Tag ${t.name} created`); reload();
      },
    })),
    editSlot,
    section('Tags', list));
}

// ---------------------------------------------------------------- /settings/custom-fields

const TYPES = [['text', 'Text'], ['number', 'Number'], ['date', 'Date'], ['boolean', 'Yes / no'], ['select', 'Choice (select)']];
const splitOptions = (s) => String(s || '').split(/\r?\n|,/).map((x) => x.trim()).filter(Boolean);
const optionsField = (value) => field({ name: 'options', label: 'Choices', value, autocomplete: 'off', hint: 'For a choice field: the choices, separated by commas.' });
/** details[].field options[1] → options, the one Choices box. */
function fixOptions(err) {
  if (Array.isArray(err?.details)) err.details = err.details.map((d) => ({ ...d, field: String(d.field).replace(/^options\[\d+\]$/, 'options') }));
  return err;
}

export function customFields(view) {
  const write = can('write');
  const editSlot = h('div');
  let reload;
  const list = loader(async (again) => {
    reload = again;
    const items = await api('GET', '/v1/contacts/custom-fields');
    return table(['Label', 'Name', 'Type', 'Required', 'Choices', ACTIONS], items.map((f) => h('tr', null,
      h('th', { scope: 'row' }, f.label),
      h('td', null, h('code', null, f.name)),
      h('td', null, TYPES.find(([k]) => k === f.type)?.[1] || f.type),
      h('td', null, f.required ? badge('Required', 'accent') : 'No'),
      h('td', null, (f.options || []).length ? f.options.join(', ') : h('span', { class: 'muted' }, '—')),
      h('td', { class: 'actions' }, write && [
        h('button', { type: 'button', class: 'btn secondary small', 'aria-label': `Edit field ${f.label}`, onclick: () => editField(f) }, 'Edit'), ' ',
        h('button', {
          type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete field ${f.label}`,
          onclick: async () => {
            const done = await confirmDialog({
              title: `Delete the field “${f.label}”?`, body: 'Its value is removed from every contact. This cannot be undone.', confirm: 'Delete field',
              action: () => api('DELETE', `/v1/contacts/custom-fields/${enc(f.id)}`),
            });
            if (done) { forget(); toast(`Field ${f.label} deleted`); replace(editSlot); reload(); focusTitle(); }
          },
        }, 'Delete')]))), { caption: 'Custom fields', empty: 'No custom fields yet.' });
  });
  const editField = (fd) => {
    const f = form({
      className: 'grid',
      fields: [
        field({ name: 'label', label: 'Label', required: true, maxlength: 100, value: fd.label, autocomplete: 'off' }),
        field({ name: 'required', label: 'Required on new contacts', type: 'select', value: String(fd.required), options: [opt('false', 'No'), opt('true', 'Yes')] }),
        fd.type === 'select' && optionsField((fd.options || []).join(', ')),
      ],
      submit: 'Save field',
      secondary: h('button', { type: 'button', class: 'btn secondary', onclick: () => replace(editSlot) }, 'Cancel'),
      onSubmit: async (v) => {
        const body = { label: v.label, required: v.required === 'true' };
        if (fd.type === 'select') body.options = splitOptions(v.options);
        try { await api('PUT', `/v1/contacts/custom-fields/${enc(fd.id)}`, body); } catch (err) { throw fixOptions(err); }
        forget(); toast('Field saved'); replace(editSlot); reload();
      },
    });
    const head = h('h2', { tabindex: '-1' }, `Edit the field “${fd.label}”`);
    replace(editSlot, h('section', { class: 'section' }, head,
      h('p', { class: 'muted' }, 'Its name (', h('code', null, fd.name), ') and type cannot change: delete it and create another.'), f));
    f.elements.namedItem('label').focus();
  };
  view.append(
    h('p', { class: 'lead' }, 'Fields of your own on every contact. The name is the key of the value in the API (', h('code', null, 'customFields'), ').'),
    write && section('Create a field', form({
      className: 'grid',
      fields: [
        field({ name: 'label', label: 'Label', required: true, maxlength: 100, autocomplete: 'off', hint: 'What people read, e.g. Customer since.' }),
        field({ name: 'name', label: 'Name', required: true, maxlength: 64, autocomplete: 'off', pattern: '[A-Za-z][A-Za-z0-9_]*', hint: 'A letter, then letters, digits or _, e.g. customer_since.' }),
        field({ name: 'type', label: 'Type', type: 'select', value: 'text', options: TYPES }),
        field({ name: 'required', label: 'Required on new contacts', type: 'select', value: 'false', options: [opt('false', 'No'), opt('true', 'Yes')] }),
        optionsField(''),
      ],
      submit: 'Create field',
      onSubmit: async (v, f) => {
        const body = { label: v.label, name: v.name, type: v.type, required: v.required === 'true' };
        if (v.type === 'select' || v.options.trim()) body.options = splitOptions(v.options);
        let fd;
        try { fd = await api('POST', '/v1/contacts/custom-fields', body); } catch (err) { throw onField(fixOptions(err), 'name'); }
        forget(); f.reset(); toast(`Field ${fd.label} created`); reload();
      },
    })),
    editSlot,
    section('Fields', list));
}
