// @ts-check
// Agents: /agents (list, create, delete) and /agents/{agentId} (fields, the "Try it" chat
// (agent-try.js), instructions with a
// live character count, the runtime settings (first message, language, voice, model, tools,
// post-call analysis), their history, a line diff of a version's text and settings against the
// current ones, restore, and the prompt-optimisation state).
import {
  h, append, replace, field, form, loader, table, badge, time, num, confirmDialog, toast, navigate,
  section, pager, pageOf, hrefWith, every, alertBox, ACTIONS, enc, focusTitle, areaField, uid, setFieldError, phone, cap,
} from './dom.js';
import { api, can, actingTeam, ApiError } from './api.js';
import { trySection } from './agent-try.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./api.js').Json} Json */
/** A knowledge base as a select offers it: [id, name]. @typedef {[string, string]} KbOption */
/**
 * What the sections of an agent's page share: the agent (replaced when it is saved), the page's
 * signal, its title, and the sections that act on each other.
 * @typedef {object} AgentCtx
 * @property {string} id
 * @property {Json} agent
 * @property {AbortSignal} signal
 * @property {(name: string) => void} setTitle
 * @property {HTMLElement} diffSlot
 * @property {{el: HTMLElement, reload: () => void}} history
 * @property {{el: HTMLElement, reload: () => void, refresh: () => Promise<void>, current: () => Json | null}} instructions
 * @property {{el: HTMLElement, show: (a: Json) => void}} settings
 */
/**
 * An agent's runtime settings as settingsOf() puts them.
 * @typedef {object} Settings
 * @property {string | null} firstMessage
 * @property {string | null} language
 * @property {{provider: string, voiceId: string, speed: number | null} | null} voice
 * @property {{provider: string, name: string, temperature: number | null} | null} model
 * @property {Json[]} tools
 * @property {Json[]} postCallAnalysis
 */

const LIMIT = 100000; // characters (Unicode code points, as the API counts them)
const PER_PAGE = 50;  // GET /v1/agents is not paged: the page pages it
const TYPES = [['phone', 'Phone'], ['chat', 'Chat']];
/** @param {string} t */
const typeName = (t) => (TYPES.find(([v]) => v === t) || [t, t])[1];
/** @param {string} id */
const agentPath = (id) => `/v1/agents/${enc(id)}`;

/** Characters as the API counts them: code points, so an emoji is one. @param {string} s */
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
  const control = /** @type {HTMLTextAreaElement} */ (el.querySelector('textarea'));
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

/**
 * The team's knowledge bases for a select: [[id, name]], or null when they cannot be read.
 * @returns {Promise<KbOption[] | null>}
 */
async function knowledgebases() {
  try {
    /** @type {Json[] | null} */
    const list = await api('GET', '/v1/knowledgebase');
    return (list || []).map((k) => [k.id, k.name || 'Unnamed knowledge base']);
  } catch {
    return null;
  }
}

/** @param {KbOption[] | null} kbs @param {Json | null | undefined} current the agent's knowledge base */
function kbField(kbs, current) {
  const options = [['', 'None'], ...(kbs || [])];
  if (current && !options.some(([v]) => v === current.id)) options.push([current.id, current.name || 'Linked knowledge base']);
  return field({
    name: 'knowledgebaseId', label: 'Knowledge base', type: 'select', options, value: current?.id || '',
    hint: kbs ? 'What the agent may answer from.' : 'The knowledge bases could not be loaded; only the current link is offered.',
  });
}

/** @param {Json | null | undefined} kb */
function kbCell(kb) {
  if (!kb) return h('span', { class: 'muted' }, 'None');
  return h('a', { href: `/knowledge/${enc(kb.id)}` }, kb.name || 'Unnamed knowledge base');
}

/** @param {Json} a an Agent @param {() => void} after once it is deleted */
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
  const asked = query.get('type') || '';
  const type = TYPES.some(([v]) => v === asked) ? asked : '';
  const q = (query.get('q') || '').trim();
  const filtered = Boolean(type || q);
  /** @type {() => Promise<void>} */
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
    /** @type {Json[]} */
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

