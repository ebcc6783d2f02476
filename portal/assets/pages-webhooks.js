// @ts-check
// Webhooks: /webhooks (the team's endpoints, create one: its secret shown once) and
// /webhooks/{webhookId} (edit, send a test, the deliveries with retry, delete). Owners and admins.
import {
  h, replace, infoDialog, field, form, loader, table, badge, time, num, alertBox, errorText, copyField,
  confirmDialog, toast, navigate, section, pager, pageOf, hrefWith, every, uid, ACTIONS, enc, busy, noAccess,
} from './dom.js';
import { api, can, actingTeam, eventTypes, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').ListAnswer} ListAnswer */
/** What the deliveries section offers the rest of the page. @typedef {{el: HTMLElement, refresh: (how?: {fast?: boolean, poll?: boolean}) => Promise<void>}} Deliveries */

// The event types a webhook can hear (the `events` of POST /v1/webhooks) are the API's EventName:
// api.js eventTypes() reads them, with their descriptions, from its OpenAPI document.
const LAST_OF = 25; // the list reads the latest delivery of this many webhooks at most
const POLL_MS = 3000;

/**
 * What the latest delivery says: {failing, text}.
 * @param {Json} w a Webhook @param {Json | null | undefined} last its latest delivery
 * @returns {{failing: boolean, text: string}}
 */
function health(w, last) {
  if (w.status === 'failing') return { failing: true, text: 'A delivery was given up after 24 hours of retries.' };
  if (w.enabled === false) return { failing: false, text: 'Paused: new events are held until it is switched on.' };
  if (!last) return { failing: false, text: 'No deliveries yet.' };
  const code = last.statusCode == null ? 'no answer' : `HTTP ${last.statusCode}`;
  if (last.status === 'delivered') return { failing: false, text: `Last delivery ${code}` };
  if (last.status === 'failed' || (last.attempts > 0 && last.status === 'pending')) {
    return { failing: true, text: `Last delivery ${code}${last.error ? `: ${last.error}` : ''}${last.status === 'pending' ? `, retrying (attempt ${num(last.attempts)})` : ', given up'}` };
  }
  return { failing: false, text: 'A delivery is waiting to be sent.' };
}

/** @param {boolean} failing @param {string} status the webhook's @param {boolean} [enabled] */
const statusBadge = (failing, status, enabled = true) => [
  !enabled && badge('Paused', 'wh-paused'),
  failing ? badge(status === 'failing' ? 'Failing' : 'Deliveries failing', 'wh-bad') : enabled && badge('Active', 'wh-good'),
];

/**
 * The event checkboxes, in a fieldset with its own error line (for details[].field "events"):
 * the API's event types, each with its description when the document has one, and the
 * `checked` ones it does not list. Without the document, an error with Try again, and the
 * `checked` ones only.
 * @param {string[]} [checked]
 */
function eventsField(checked = []) {
  const err = h('p', { class: 'field-error', id: uid('events-error'), hidden: true });
  const note = h('div', { class: 'wh-events-note' });
  const set = h('fieldset', { class: 'wh-events', 'aria-describedby': err.id },
    h('legend', null, 'Events'),
    note,
    err);
  /** @param {{value: string, label: string}} type @param {boolean} on */
  const box = ({ value, label }, on) => {
    const id = uid('ev');
    return h('div', { class: 'wh-event' },
      h('input', { type: 'checkbox', id, name: 'events', value, checked: on }),
      h('label', { for: id }, h('code', null, value), label !== value && h('span', { class: 'muted small' }, ` ${label}`)));
  };
  /** The boxes of `types`, and of the events checked that it does not list. @param {Array<{value: string, label: string}>} types */
  const show = (types) => {
    const shown = /** @type {HTMLInputElement[]} */ ([...set.querySelectorAll('input[name="events"]')]);
    const on = shown.length ? shown.filter((c) => c.checked).map((c) => c.value) : checked;
    for (const old of set.querySelectorAll('.wh-event')) old.remove();
    const others = on.filter((e) => !types.some((t) => t.value === e)).map((e) => ({ value: e, label: e }));
    note.before(...[...types, ...others].map((t) => box(t, on.includes(t.value))));
  };
  const load = () => {
    set.setAttribute('aria-busy', 'true');
    replace(note, h('p', { class: 'muted small' }, 'Loading the event types…'));
    eventTypes()
      .then((types) => { show(types); note.remove(); })
      .catch((e) => {
        show([]);
        replace(note, alertBox(`Could not load the event types: ${errorText(e)}`, {
          action: h('button', { type: 'button', class: 'btn secondary small', onclick: load }, 'Try again'),
        }));
      })
      .finally(() => set.removeAttribute('aria-busy'));
  };
  load();
  return set;
}

/**
 * Reads the checked events; shows "choose at least one" beside them and throws when none is.
 * @param {HTMLFormElement} formEl
 */
function readEvents(formEl) {
  const set = /** @type {HTMLFieldSetElement} */ (formEl.querySelector('.wh-events'));
  const err = /** @type {HTMLElement} */ (set.querySelector('.field-error'));
  const events = [.../** @type {NodeListOf<HTMLInputElement>} */ (set.querySelectorAll('input[name="events"]:checked'))].map((c) => c.value);
  err.hidden = events.length > 0;
  err.textContent = events.length ? '' : 'Choose at least one event.';
  if (!events.length) {
    set.querySelector('input')?.focus(); // none when the event types could not be read
    throw Object.assign(new Error('Choose at least one event.'), { status: 400, details: [] });
  }
  return events;
}

/**
 * The API's error for events, shown beside the checkboxes too.
 * @param {HTMLFormElement} formEl @param {unknown} err what a `catch` caught
 */
function eventsError(formEl, err) {
  if (!(err instanceof ApiError)) return err;
  const d = err.details.find((x) => String(x.field || '').startsWith('events'));
  if (d) {
    const e = /** @type {HTMLElement} */ (formEl.querySelector('.wh-events .field-error'));
    e.textContent = `Events ${d.message}`;
    e.hidden = false;
    err.details = err.details.filter((x) => x !== d);
  }
  return err;
}

// ---------------------------------------------------------------- /webhooks

/** @param {PageContext} ctx */
export function list({ view }) {
  if (!can('webhooks')) return noAccess({ view }, actingTeam().name);
  const fresh = h('div', { class: 'fresh' });
  /** @type {() => Promise<void>} */
  let reload;
  const hooks = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/webhooks');
    const rows = items.map((w, i) => {
      const cell = h('td', { class: 'wh-health' });
      const state = h('td');
      /** @param {Json | null | undefined} last */
      const show = (last) => {
        const s = health(w, last);
        replace(state, statusBadge(s.failing, w.status, w.enabled !== false));
        replace(cell, h('span', { class: s.failing ? 'wh-bad-text' : 'muted' }, s.text));
      };
      if (i < LAST_OF) {
        replace(cell, h('span', { class: 'muted' }, 'Checking…'));
        replace(state, statusBadge(w.status === 'failing', w.status, w.enabled !== false));
        api('GET', `/v1/webhooks/${enc(w.id)}/deliveries?page=1&limit=1`)
          .then((d) => show((d || [])[0]))
          .catch(() => show(null));
      } else show(null);
      return h('tr', null,
        h('th', { scope: 'row' }, h('a', { href: `/webhooks/${enc(w.id)}`, class: 'wh-url' }, w.url),
          w.description && h('p', { class: 'muted small wh-desc' }, w.description)),
        h('td', null, h('span', { class: 'wh-event-list' }, (w.events || []).map((/** @type {string} */ e) => h('code', null, e)))),
        state,
        cell,
        h('td', null, time(w.createdAt, { day: true })));
    });
    return table(['Endpoint', 'Events', 'Status', 'Latest delivery', 'Created'], rows,
      { caption: 'Webhooks', empty: 'No webhooks yet. Create one above.' });
  });
  const create = form({
    className: 'stack wh-form',
    fields: [
      field({ name: 'url', label: 'URL', type: 'url', required: true, maxlength: 2048, autocomplete: 'off',
        hint: 'An http or https address of your server. Events are POSTed there, signed per the Standard Webhooks specification.' }),
      eventsField(),
      field({ name: 'description', label: 'Description (optional)', maxlength: 500, autocomplete: 'off' }),
    ],
    submit: 'Create webhook',
    onSubmit: async (v, f) => {
      const events = readEvents(f);
      let w;
      try {
        w = await api('POST', '/v1/webhooks', { url: v.url, events, description: v.description || null });
      } catch (err) { throw eventsError(f, err); }
      f.reset();
      const heading = h('h2', { tabindex: '-1' }, 'Webhook created');
      replace(fresh, h('div', { class: 'card success' }, heading,
        h('p', null, 'Events will be sent to ', h('code', { class: 'wh-url' }, w.url), '.'),
        copyField('Signing secret', w.secret, 'Copy it now and keep it safe: it is shown this once. Verify each request’s webhook-signature header with it.'),
        h('div', { class: 'form-actions' },
          h('a', { class: 'btn primary small', href: `/webhooks/${enc(w.id)}` }, 'Open the webhook'),
          h('button', { type: 'button', class: 'btn secondary small', onclick: () => replace(fresh) }, 'Done'))));
      heading.focus();
      reload?.();
    },
  });
  view.append(
    h('p', { class: 'lead' }, 'Endpoints of your own servers that hear what happens in ', h('strong', null, actingTeam().name),
      '. Failed deliveries are retried for 24 hours.'),
    section('Create a webhook', create),
    fresh,
    section('Webhooks', hooks));
}

