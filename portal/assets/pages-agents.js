// @ts-check
// Agents: /agents (list, create, delete) and /agents/{agentId} (fields, instructions with a
// live character count, their history, a line diff of a version against the current text,
// restore, and the prompt-optimisation state).
import {
  h, append, replace, field, form, loader, table, badge, time, num, confirmDialog, toast, navigate,
  section, pager, pageOf, hrefWith, every, alertBox, ACTIONS, enc, focusTitle, areaField, uid,
} from './dom.js';
import { api, can, actingTeam } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */

const LIMIT = 100000; // characters (Unicode code points, as the API counts them)
const PER_PAGE = 50;  // GET /v1/agents is not paged: the page pages it
const TYPES = [['phone', 'Phone'], ['chat', 'Chat']];
const typeName = (t) => (TYPES.find(([v]) => v === t) || [t, t])[1];
const agentPath = (id) => `/v1/agents/${enc(id)}`;

/** Characters as the API counts them: code points, so an emoji is one. */
export function chars(s) {
  let n = s.length;
  for (let i = 0; i < s.length; i += 1) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) { n -= 1; i += 1; }
    }
  }
  return n;
}

/**
 * A <textarea> field (dom.js areaField); with `count`, a live "n / 100,000 characters" under it,
 * an error when over. Returns the field and its control.
 */
/** @param {Parameters<typeof areaField>[0] & {count?: boolean}} spec */
function area({ count = false, ...spec }) {
  const countEl = count ? h('p', { class: 'hint ag-count' }) : null;
  const el = areaField({ rows: null, wrap: 'ag-area', note: countEl, ...spec });
  const control = el.querySelector('textarea');
  const update = () => {
    if (!countEl) return;
    const n = chars(control.value);
    const over = n - LIMIT;
    countEl.textContent = `${num(n)} / ${num(LIMIT)} characters${over > 0 ? `: ${num(over)} over the limit` : ''}`;
    countEl.classList.toggle('over', over > 0);
    control.setCustomValidity(over > 0 ? `Instructions must be at most ${num(LIMIT)} characters: remove ${num(over)}.` : '');
    if (over > 0) control.setAttribute('aria-invalid', 'true');
    else if (!control.validationMessage) control.removeAttribute('aria-invalid');
  };
  control.addEventListener('input', update);
  update();
  return { control, el };
}

/** The team's knowledge bases for a select: [[id, name]], or null when they cannot be read. */
async function knowledgebases() {
  try {
    const list = await api('GET', '/v1/knowledgebase');
    return (list || []).map((k) => [k.id, k.name || 'Unnamed knowledge base']);
  } catch {
    return null;
  }
}

function kbField(kbs, current) {
  const options = [['', 'None'], ...(kbs || [])];
  if (current && !options.some(([v]) => v === current.id)) options.push([current.id, current.name || 'Linked knowledge base']);
  return field({
    name: 'knowledgebaseId', label: 'Knowledge base', type: 'select', options, value: current?.id || '',
    hint: kbs ? 'What the agent may answer from.' : 'The knowledge bases could not be loaded; only the current link is offered.',
  });
}

function kbCell(kb) {
  if (!kb) return h('span', { class: 'muted' }, 'None');
  return h('a', { href: `/knowledge/${enc(kb.id)}` }, kb.name || 'Unnamed knowledge base');
}

function deleteAgent(a, after) {
  return confirmDialog({
    title: `Delete the agent “${a.name}”?`,
    body: 'Its instructions and their history are deleted with it; its knowledge base is kept. This cannot be undone.',
    confirm: 'Delete agent',
    action: () => api('DELETE', agentPath(a.id)),
  }).then((done) => { if (done) { toast(`Agent “${a.name}” deleted`); after(); } });
}

// ---------------------------------------------------------------- /agents

