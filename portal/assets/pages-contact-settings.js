// @ts-check
// Contact settings: /settings/tags and /settings/custom-fields.
import { h, replace, field, form, loader, table, badge, confirmDialog, toast, section, ACTIONS, enc, focusTitle, tagChip as chip, opt, append } from './dom.js';
import { api, can, forgetCached as forget, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */

/**
 * A 409 (a name in use) without details names the field it is about, so it is shown beside it.
 * @param {unknown} err what a `catch` caught @param {string} name
 */
function onField(err, name) {
  if (err instanceof ApiError && err.status === 409 && !err.details.length) err.details = [{ field: name, message: err.message }];
  return err;
}

// ---------------------------------------------------------------- /settings/tags

/** @param {PageContext} ctx */
export function tags({ view }) {
  const write = can('write');
  const editSlot = h('div');
  /** @type {() => Promise<void>} */
  let reload;
  const list = loader(async (again) => {
    reload = again;
    /** @type {import('./api.js').Tag[]} */
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
  /** @param {{name?: string, color?: string | null}} [t] the tag edited */
  const tagFields = (t = {}) => [
    field({ name: 'name', label: 'Name', required: true, maxlength: 50, value: t.name, autocomplete: 'off' }),
    field({ name: 'color', label: 'Colour', type: 'color', value: (t.color || '#6B7280').toLowerCase() }),
  ];
  /** @param {import('./api.js').Tag} t */
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
    /** @type {HTMLInputElement} */ (f.elements.namedItem('name')).focus();
  };
  append(view, [
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
    section('Tags', list)]);
}

// ---------------------------------------------------------------- /settings/custom-fields

const TYPES = [['text', 'Text'], ['number', 'Number'], ['date', 'Date'], ['boolean', 'Yes / no'], ['select', 'Choice (select)']];
/** @param {unknown} s */
const splitOptions = (s) => String(s || '').split(/\r?\n|,/).map((x) => x.trim()).filter(Boolean);
/** @param {string} value */
const optionsField = (value) => field({ name: 'options', label: 'Choices', value, autocomplete: 'off', hint: 'For a choice field: the choices, separated by commas.' });
/** details[].field options[1] → options, the one Choices box. @param {unknown} err */
function fixOptions(err) {
  if (err instanceof ApiError) err.details = err.details.map((d) => ({ ...d, field: String(d.field).replace(/^options\[\d+\]$/, 'options') }));
  return err;
}

/** @param {PageContext} ctx */
export function customFields({ view }) {
  const write = can('write');
  const editSlot = h('div');
  /** @type {() => Promise<void>} */
  let reload;
  const list = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
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
  /** @param {Json} fd a CustomField */
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
        /** @type {{label: string, required: boolean, options?: string[]}} */
        const body = { label: v.label, required: v.required === 'true' };
        if (fd.type === 'select') body.options = splitOptions(v.options);
        try { await api('PUT', `/v1/contacts/custom-fields/${enc(fd.id)}`, body); } catch (err) { throw fixOptions(err); }
        forget(); toast('Field saved'); replace(editSlot); reload();
      },
    });
    const head = h('h2', { tabindex: '-1' }, `Edit the field “${fd.label}”`);
    replace(editSlot, h('section', { class: 'section' }, head,
      h('p', { class: 'muted' }, 'Its name (', h('code', null, fd.name), ') and type cannot change: delete it and create another.'), f));
    /** @type {HTMLInputElement} */ (f.elements.namedItem('label')).focus();
  };
  append(view, [
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
        /** @type {{label: string, name: string, type: string, required: boolean, options?: string[]}} */
        const body = { label: v.label, name: v.name, type: v.type, required: v.required === 'true' };
        if (v.type === 'select' || v.options.trim()) body.options = splitOptions(v.options);
        let fd;
        try { fd = await api('POST', '/v1/contacts/custom-fields', body); } catch (err) { throw onField(fixOptions(err), 'name'); }
        forget(); f.reset(); toast(`Field ${fd.label} created`); reload();
      },
    })),
    editSlot,
    section('Fields', list)]);
}