// ---------------------------------------------------------------- /webhooks/{webhookId}

/** @param {PageContext} ctx */
export function detail({ view, params, query, signal }) {
  if (!can('webhooks')) return noAccess({ view }, actingTeam().name);
  const id = params[0];
  const base = `/v1/webhooks/${enc(id)}`;
  eventTypes().catch(() => { /* said in the form */ }); // read while the webhook loads
  /** @type {AbortController | null} */
  let live = null; // the polling of the shown load, stopped when the page is loaded again or left
  signal.addEventListener('abort', () => live?.abort(), { once: true });
  view.append(loader(async (again) => {
    live?.abort();
    live = new AbortController();
    const mine = live.signal;
    let w;
    try {
      w = await api('GET', base);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        return [alertBox('This webhook does not exist, or it belongs to another team.', { kind: 'info' }),
          h('p', null, h('a', { href: '/webhooks' }, 'Back to the webhooks'))];
      }
      throw err;
    }
    const top = h('div', { class: 'wh-top' });
    /** @param {Json | null | undefined} last */
    const showTop = (last) => {
      const s = health(w, last);
      replace(top, s.failing && alertBox(`This webhook is failing. ${s.text}`, { kind: 'error' }));
    };
    showTop(null);
    const deliveries = deliveriesSection(w, base, query, mine, showTop);
    return [
      h('p', { class: 'lead' }, h('a', { href: '/webhooks' }, 'All webhooks'), ' · ', h('code', { class: 'wh-url' }, w.url),
        w.description && [h('br'), w.description]),
      top,
      pauseSwitch(w, base, again),
      testBox(w, base, deliveries),
      section('Settings', settingsForm(w, base, again)),
      deliveries.el,
      section('Delete', h('div', { class: 'card' },
        h('p', null, 'Deleting the webhook drops its pending deliveries. This cannot be undone.'),
        h('button', { type: 'button', class: 'btn danger', onclick: async () => {
          const done = await confirmDialog({
            title: 'Delete this webhook?',
            body: `Events will no longer be sent to ${w.url}; its pending deliveries are dropped.`,
            confirm: 'Delete webhook',
            action: () => api('DELETE', base),
          });
          if (done) { toast('Webhook deleted'); navigate('/webhooks'); }
        } }, 'Delete webhook'))),
    ];
  }, 'Loading the webhook…'));
}