/** @param {PageContext} ctx */
export function list({ view, query }) {
  const page = pageOf(query);
  const type = TYPES.some(([v]) => v === query.get('type')) ? query.get('type') : '';
  const q = (query.get('q') || '').trim();
  const filtered = Boolean(type || q);
  let reload;

  const filter = form({
    className: 'inline',
    fields: [
      field({ name: 'q', label: 'Name contains', type: 'search', value: q, autocomplete: 'off' }),
      field({ name: 'type', label: 'Type', type: 'select', value: type, options: [['', 'All types'], ...TYPES] }),
    ],
    submit: 'Filter',
    secondary: filtered && h('a', { class: 'btn secondary', href: '/agents' }, 'Clear filter'),
    onSubmit: async (v) => navigate(hrefWith({ q: v.q, type: v.type, page: null }, '/agents')),
  });

  const listing = loader(async (again) => {
    reload = again;
    const all = (await api('GET', '/v1/agents')) || [];
    const needle = q.toLowerCase();
    const items = all.filter((a) => (!type || a.type === type) && (!needle || a.name.toLowerCase().includes(needle)));
    const totalPages = Math.max(1, Math.ceil(items.length / PER_PAGE));
    const shown = items.slice((page - 1) * PER_PAGE, page * PER_PAGE);
    const write = can('write');
    const rows = shown.map((a) => h('tr', null,
      h('th', { scope: 'row' },
        h('a', { href: `/agents/${enc(a.id)}` }, a.name),
        a.description && h('span', { class: 'ag-desc muted small' }, a.description)),
      h('td', null, badge(typeName(a.type), a.type === 'phone' ? 'accent' : '')),
      h('td', null, kbCell(a.knowledgebase)),
      h('td', null, time(a.updatedAt)),
      write && h('td', { class: 'actions' }, h('button', {
        type: 'button', class: 'btn danger-quiet small', 'aria-label': `Delete agent ${a.name}`,
        onclick: () => deleteAgent(a, () => { reload(); focusTitle(); }),
      }, 'Delete'))));
    let empty = 'No agents yet.';
    if (filtered) empty = 'No agents match this filter.';
    else if (write) empty = 'No agents yet. Create one above.';
    return [
      table(['Name', 'Type', 'Knowledge base', 'Updated', write && ACTIONS].filter((x) => x !== false), rows,
        { caption: 'Agents', empty: page > 1 && items.length ? 'No agents on this page.' : empty }),
      pager({ page, totalPages, totalCount: items.length }, (p) => hrefWith({ page: p > 1 ? p : null })),
    ];
  });

  /** @type {import('./dom.js').Child[]} */ 
  const parts = [h('p', { class: 'lead' }, 'The phone and chat agents of ', h('strong', null, actingTeam().name),
    can('write') ? ', newest first. Open one to edit its instructions.' : ', newest first. Open one to read its instructions.')];
  if (can('write')) parts.push(section('Create an agent', loader(async () => createForm(await knowledgebases()))));
  parts.push(section(filtered ? 'Agents (filtered)' : 'Agents', filter, h('div', { class: 'ag-gap' }), listing));
  append(view, parts);
}

function createForm(kbs) {
  const instr = area({
    name: 'instructions', label: 'Instructions (optional)', rows: 6, count: true,
    hint: 'The system prompt; it becomes version 1. You can also write it later on the agent’s page.',
  });
  return form({
    className: 'grid',
    fields: [
      field({ name: 'name', label: 'Name', required: true, maxlength: 255, autocomplete: 'off' }),
      field({ name: 'type', label: 'Type', type: 'select', value: 'phone', options: TYPES }),
      kbField(kbs, null),
      area({ name: 'description', label: 'Description (optional)', rows: 2, maxlength: 5000 }).el,
      instr.el,
    ],
    submit: 'Create agent',
    onSubmit: async (v) => {
      const body = { name: v.name, type: v.type, knowledgebaseId: v.knowledgebaseId || null, description: v.description || null };
      if (v.instructions) body.instructions = v.instructions;
      const a = await api('POST', '/v1/agents', body);
      toast(`Agent “${a.name}” created`);
      navigate(`/agents/${enc(a.id)}`);
    },
  });
}

// ---------------------------------------------------------------- /agents/{id}