/** @param {KbOption[] | null} kbs */
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
      /** @type {{name: string, type: string, knowledgebaseId: string | null, description: string | null, instructions?: string}} */
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
    /** @type {Json} */
    let agent;
    /** @type {KbOption[] | null} */
    let kbs;
    try {
      [agent, kbs] = await Promise.all([api('GET', agentPath(id)), can('write') ? knowledgebases() : null]);
    } catch (err) {
      if (err instanceof ApiError && (err.status === 404 || (err.status === 400 && err.code === 'VALIDATION_ERROR'))) {
        if (title && !signal.aborted) { title.textContent = 'Agent not found'; document.title = 'Agent not found · Switchboard'; }
        return [
          alertBox(`There is no agent with the id “${id}” in ${actingTeam().name}. It may have been deleted, or it belongs to another team.`, { kind: 'info' }),
          h('p', null, h('a', { href: '/agents' }, 'Go to the agents')),
        ];
      }
      throw err;
    }
    /** @param {string} name */
    const setTitle = (name) => {
      if (signal.aborted) return; // a late answer after the user left
      if (title) title.textContent = name;
      document.title = `${name} · Agent · Switchboard`;
    };
    setTitle(agent.name);
    // The sections are added below: each may use those before it.
    const ctx = /** @type {AgentCtx} */ ({ id, agent, signal, setTitle });
    ctx.diffSlot = h('div', { class: 'ag-diff-slot' });
    ctx.history = historySection(ctx);
    ctx.instructions = instructionsSection(ctx);
    ctx.settings = settingsSection(ctx);
    const compare = Number.parseInt(query.get('compare') || '', 10);
    if (compare > 0) showDiff(ctx, compare, false);
    return [
      h('p', { class: 'ag-back' }, h('a', { href: '/agents' }, '← All agents')),
      detailsSection(ctx, kbs),
      trySection(ctx),
      ctx.instructions.el,
      ctx.settings.el,
      ctx.diffSlot,
      ctx.history.el,
    ];
  }));
}

/** @param {AgentCtx} ctx @param {KbOption[] | null} kbs */
function detailsSection(ctx, kbs) {
  const facts = h('dl', { class: 'ag-facts card' });
  /** @param {Json} a */
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

// ---- runtime settings: first message, language, voice, model, tools, post-call analysis

const MAX_TOOLS = 32;
const MAX_FIELDS = 50;
const TOOL_TYPES = [['function', 'Function (calls your URL)'], ['transfer_call', 'Transfer the call'], ['end_call', 'End the call']];
const FIELD_TYPES = [['string', 'Text'], ['number', 'Number'], ['boolean', 'Yes or no'], ['enum', 'One of a list']];
/** @param {string} t */
const toolTypeName = (t) => (TOOL_TYPES.find(([v]) => v === t) || [t, t])[1];
/** @param {string} t */
const fieldTypeName = (t) => (FIELD_TYPES.find(([v]) => v === t) || [t, t])[1];
const DEFAULT_PARAMETERS = '{\n  "type": "object",\n  "properties": {}\n}';
const LANGUAGES = ['en-US', 'en-GB', 'en-AU', 'de-DE', 'fr-FR', 'es-ES', 'es-MX', 'it-IT', 'nl-NL', 'pt-BR', 'pt-PT', 'pl-PL', 'sv-SE', 'ja-JP', 'ko-KR', 'zh-CN', 'hi-IN'];

/** @param {any} v */
const orNull = (v) => (v === undefined || v === '' ? null : v);

/**
 * An agent's runtime settings with every member, in one order, tools and fields with their own
 * members only: what the form compares to know what changed, and what the diff pretty-prints.
 * @param {Json | null | undefined} a an agent, or a history version's `settings`
 * @returns {Settings}
 */
export function settingsOf(a) {
  /** @param {Json} t */
  const tool = (t) => {
    if (t.type === 'function') {
      return { type: t.type, name: t.name ?? '', description: orNull(t.description), parameters: t.parameters ?? null, url: t.url ?? '' };
    }
    if (t.type === 'transfer_call') return { type: t.type, number: t.number ?? '', description: orNull(t.description) };
    return { type: t.type, description: orNull(t.description) };
  };
  /** @param {Json} f */
  const analysisField = (f) => ({
    name: f.name ?? '', type: f.type, description: orNull(f.description), ...(f.type === 'enum' ? { choices: f.choices || [] } : {}),
  });
  return {
    firstMessage: orNull(a?.firstMessage),
    language: orNull(a?.language),
    voice: a?.voice ? { provider: a.voice.provider ?? '', voiceId: a.voice.voiceId ?? '', speed: orNull(a.voice.speed) } : null,
    model: a?.model ? { provider: a.model.provider ?? '', name: a.model.name ?? '', temperature: orNull(a.model.temperature) } : null,
    tools: (a?.tools || []).map(tool),
    postCallAnalysis: (a?.postCallAnalysis || []).map(analysisField),
  };
}

/** The settings as the diff shows them: pretty-printed JSON, keys in settingsOf's order. @param {Json | null | undefined} a */
export const settingsText = (a) => JSON.stringify(settingsOf(a), null, 2);

/**
 * A field's path as the API names it ("tools/2/parameters" as a JSON pointer, or
 * "tools[2].parameters") → the name of the control that shows its error: the path itself, or the
 * nearest enclosing one that the form has (a tool's box for "tools[2]", the list for "tools").
 * @param {HTMLFormElement} formEl @param {string | undefined} field
 */
function controlName(formEl, field) {
  let path = String(field || '');
  if (path.includes('/')) {
    path = path.split('/').filter(Boolean).map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i ? `.${p}` : p)).join('');
  }
  for (let p = path; p;) {
    if (formEl.elements.namedItem(p)) return p;
    const up = p.replace(/(\[\d+\]|\.[^.[\]]+)$/, '');
    if (up === p) break;
    p = up;
  }
  return path;
}