/**
 * The on/off switch of the webhook (PUT {enabled}): while it is off, events are held (up to
 * 1,000) and sent when it is switched on again.
 * @param {Json} w @param {string} base the webhook's path @param {() => void} reload
 */
function pauseSwitch(w, base, reload) {
  const id = uid('enabled');
  const on = w.enabled !== false;
  const noteId = `${id}-note`;
  const out = h('div', { class: 'wh-switch-error', role: 'alert' });
  const box = h('input', { type: 'checkbox', role: 'switch', id, class: 'wh-switch-input', checked: on, 'aria-describedby': noteId,
    onchange: async () => {
      box.disabled = true;
      replace(out);
      try {
        await api('PUT', base, { enabled: box.checked });
        toast(box.checked ? 'Deliveries switched on: held events are being sent' : 'Deliveries paused: new events are held');
        reload();
      } catch (err) {
        box.checked = !box.checked;
        box.disabled = false;
        replace(out, errorText(err));
      }
    } });
  return h('div', { class: ['wh-switch', on ? 'on' : 'off'] },
    h('div', { class: 'wh-switch-row' }, box, h('label', { for: id }, 'Send events to this endpoint')),
    h('p', { class: 'hint', id: noteId }, on
      ? 'On: events are sent as they happen. Switch it off to pause deliveries without losing events.'
      : 'Paused: new events are held (up to 1,000) and nothing is sent. Switch it on to send the held events, in order.'),
    out);
}