/** @param {PageContext} ctx */
export function detail({ view, params, query, signal }) {
  const id = params[0];
  const title = document.querySelector('main h1');
  view.append(loader(async () => {
    let agent;
    let kbs;
    try {
      [agent, kbs] = await Promise.all([api('GET', agentPath(id)), can('write') ? knowledgebases() : null]);
    } catch (err) {
      if (err.status === 404 || (err.status === 400 && err.code === 'VALIDATION_ERROR')) {
        if (title && !signal.aborted) { title.textContent = 'Agent not found'; document.title = 'Agent not found · Switchboard'; }
        return [
          alertBox(`There is no agent with the id “${id}” in ${actingTeam().name}. It may have been deleted, or it belongs to another team.`, { kind: 'info' }),
          h('p', null, h('a', { href: '/agents' }, 'Go to the agents')),
        ];
      }
      throw err;
    }
    const setTitle = (name) => {
      if (signal.aborted) return; // a late answer after the user left
      if (title) title.textContent = name;
      document.title = `${name} · Agent · Switchboard`;
    };
    setTitle(agent.name);
    const ctx = { id, agent, signal, setTitle };
    ctx.diffSlot = h('div', { class: 'ag-diff-slot' });
    ctx.history = historySection(ctx);
    ctx.instructions = instructionsSection(ctx);
    const compare = Number.parseInt(query.get('compare') || '', 10);
    if (compare > 0) showDiff(ctx, compare, false);
    return [
      h('p', { class: 'ag-back' }, h('a', { href: '/agents' }, '← All agents')),
      detailsSection(ctx, kbs),
      ctx.instructions.el,
      ctx.diffSlot,
      ctx.history.el,
    ];
  }));
}

function detailsSection(ctx, kbs) {
  const facts = h('dl', { class: 'ag-facts card' });
  const fill = (a) => replace(facts,
    h('div', null, h('dt', null, 'Name'), h('dd', null, a.name)),
    h('div', null, h('dt', null, 'Type'), h('dd', null, badge(typeName(a.type), a.type === 'phone' ? 'accent' : ''))),
    h('div', null, h('dt', null, 'Knowledge base'), h('dd', null, kbCell(a.knowledgebase))),
    h('div', null, h('dt', null, 'Created'), h('dd', null, time(a.createdAt))),
    h('div', null, h('dt', null, 'Updated'), h('dd', null, time(a.updatedAt))),
    h('div', null, h('dt', null, 'Agent id'), h('dd', null, h('code', { class: 'ag-id' }, a.id))),
    h('div', { class: 'ag-wide' }, h('dt', null, 'Description'),
      h('dd', { class: 'ag-pre' }, a.description || h('span', { class: 'muted' }, 'No description'))));
  fill(ctx.agent);
  if (!can('write')) return section('Details', facts);
  const edit = form({
    className: 'grid',
    fields: [
      field({ name: 'name', label: 'Name', required: true, maxlength: 255, value: ctx.agent.name, autocomplete: 'off' }),
      kbField(kbs, ctx.agent.knowledgebase),
      area({ name: 'description', label: 'Description', rows: 3, maxlength: 5000, value: ctx.agent.description || '' }).el,
    ],
    submit: 'Save changes',
    secondary: h('button', {
      type: 'button', class: 'btn danger-quiet', onclick: () => deleteAgent(ctx.agent, () => navigate('/agents')),
    }, 'Delete agent'),
    onSubmit: async (v) => {
      const a = await api('PUT', agentPath(ctx.id), {
        name: v.name, description: v.description || null, knowledgebaseId: v.knowledgebaseId || null,
      });
      ctx.agent = a;
      fill(a);
      ctx.setTitle(a.name);
      toast('Agent saved');
    },
  });
  return section('Details', facts, h('h3', { class: 'ag-sub' }, 'Edit the agent'), edit);
}

// ---- instructions: editor, count, save, prompt-optimisation state

const OPT = {
  queued: ['Queued', 'warn'], running: ['Running', 'warn'], completed: ['Up to date', 'ag-ok'], failed: ['Failed', 'ag-bad'],
};