/**
 * A box of the form with its own error line, for errors about the box as a whole.
 * @param {string} name @param {Child} legend @param {...Child} children
 */
function box(name, legend, ...children) {
  const err = h('p', { class: 'field-error', id: uid('set-error'), hidden: true });
  return h('fieldset', { class: 'ag-set', name, 'aria-describedby': err.id, tabindex: '-1' },
    h('legend', null, legend), children, err);
}

/**
 * A JSON Schema in a textarea: parsed as it is typed, an error beside it when it is not JSON (or not an object).
 * @param {Parameters<typeof areaField>[0]} spec
 */
function jsonArea(spec) {
  const el = areaField({ rows: 6, wrap: 'ag-area', spellcheck: 'false', class: 'ag-mono ag-json', ...spec });
  const control = /** @type {HTMLTextAreaElement} */ (el.querySelector('textarea'));
  const check = () => {
    let message = '';
    const text = control.value.trim();
    if (!text) message = 'Enter the parameters as a JSON Schema, for example {"type": "object", "properties": {}}.';
    else {
      try {
        const value = JSON.parse(text);
        if (value === null || typeof value !== 'object' || Array.isArray(value)) message = 'The parameters must be a JSON object (a JSON Schema).';
      } catch (err) {
        message = `This is not valid JSON: ${err instanceof Error ? err.message : String(err)}`;
      }
    }
    control.setCustomValidity(message);
    setFieldError(control, message);
  };
  control.addEventListener('input', check);
  queueMicrotask(check);
  return el;
}

/**
 * A list of boxes (tools, analysis fields) with Add and Remove: each box's controls are named
 * `<list>[i].<key>` (as the API names the fields of its errors), renumbered when one is removed.
 * @param {{list: string, title: string, one: string, max: number, items: Json[], build: (item: Json | null) => HTMLElement[], empty: string}} spec
 */
function repeater({ list, title, one, max, items, build, empty }) {
  const boxes = h('div', { class: 'ag-cards' });
  const status = h('p', { class: 'sr-only', role: 'status' });
  const emptyNote = h('p', { class: 'muted ag-empty' }, empty);
  const add = h('button', { type: 'button', class: 'btn secondary small' }, `Add ${one}`);
  const renumber = () => {
    [...boxes.children].forEach((card, i) => {
      card.setAttribute('name', `${list}[${i}]`);
      /** @type {HTMLLegendElement} */ (card.querySelector('legend')).textContent = `${cap(one)} ${i + 1}`;
      for (const c of card.querySelectorAll('[data-k]')) c.setAttribute('name', `${list}[${i}].${c.getAttribute('data-k')}`);
    });
    emptyNote.hidden = boxes.children.length > 0;
    add.disabled = boxes.children.length >= max;
    add.title = add.disabled ? `At most ${max} ${one}s` : '';
  };
  /** @param {Json | null} item */
  const card = (item) => {
    const remove = h('button', { type: 'button', class: 'btn danger-quiet small ag-remove' }, 'Remove');
    const el = box('', '', build(item), h('div', { class: 'ag-card-actions' }, remove));
    el.classList.add('ag-card');
    remove.addEventListener('click', () => {
      const i = [...boxes.children].indexOf(el);
      const label = /** @type {HTMLLegendElement} */ (el.querySelector('legend')).textContent;
      el.remove();
      renumber();
      status.textContent = `${label} removed.`;
      /** @type {HTMLElement} */ (boxes.children[Math.min(i, boxes.children.length - 1)]?.querySelector('select, input, textarea') || add).focus();
    });
    return el;
  };
  boxes.append(...items.map(card));
  add.addEventListener('click', () => {
    const el = card(null);
    boxes.append(el);
    renumber();
    status.textContent = `${/** @type {HTMLLegendElement} */ (el.querySelector('legend')).textContent} added.`;
    /** @type {HTMLElement | null} */ (el.querySelector('select, input, textarea'))?.focus();
  });
  renumber();
  return box(list, title, emptyNote, boxes, h('div', null, add), status);
}