/** "Send a test event". @param {Json} w @param {string} base @param {Deliveries} deliveries */
function testBox(w, base, deliveries) {
  if (w.enabled === false) {
    return h('div', { class: 'wh-test' }, h('button', { type: 'button', class: 'btn secondary', disabled: true }, 'Send a test event'),
      h('span', { class: 'wh-test-status' }, 'Switch deliveries on to send a test event.'));
  }
  const out = h('span', { class: 'wh-test-status', role: 'status' });
  const btn = h('button', { type: 'button', class: 'btn secondary', onclick: () => busy(btn, out, async () => {
    await api('POST', `${base}/test`);
    replace(out, 'A webhook.test event was queued; its delivery shows below.');
    deliveries.refresh({ fast: true });
  }, 'Could not send a test') }, 'Send a test event');
  return h('div', { class: 'wh-test' }, btn, out);
}

/** @param {Json} w @param {string} base @param {() => void} reload */
function settingsForm(w, base, reload) {
  return form({
    className: 'stack wh-form',
    fields: [
      field({ name: 'url', label: 'URL', type: 'url', required: true, maxlength: 2048, autocomplete: 'off', value: w.url }),
      eventsField(w.events || []),
      field({ name: 'description', label: 'Description (optional)', maxlength: 500, autocomplete: 'off', value: w.description || '' }),
      h('p', { class: 'hint' }, 'The signing secret stays the same. To pause deliveries, use the switch above.'),
    ],
    submit: 'Save changes',
    onSubmit: async (v, f) => {
      const events = readEvents(f);
      try {
        // An empty description is sent as "", since null keeps the old one.
        await api('PUT', base, { url: v.url, events, description: v.description || '' });
      } catch (err) { throw eventsError(f, err); }
      toast('Webhook saved');
      reload();
    },
  });
}

/**
 * The deliveries, filtered by status and paged, polled while the page is shown.
 * @param {Json} w @param {string} base @param {URLSearchParams} query @param {AbortSignal} signal
 * @param {(last: Json | null | undefined) => void} showTop
 * @returns {Deliveries}
 */
function deliveriesSection(w, base, query, signal, showTop) {
  const page = pageOf(query);
  const asked = query.get('status') || '';
  const status = ['pending', 'held', 'delivered', 'failed'].includes(asked) ? asked : '';
  const box = h('div', { class: 'wh-deliveries', 'aria-busy': 'true' }, h('p', { class: 'muted' }, 'Loading the deliveries…'));
  const filterId = uid('status');
  const filter = h('select', { id: filterId, class: 'compact', value: status },
    [['', 'All'], ['pending', 'Pending'], ['held', 'Held'], ['delivered', 'Delivered'], ['failed', 'Failed']].map(([v, t]) => h('option', { value: v }, t)));
  filter.addEventListener('change', () => navigate(hrefWith({ status: filter.value, page: null })));
  let pending = false;
  let fastUntil = Date.now() + 30000; // poll quickly for 30 s after opening, a test or a retry
  const refresh = async ({ fast = false, poll = false } = {}) => {
    if (fast) fastUntil = Date.now() + 30000;
    // A poll does not pull the table from under a keyboard user.
    if (poll && box.contains(document.activeElement)) return;
    const keep = box.contains(document.activeElement) ? document.activeElement?.closest('tr')?.dataset.delivery : null;
    try {
      const q = new URLSearchParams({ page: String(page), limit: '20' });
      if (status) q.set('status', status);
      /** @type {ListAnswer} */
      const res = await api('GET', `${base}/deliveries?${q}`, undefined, { full: true });
      if (signal.aborted) return;
      const items = res.data || [];
      pending = items.some((d) => d.status === 'pending');
      if (page === 1 && !status) showTop(items[0]);
      replace(box,
        table(['Event', 'Status', 'Response', 'Attempts', 'Next retry', 'Error', ACTIONS],
          items.map((d) => deliveryRow(d, base, () => refresh({ fast: true }))),
          { caption: 'Deliveries', dense: true, empty: status ? `No ${status} deliveries.` : 'No deliveries yet. Send a test event to see one.' }),
        pager(res.pagination, (p) => hrefWith({ page: p > 1 ? p : null })));
      if (keep) /** @type {HTMLElement} */ (box.querySelector(`tr[data-delivery="${CSS.escape(keep)}"] button`) || box).focus();
    } catch (err) {
      replace(box, alertBox(`Could not load the deliveries: ${errorText(err)}`, {
        action: h('button', { type: 'button', class: 'btn secondary small', onclick: () => refresh({ fast: true }) }, 'Try again'),
      }));
    } finally {
      box.removeAttribute('aria-busy');
    }
  };
  refresh();
  // New deliveries and retries show without a reload: every 3 s for a while after an action
  // when a delivery is pending, else every 30 s; not while the tab is hidden.
  let ticks = 0;
  every(POLL_MS, signal, async () => {
    ticks += 1;
    if (document.hidden) return;
    if ((pending && Date.now() < fastUntil) || ticks % 10 === 0) await refresh({ poll: true });
  });
  const el = section('Deliveries',
    h('div', { class: 'wh-filter' }, h('label', { for: filterId }, 'Status'), filter,
      h('button', { type: 'button', class: 'btn secondary small', onclick: () => refresh({ fast: true }) }, 'Refresh')),
    box);
  return { el, refresh };
}