function optimisation(po, current) {
  if (!po) return h('span', { class: 'muted' }, 'Unknown');
  const [label, kind] = OPT[po.status] || [po.status, ''];
  /** @type {import('./dom.js').Child[]} */ 
  const parts = [badge(label, kind)];
  if (po.status === 'completed') parts.push(' built from version ', num(po.version), po.completedAt ? [' ', time(po.completedAt)] : '');
  else if (po.status === 'failed') parts.push(` building version ${num(po.version)}: `, po.error || 'no reason given');
  else parts.push(` building version ${num(po.version)}: upcoming conversations use the new text once it completes`);
  if (po.status === 'completed' && po.version !== current) parts.push(h('span', { class: 'muted' }, ` (the current text is version ${num(current)})`));
  return parts;
}

/** What the optimisation's state means for the person, in plain words. */
const OPT_MEANS = {
  queued: 'Queued means your saved text is waiting its turn to be prepared for conversations; it usually starts within seconds. Until it is done, new conversations use the previously prepared version.',
  running: 'Running means your saved text is being prepared for conversations now. Until it is done, new conversations use the previously prepared version.',
  completed: 'Up to date: new conversations use the prepared text of the version shown.',
  failed: 'Failed: new conversations keep using the last text that was prepared. Saving the instructions again tries once more.',
};

/** The state line, what it means, and what prompt optimisation is (folded). */
function optimisationHelp(po) {
  return [
    po && OPT_MEANS[po.status] && h('p', { class: 'hint ag-opt-means' }, OPT_MEANS[po.status]),
    h('details', { class: 'ag-opt-about' },
      h('summary', null, 'What is prompt optimisation?'),
      h('p', null, 'Each time instructions are saved, Switchboard prepares the prompt the agent actually uses in calls and chats: ',
        'your text, tidied, with the agent’s name and description, the rules of its channel (on the phone: short spoken sentences, ',
        'no formatting; in chat: short paragraphs) and, when a knowledge base is linked, how to use it.'),
      h('p', null, 'It runs by itself in the background (queued, then running, then up to date), usually within seconds. ',
        'Conversations already under way keep the prompt they started with; the next ones use the new version once it is up to date. ',
        'You do not need to do anything.')),
  ];
}

function instructionsSection(ctx) {
  const write = can('write');
  const status = h('div', { class: 'ag-status' });
  const slot = h('div');
  const el = h('section', { class: 'section', 'aria-labelledby': 'ag-instr-h' },
    h('h2', { id: 'ag-instr-h', tabindex: '-1' }, 'Instructions'), status, slot);
  let saved = null;

  const showStatus = (ins) => replace(status,
    h('p', null, ins.version
      ? [badge(`Version ${num(ins.version)}`, 'accent'), ' set ', time(ins.updatedAt)]
      : h('span', { class: 'muted' }, 'No instructions yet (version 0).')),
    h('p', null, h('strong', null, 'Prompt optimisation: '), optimisation(ins.promptOptimization, ins.version)),
    optimisationHelp(ins.promptOptimization));

  const pending = () => ['queued', 'running'].includes(saved?.promptOptimization?.status);
  every(2000, ctx.signal, async () => {
    if (!pending()) return;
    const ins = await api('GET', `${agentPath(ctx.id)}/instructions`);
    if (ctx.signal.aborted) return;
    saved = { ...ins };
    showStatus(ins);
  });

  const build = (ins) => {
    saved = ins;
    showStatus(ins);
    const unsaved = h('span', { class: 'ag-unsaved', role: 'status' });
    const ta = area({
      name: 'instructions', label: 'System prompt', rows: 16, spellcheck: 'false', value: ins.instructions, count: true,
      readonly: !write, required: write, class: 'ag-mono',
      hint: write ? 'Saving replaces the text in full and keeps the previous one in the history (last 20).' : 'You can read the instructions; your role cannot change them.',
    });
    if (!write) return ta.el;
    ta.control.addEventListener('input', () => {
      unsaved.textContent = ta.control.value === saved.instructions ? '' : 'Unsaved changes';
    });
    return form({
      fields: [ta.el],
      submit: 'Save instructions',
      secondary: unsaved,
      onSubmit: async (v) => {
        if (chars(v.instructions) > LIMIT) return; // the field already says so
        const res = await api('PUT', `${agentPath(ctx.id)}/instructions`, { instructions: v.instructions });
        saved = res;
        ta.control.defaultValue = res.instructions;
        unsaved.textContent = '';
        showStatus(res);
        toast(`Instructions saved as version ${num(res.version)}`);
        ctx.history.reload();
        const open = Number.parseInt(new URLSearchParams(location.search).get('compare') || '', 10);
        if (open > 0) showDiff(ctx, open, false); // against the new current text
      },
    });
  };

  const load = () => replace(slot, loader(async () => build(await api('GET', `${agentPath(ctx.id)}/instructions`))));
  load();
  return { el, reload: load, current: () => saved };
}