/**
 * A control of a list's box: named by renumber() from its data-k.
 * @param {string} k
 * @param {{label: Child, [attribute: string]: any}} spec
 * @param {(spec: {name: string, label: Child, [attribute: string]: any}) => HTMLElement} [make] field(), areaField() or jsonArea()
 */
const keyed = (k, spec, make = field) => {
  const el = make({ name: k, ...spec });
  /** @type {Element} */ (el.querySelector('input, select, textarea')).setAttribute('data-k', k);
  return el;
};

/** A tool's box: its type, and the fields of that type (swapped when the type changes). @param {Json | null} t */
function toolFields(t) {
  const type = t?.type || 'function';
  const typeField = keyed('type', { label: 'Type', type: 'select', options: TOOL_TYPES, value: type });
  const own = h('div', { class: 'ag-own' });
  const description = keyed('description', { label: 'Description (optional)', rows: 2, wrap: 'ag-area', maxlength: 1000, value: t?.description || '', hint: 'When the model should use it.' }, areaField);
  /** @param {string} kind @param {Json | null} item */
  const fill = (kind, item) => {
    const box = own.closest('fieldset');
    const parts = kind === 'function' ? [
      keyed('name', { label: 'Name', required: true, maxlength: 64, autocomplete: 'off', spellcheck: 'false', value: item?.name || '', hint: 'Letters, digits, _ and -; unique among the tools.' }),
      keyed('url', { label: 'URL', type: 'url', required: true, autocomplete: 'off', value: item?.url || '', hint: 'Where the runtime sends the arguments: an https address.' }),
      keyed('parameters', {
        label: 'Parameters (JSON Schema)', value: item?.parameters ? JSON.stringify(item.parameters, null, 2) : DEFAULT_PARAMETERS,
        hint: 'The arguments the model fills in, as a JSON Schema of type object.',
      }, jsonArea),
    ] : kind === 'transfer_call' ? [
      keyed('number', { label: 'Number', type: 'tel', required: true, autocomplete: 'off', value: item?.number || '', placeholder: '+14155550132', hint: 'In international (E.164) form: + and the country code.' }),
    ] : [];
    replace(own, parts);
    if (box) {
      const name = box.getAttribute('name');
      for (const c of own.querySelectorAll('[data-k]')) c.setAttribute('name', `${name}.${c.getAttribute('data-k')}`);
    }
  };
  fill(type, t);
  /** @type {HTMLSelectElement} */ (typeField.querySelector('select')).addEventListener('change', (ev) => fill(/** @type {HTMLSelectElement} */ (ev.target).value, null));
  return [typeField, own, description];
}

/** An analysis field's box: name, type, description, and the choices of an "enum". @param {Json | null} f */
function analysisFields(f) {
  const type = f?.type || 'string';
  const typeField = keyed('type', { label: 'Type', type: 'select', options: FIELD_TYPES, value: type });
  const choices = keyed('choices', {
    label: 'Choices', rows: 3, wrap: 'ag-area', value: (f?.choices || []).join('\n'), required: true, hint: 'One a line (1 to 50).',
  }, areaField);
  /** @param {string} kind */
  const show = (kind) => {
    choices.hidden = kind !== 'enum';
    /** @type {HTMLTextAreaElement} */ (choices.querySelector('textarea')).disabled = kind !== 'enum';
  };
  show(type);
  /** @type {HTMLSelectElement} */ (typeField.querySelector('select')).addEventListener('change', (ev) => show(/** @type {HTMLSelectElement} */ (ev.target).value));
  return [
    keyed('name', { label: 'Name', required: true, maxlength: 64, autocomplete: 'off', spellcheck: 'false', value: f?.name || '', hint: 'The key in the call’s analysis.' }),
    typeField,
    keyed('description', { label: 'Description (optional)', rows: 2, wrap: 'ag-area', maxlength: 1000, value: f?.description || '', hint: 'What to extract, for the model.' }, areaField),
    choices,
  ];
}