/** @param {Json} d a Delivery @param {string} base @param {() => void} refresh */
function deliveryRow(d, base, refresh) {
  const kind = d.status === 'delivered' ? 'wh-good' : d.status === 'failed' || d.attempts > 0 ? 'wh-bad' : '';
  const text = d.status === 'pending' && d.attempts > 0 ? 'Retrying' : d.status === 'pending' ? 'Pending'
    : d.status === 'held' ? 'Held' : d.status === 'delivered' ? 'Delivered' : 'Failed';
  const rowError = h('div', { class: 'row-error', role: 'alert' });
  // A delivery whose last attempt failed offers Retry (given up, or waiting for its next retry:
  // "now" instead of after the backoff); a delivered one offers Send again (a receiver that lost
  // it, issue 55; receivers deduplicate by webhook-id). A new one is about to be sent; a held one
  // goes when the webhook is switched on.
  const failed = d.status === 'failed' || (d.status === 'pending' && d.attempts > 0);
  const again = d.status === 'delivered';
  const when = new Date(d.createdAt).toISOString();
  const retry = h('button', { type: 'button', class: 'btn secondary small', 'aria-label': `${again ? 'Send again' : 'Retry'} the ${d.event} delivery of ${when}`,
    onclick: async () => {
      retry.disabled = true;
      replace(rowError);
      try {
        await api('POST', `${base}/deliveries/${enc(d.id)}/retry`);
        toast('Delivery queued again');
        refresh();
      } catch (err) {
        replace(rowError, errorText(err));
        retry.disabled = false;
      }
    } }, again ? 'Send again' : 'Retry');
  // What it sends, as text: the event's data is the team's own (names a contact wrote, say).
  const view = h('button', { type: 'button', class: 'btn secondary small', 'aria-label': `Payload of the ${d.event} delivery of ${when}`,
    onclick: async () => {
      replace(rowError);
      try {
        const detail = await api('GET', `${base}/deliveries/${enc(d.id)}`);
        await infoDialog({
          title: `Payload of the ${d.event} delivery`,
          body: [h('p', { class: 'muted small' }, 'The JSON body of every attempt, with the ', h('code', null, 'webhook-id'), ' ', h('code', null, d.eventId || ''), '.'),
            h('pre', { class: 'payload', tabindex: '0' }, JSON.stringify(detail.payload, null, 2))],
        });
      } catch (err) {
        replace(rowError, errorText(err));
      }
    } }, 'Payload');
  return h('tr', { 'data-delivery': d.id },
    h('td', null, h('code', null, d.event), h('br'), h('span', { class: 'muted small' }, time(d.createdAt))),
    h('td', null, badge(text, kind)),
    h('td', null, d.statusCode == null ? h('span', { class: 'wh-code muted' }, '—') : h('span', { class: 'wh-code' }, String(d.statusCode)),
      d.durationMs != null && [h('br'), h('span', { class: 'muted small' }, `in ${num(d.durationMs)} ms`)]),
    h('td', null, h('span', { class: 'wh-attempts' }, num(d.attempts)),
      h('br'), h('span', { class: 'muted small' }, d.lastAttemptAt ? ['last ', time(d.lastAttemptAt)] : 'not tried yet')),
    h('td', null, d.status === 'pending' ? time(d.nextRetryAt)
      : d.status === 'held' ? h('span', { class: 'muted' }, 'When switched on') : h('span', { class: 'muted' }, '—')),
    h('td', null, d.error ? h('span', { class: 'wh-error', title: d.error }, d.error) : h('span', { class: 'muted' }, '—')),
    h('td', { class: 'actions' }, view, (failed || again) && [' ', retry], rowError));
}