// ---- history, restore

function historySection(ctx) {
  let again;
  const box = loader(async (run) => {
    again = run;
    const items = (await api('GET', `${agentPath(ctx.id)}/instructions/history`)) || [];
    const rows = items.map((v) => h('tr', null,
      h('th', { scope: 'row', class: 'nowrap' }, `Version ${num(v.version)}`),
      h('td', null, time(v.createdAt)),
      h('td', null, time(v.replacedAt)),
      h('td', { class: 'num' }, num(chars(v.instructions))),
      h('td', { class: 'ag-first' }, h('span', { class: 'ag-preview', title: firstLine(v.instructions) }, firstLine(v.instructions) || '—')),
      h('td', { class: 'actions' },
        h('a', {
          class: 'btn secondary small', href: hrefWith({ compare: v.version }), 'aria-label': `Compare version ${v.version} with the current text`,
          onclick: (ev) => { ev.preventDefault(); showDiff(ctx, v.version, true); },
        }, 'Compare'),
        can('write') && [' ', h('button', {
          type: 'button', class: 'btn secondary small', 'aria-label': `Restore version ${v.version}`,
          onclick: () => restore(ctx, v.version),
        }, 'Restore')])));
    return [
      table(['Version', 'Set', 'Replaced', 'Characters', 'First line', ACTIONS], rows,
        { caption: 'Earlier versions of the instructions', dense: true, empty: 'No earlier versions yet: each save keeps the text it replaces here.' }),
      h('p', { class: 'hint ag-note' }, 'The API keeps the last 20 earlier versions with when each was set and replaced; it does not say who made a change',
        can('audit') ? [' (the ', h('a', { href: '/audit-log?action=instructions.replaced' }, 'audit log'), ' does).'] : '.'),
    ];
  });
  const el = h('section', { class: 'section' }, h('h2', { tabindex: '-1' }, 'History'), box);
  return { el, reload: () => again?.() };
}

const firstLine = (s) => (String(s).split('\n').find((l) => l.trim()) || '').trim().slice(0, 120);

function restore(ctx, version) {
  return confirmDialog({
    title: `Restore version ${version}?`,
    body: `Its text becomes the current instructions as a new version; the text it replaces is kept in the history.${
      document.querySelector('.ag-unsaved')?.textContent ? ' Your unsaved changes in the editor are discarded.' : ''}`,
    confirm: 'Restore',
    danger: false,
    action: async () => {
      const res = await api('POST', `${agentPath(ctx.id)}/instructions/history/${enc(version)}/restore`);
      toast(`Version ${num(version)} restored as version ${num(res.version)}`);
    },
  }).then((done) => {
    if (!done) return;
    closeDiff(ctx);
    ctx.instructions.reload();
    ctx.history.reload();
    ctx.instructions.el.querySelector('h2').focus();
  });
}

// ---- diff of a saved version against the current text

function closeDiff(ctx) {
  replace(ctx.diffSlot);
  if (new URLSearchParams(location.search).has('compare')) history.replaceState(null, '', hrefWith({ compare: null }));
}