/**
 * Reads the form into settings (settingsOf's shape); a voice or model half filled in is an error beside its field.
 * @param {HTMLFormElement} formEl
 */
function readSettings(formEl) {
  /** @param {string} name */
  const value = (name) => {
    const c = /** @type {HTMLInputElement | null} */ (formEl.elements.namedItem(name));
    return c && !c.disabled ? c.value.trim() : '';
  };
  /** @param {string} name */
  const number = (name) => (value(name) === '' ? null : Number(value(name)));
  /** @type {import('./api.js').ErrorDetail[]} */
  const details = [];
  /** A voice or a model: null when none of it is filled in. @param {string} group @param {string[]} keys @param {string} extra */
  const pair = (group, keys, extra) => {
    const filled = [...keys, extra].some((k) => value(`${group}.${k}`) !== '');
    if (!filled) return null;
    for (const k of keys) if (!value(`${group}.${k}`)) details.push({ field: `${group}.${k}`, message: `is needed for a ${group}` });
    return Object.fromEntries([...keys.map((k) => [k, value(`${group}.${k}`)]), [extra, number(`${group}.${extra}`)]]);
  };
  /** @param {string} list */
  const cards = (list) => [...formEl.querySelectorAll(`fieldset[name^="${list}["]`)];
  const settings = {
    firstMessage: orNull(value('firstMessage')),
    language: orNull(value('language')),
    voice: pair('voice', ['provider', 'voiceId'], 'speed'),
    model: pair('model', ['provider', 'name'], 'temperature'),
    tools: cards('tools').map((_, i) => {
      const p = `tools[${i}]`;
      const type = value(`${p}.type`);
      const description = orNull(value(`${p}.description`));
      if (type === 'function') {
        return { type, name: value(`${p}.name`), description, parameters: JSON.parse(value(`${p}.parameters`)), url: value(`${p}.url`) };
      }
      if (type === 'transfer_call') return { type, number: value(`${p}.number`), description };
      return { type, description };
    }),
    postCallAnalysis: cards('postCallAnalysis').map((_, i) => {
      const p = `postCallAnalysis[${i}]`;
      const type = value(`${p}.type`);
      const f = { name: value(`${p}.name`), type, description: orNull(value(`${p}.description`)) };
      return type === 'enum' ? { ...f, choices: value(`${p}.choices`).split('\n').map((s) => s.trim()).filter(Boolean) } : f;
    }),
  };
  if (details.length) throw new ApiError(400, { error: 'A voice needs its provider and voice, a model its provider and name.', details });
  return settings;
}

/** A read-only account of the settings (for those who may not change them). @param {Json} a */
function settingsFacts(a) {
  const s = settingsOf(a);
  const none = (text = 'Not set') => h('span', { class: 'muted' }, text);
  /** @param {...unknown} xs */
  const parts = (...xs) => xs.filter(Boolean).join(' · ');
  return h('dl', { class: 'ag-facts card' },
    h('div', { class: 'ag-wide' }, h('dt', null, 'First message'), h('dd', { class: 'ag-pre' }, s.firstMessage ?? none())),
    h('div', null, h('dt', null, 'Language'), h('dd', null, s.language ?? none())),
    h('div', null, h('dt', null, 'Voice'), h('dd', null, s.voice
      ? parts(s.voice.provider, s.voice.voiceId, s.voice.speed != null && `speed ${s.voice.speed}`) : none())),
    h('div', null, h('dt', null, 'Model'), h('dd', null, s.model
      ? parts(s.model.provider, s.model.name, s.model.temperature != null && `temperature ${s.model.temperature}`) : none())),
    h('div', { class: 'ag-wide' }, h('dt', null, 'Tools'), h('dd', null, s.tools.length
      ? h('ul', { class: 'ag-list' }, s.tools.map((t) => h('li', null,
        h('strong', null, t.type === 'function' ? t.name : toolTypeName(t.type)),
        t.type === 'function' && h('span', { class: 'muted' }, ` (function, ${t.url})`),
        t.type === 'transfer_call' && [' to ', phone(t.number)],
        t.description && [': ', t.description])))
      : none('No tools'))),
    h('div', { class: 'ag-wide' }, h('dt', null, 'Post-call analysis'), h('dd', null, s.postCallAnalysis.length
      ? h('ul', { class: 'ag-list' }, s.postCallAnalysis.map((f) => h('li', null,
        h('strong', null, f.name), h('span', { class: 'muted' }, ` (${fieldTypeName(f.type)}${f.type === 'enum' ? `: ${f.choices.join(', ')}` : ''})`),
        f.description && [': ', f.description])))
      : none('Nothing extracted'))));
}

/** The settings section: a form for those who may write (only what changed is sent), else the facts. @param {AgentCtx} ctx */
function settingsSection(ctx) {
  const slot = h('div');
  const el = h('section', { class: 'section', 'aria-labelledby': 'ag-set-h' },
    h('h2', { id: 'ag-set-h', tabindex: '-1' }, 'Runtime settings'),
    h('p', { class: 'hint ag-set-lead' }, 'What a runtime needs besides the instructions. Each saved change is a new version in the history, with the instructions, so it can be compared and restored.'),
    slot);
  /** @param {Json} a */
  const show = (a) => {
    if (!can('write')) return replace(slot, settingsFacts(a));
    const s = settingsOf(a);
    const languages = uid('languages');
    const f = form({
      className: 'grid ag-settings',
      fields: [
        areaField({ name: 'firstMessage', label: 'First message (optional)', rows: 2, wrap: 'ag-area', maxlength: 5000, value: s.firstMessage ?? '', hint: 'What the agent says first. Empty: the runtime’s default.' }),
        field({ name: 'language', label: 'Language', value: s.language ?? '', list: languages, autocomplete: 'off', spellcheck: 'false', placeholder: 'en-US', hint: 'A BCP 47 tag such as en-US or de-DE. Empty: not set.' }),
        h('datalist', { id: languages }, LANGUAGES.map((l) => h('option', { value: l }))),
        box('voice', 'Voice',
          field({ name: 'voice.provider', label: 'Voice provider', value: s.voice?.provider ?? '', autocomplete: 'off', placeholder: 'elevenlabs' }),
          field({ name: 'voice.voiceId', label: 'Voice id', value: s.voice?.voiceId ?? '', autocomplete: 'off', spellcheck: 'false' }),
          field({ name: 'voice.speed', label: 'Speed', type: 'number', min: 0.5, max: 2, step: 0.05, inputmode: 'decimal', value: s.voice?.speed ?? '', hint: '0.5 to 2. Empty: normal speed.' })),
        box('model', 'Model',
          field({ name: 'model.provider', label: 'Model provider', value: s.model?.provider ?? '', autocomplete: 'off', placeholder: 'openai' }),
          field({ name: 'model.name', label: 'Model name', value: s.model?.name ?? '', autocomplete: 'off', spellcheck: 'false' }),
          field({ name: 'model.temperature', label: 'Temperature', type: 'number', min: 0, max: 2, step: 0.1, inputmode: 'decimal', value: s.model?.temperature ?? '', hint: '0 to 2. Empty: the provider’s default.' })),
        repeater({ list: 'tools', title: 'Tools', one: 'tool', max: MAX_TOOLS, items: s.tools, build: toolFields, empty: 'No tools: the agent only talks.' }),
        repeater({ list: 'postCallAnalysis', title: 'Post-call analysis', one: 'field', max: MAX_FIELDS, items: s.postCallAnalysis, build: analysisFields, empty: 'Nothing is extracted from calls beyond the summary, sentiment and success.' }),
      ],
      submit: 'Save settings',
      onSubmit: async (_, formEl) => {
        const want = readSettings(formEl);
        /** @type {Record<string, unknown>} */
        const have = settingsOf(ctx.agent);
        const body = Object.fromEntries(Object.entries(want).filter(([k, v]) => JSON.stringify(v) !== JSON.stringify(have[k])));
        if (!Object.keys(body).length) { toast('The settings have not changed'); return; }
        let a;
        try {
          a = await api('PUT', agentPath(ctx.id), body);
        } catch (err) {
          if (err instanceof ApiError) for (const d of err.details) d.field = controlName(formEl, d.field);
          throw err;
        }
        ctx.agent = a;
        show(a);
        toast('Settings saved as a new version');
        ctx.instructions.refresh();
        ctx.history.reload();
      },
    });
    return replace(slot, f);
  };
  show(ctx.agent);
  return { el, show };
}

// ---- instructions: editor, count, save, prompt-optimisation state