function showDiff(ctx, version, push) {
  if (push) history.pushState(null, '', hrefWith({ compare: version }));
  const heading = h('h2', { tabindex: '-1' }, `Version ${num(version)} compared with the current text`);
  heading.id = uid('diff');
  replace(ctx.diffSlot, h('section', { class: 'section ag-diff-box', 'aria-labelledby': heading.id }, heading,
    loader(async () => {
      const [old, cur] = await Promise.all([
        api('GET', `${agentPath(ctx.id)}/instructions/history/${enc(version)}`).catch((err) => {
          if (err.status === 404) err.message = `Version ${version} is not in the history (only the last 20 are kept).`;
          throw err;
        }),
        ctx.instructions?.current() || api('GET', `${agentPath(ctx.id)}/instructions`),
      ]);
      const ops = lineDiff(old.instructions, cur.instructions);
      const added = ops.filter((o) => o[0] === '+').length;
      const removed = ops.filter((o) => o[0] === '-').length;
      return [
        h('p', null, `From version ${num(version)} (set `, time(old.createdAt), `) to the current version ${num(cur.version)}: `,
          h('strong', null, `${num(added)} ${added === 1 ? 'line' : 'lines'} added, ${num(removed)} removed`), '.'),
        h('p', { class: 'ag-legend hint' },
          h('span', { class: 'ag-key del' }, '− Removed'), ' in version ', num(version), ' only · ',
          h('span', { class: 'ag-key add' }, '+ Added'), ' in the current text only'),
        added + removed === 0 && h('p', { class: 'muted' }, 'The texts are the same.'),
        h('ol', { class: 'ag-diff', 'aria-label': `Line differences, version ${version} to current` }, ops.map(([op, line]) => {
          const kind = op === '+' ? 'add' : op === '-' ? 'del' : 'same';
          const word = op === '+' ? 'Added: ' : op === '-' ? 'Removed: ' : 'Unchanged: ';
          return h('li', { class: kind, 'data-diff': kind },
            h('span', { class: 'ag-mark', 'aria-hidden': 'true' }, op === ' ' ? '' : op === '-' ? '−' : '+'),
            h('span', { class: 'sr-only' }, word),
            h('span', { class: 'ag-line' }, line || ' '));
        })),
        h('div', { class: 'form-actions' },
          can('write') && h('button', { type: 'button', class: 'btn primary', onclick: () => restore(ctx, version) }, `Restore version ${num(version)}`),
          h('a', {
            class: 'btn secondary', href: hrefWith({ compare: null }),
            onclick: (ev) => { ev.preventDefault(); closeDiff(ctx); ctx.history.el.querySelector('h2').focus(); },
          }, 'Close comparison')),
      ];
    })));
  if (push) heading.focus();
}

/**
 * A line diff by longest common subsequence: [[op, line]] with op '-' (only in a), '+' (only
 * in b) or ' ' (both). The common head and tail are cut first; a middle too large for the
 * table (over 4 million cells) is shown as removed then added.
 */
export function lineDiff(a, b) {
  const x = String(a).split('\n');
  const y = String(b).split('\n');
  let s = 0;
  while (s < x.length && s < y.length && x[s] === y[s]) s += 1;
  let ex = x.length;
  let ey = y.length;
  while (ex > s && ey > s && x[ex - 1] === y[ey - 1]) { ex -= 1; ey -= 1; }
  const head = x.slice(0, s).map((l) => [' ', l]);
  const tail = x.slice(ex).map((l) => [' ', l]);
  const n = ex - s;
  const m = ey - s;
  const mid = [];
  if (n * m > 4e6) {
    for (let i = s; i < ex; i += 1) mid.push(['-', x[i]]);
    for (let j = s; j < ey; j += 1) mid.push(['+', y[j]]);
    return [...head, ...mid, ...tail];
  }
  // L[i][j]: LCS length of x[s+i..ex) and y[s+j..ey)
  const w = m + 1;
  const L = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      L[i * w + j] = x[s + i] === y[s + j] ? L[(i + 1) * w + j + 1] + 1 : Math.max(L[(i + 1) * w + j], L[i * w + j + 1]);
    }
  }
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[s + i] === y[s + j]) { mid.push([' ', x[s + i]]); i += 1; j += 1; }
    else if (L[(i + 1) * w + j] >= L[i * w + j + 1]) { mid.push(['-', x[s + i]]); i += 1; }
    else { mid.push(['+', y[s + j]]); j += 1; }
  }
  for (; i < n; i += 1) mid.push(['-', x[s + i]]);
  for (; j < m; j += 1) mid.push(['+', y[s + j]]);
  return [...head, ...mid, ...tail];
}