/** @type {Record<string, [string, string]>} */
const OPT = {
  queued: ['Queued', 'warn'], running: ['Running', 'warn'], completed: ['Up to date', 'ag-ok'], failed: ['Failed', 'ag-bad'],
};

/** @param {Json | null | undefined} po the promptOptimization @param {number} current the current version */
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
/** @type {Record<string, string>} */
const OPT_MEANS = {
  queued: 'Queued means your saved text is waiting its turn to be prepared for conversations; it usually starts within seconds. Until it is done, new conversations use the previously prepared version.',
  running: 'Running means your saved text is being prepared for conversations now. Until it is done, new conversations use the previously prepared version.',
  completed: 'Up to date: new conversations use the prepared text of the version shown.',
  failed: 'Failed: new conversations keep using the last text that was prepared. Saving the instructions again tries once more.',
};

/** The state line, what it means, and what prompt optimisation is (folded). @param {Json | null | undefined} po */
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

/** @param {AgentCtx} ctx @returns {AgentCtx['instructions']} */
function instructionsSection(ctx) {
  const write = can('write');
  const status = h('div', { class: 'ag-status' });
  const slot = h('div');
  const el = h('section', { class: 'section', 'aria-labelledby': 'ag-instr-h' },
    h('h2', { id: 'ag-instr-h', tabindex: '-1' }, 'Instructions'), status, slot);
  /** @type {Json | null} */
  let saved = null;

  /** @param {Json} ins */
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

  /** @param {Json} ins */
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
      unsaved.textContent = ta.control.value === saved?.instructions ? '' : 'Unsaved changes';
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
  // A settings change is a new version too: its number and state, the editor left as it is.
  const refresh = async () => {
    const ins = await api('GET', `${agentPath(ctx.id)}/instructions`).catch(() => null);
    if (!ins || ctx.signal.aborted) return;
    saved = ins;
    showStatus(ins);
  };
  return { el, reload: load, refresh, current: () => saved };
}

// ---- history, restore

/** @param {AgentCtx} ctx @returns {AgentCtx['history']} */
function historySection(ctx) {
  /** @type {(() => Promise<void>) | undefined} */
  let again;
  const box = loader(async (run) => {
    again = run;
    /** @type {Json[]} */
    const items = (await api('GET', `${agentPath(ctx.id)}/instructions/history`)) || [];
    // Newest first: a version whose text is the one before it changed the settings alone
    // (issue 55: such a version looked like a text change).
    const rows = items.map((v, i) => h('tr', { 'data-version': v.version },
      h('th', { scope: 'row', class: 'nowrap' }, `Version ${num(v.version)}`),
      h('td', null, time(v.createdAt)),
      h('td', null, time(v.replacedAt)),
      h('td', { class: 'num' }, num(chars(v.instructions))),
      h('td', { class: 'ag-first' },
        i + 1 < items.length && items[i + 1].instructions === v.instructions
          ? [badge('Settings only', 'accent'), ' '] : null,
        h('span', { class: 'ag-preview', title: firstLine(v.instructions) }, firstLine(v.instructions) || '—')),
      h('td', { class: 'actions' },
        h('a', {
          class: 'btn secondary small', href: hrefWith({ compare: v.version }), 'aria-label': `Compare version ${v.version} with the current version`,
          onclick: (/** @type {Event} */ ev) => { ev.preventDefault(); showDiff(ctx, v.version, true); },
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

/** @param {unknown} s */
const firstLine = (s) => (String(s).split('\n').find((l) => l.trim()) || '').trim().slice(0, 120);

/** @param {AgentCtx} ctx @param {number} version */
function restore(ctx, version) {
  return confirmDialog({
    title: `Restore version ${version}?`,
    body: `Its text and runtime settings become the current ones as a new version; what they replace is kept in the history.${
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
    api('GET', agentPath(ctx.id)).then((a) => { ctx.agent = a; ctx.settings.show(a); }, () => {});
    ctx.instructions.el.querySelector('h2')?.focus();
  });
}

// ---- diff of a saved version against the current text

/** @param {AgentCtx} ctx */
function closeDiff(ctx) {
  replace(ctx.diffSlot);
  if (new URLSearchParams(location.search).has('compare')) history.replaceState(null, '', hrefWith({ compare: null }));
}

/**
 * The lines of a diff as a list: each marked added, removed or unchanged in words for screen
 * readers, and by colour and sign for the eye.
 * @param {string[][]} ops lineDiff's answer ([op, line]) @param {string} label the list's name
 */
function diffList(ops, label) {
  // Focusable: a long diff scrolls inside its box, by keyboard too.
  return h('ol', { class: 'ag-diff', 'aria-label': label, tabindex: '0' }, ops.map(([op, line]) => {
    const kind = op === '+' ? 'add' : op === '-' ? 'del' : 'same';
    const word = op === '+' ? 'Added: ' : op === '-' ? 'Removed: ' : 'Unchanged: ';
    return h('li', { class: kind, 'data-diff': kind },
      h('span', { class: 'ag-mark', 'aria-hidden': 'true' }, op === ' ' ? '' : op === '-' ? '−' : '+'),
      h('span', { class: 'sr-only' }, word),
      h('span', { class: 'ag-line' }, line || ' '));
  }));
}

/** "2 lines added, 1 removed" of a diff, and whether anything differs. @param {string[][]} ops */
function diffCount(ops) {
  const added = ops.filter((o) => o[0] === '+').length;
  const removed = ops.filter((o) => o[0] === '-').length;
  return { changed: added + removed > 0, text: `${num(added)} ${added === 1 ? 'line' : 'lines'} added, ${num(removed)} removed` };
}

/**
 * Version `version` against the current text and settings, in the diff slot.
 * @param {AgentCtx} ctx @param {number} version @param {boolean} push a new history entry (?compare=)
 */
function showDiff(ctx, version, push) {
  if (push) history.pushState(null, '', hrefWith({ compare: version }));
  const heading = h('h2', { tabindex: '-1' }, `Version ${num(version)} compared with the current version`);
  heading.id = uid('diff');
  replace(ctx.diffSlot, h('section', { class: 'section ag-diff-box', 'aria-labelledby': heading.id }, heading,
    loader(async () => {
      const [old, cur, agent] = await Promise.all([
        api('GET', `${agentPath(ctx.id)}/instructions/history/${enc(version)}`).catch((err) => {
          if (err.status === 404) err.message = `Version ${version} is not in the history (only the last 20 are kept).`;
          throw err;
        }),
        ctx.instructions?.current() || api('GET', `${agentPath(ctx.id)}/instructions`),
        api('GET', agentPath(ctx.id)),
      ]);
      const text = lineDiff(old.instructions, cur.instructions);
      const textCount = diffCount(text);
      const settings = old.settings ? lineDiff(settingsText(old.settings), settingsText(agent)) : null;
      const settingsCount = settings && diffCount(settings);
      return [
        h('p', null, `From version ${num(version)} (set `, time(old.createdAt), `) to the current version ${num(cur.version)}.`),
        h('p', { class: 'ag-legend hint' },
          h('span', { class: 'ag-key del' }, '− Removed'), ' in version ', num(version), ' only · ',
          h('span', { class: 'ag-key add' }, '+ Added'), ' in the current one only'),
        h('div', { class: 'ag-diffs' },
          h('div', { class: 'ag-diff-col' },
            h('h3', null, 'Instructions'),
            h('p', null, h('strong', null, textCount.text), '.'),
            !textCount.changed && h('p', { class: 'muted' }, 'The texts are the same.'),
            diffList(text, `Line differences of the instructions, version ${version} to current`)),
          h('div', { class: 'ag-diff-col' },
            h('h3', null, 'Runtime settings'),
            settings
              ? [h('p', null, h('strong', null, settingsCount?.text), ' (as JSON).'),
                !settingsCount?.changed && h('p', { class: 'muted' }, 'The settings are the same.'),
                diffList(settings, `Line differences of the runtime settings, version ${version} to current`)]
              : h('p', { class: 'muted' }, 'This version has no settings recorded.'))),
        h('div', { class: 'form-actions' },
          can('write') && h('button', { type: 'button', class: 'btn primary', onclick: () => restore(ctx, version) }, `Restore version ${num(version)}`),
          h('a', {
            class: 'btn secondary', href: hrefWith({ compare: null }),
            onclick: (/** @type {Event} */ ev) => { ev.preventDefault(); closeDiff(ctx); ctx.history.el.querySelector('h2')?.focus(); },
          }, 'Close comparison')),
      ];
    })));
  if (push) heading.focus();
}

/**
 * A line diff by longest common subsequence: [[op, line]] with op '-' (only in a), '+' (only
 * in b) or ' ' (both). The common head and tail are cut first; a middle too large for the
 * table (over 4 million cells) is shown as removed then added.
 * @param {unknown} a @param {unknown} b
 * @returns {string[][]}
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
  /** @type {string[][]} */
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

