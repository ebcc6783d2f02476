// @ts-check
// Pages of a signed-in team: overview, API keys, members, subteams, audit log.
import {
  h, append, replace, field, form, loader, table, badge, time, num, fullName, cap, alertBox,
  copyField, confirmDialog, formDialog, toast, navigate, section, pager, pageOf, ACTIONS, enc, focusTitle, plural,
  setFieldError, tile, busy, noAccess,
} from './dom.js';
import {
  api, state, actingTeam, can, setScope, loadSubteams, ROLES, isOwner, isOwnerRole, auditActions, ApiError,
} from './api.js';
import { barChart, usageTable, totals, sparkBars } from './charts.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./dom.js').Child} Child */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {import('./api.js').ListAnswer} ListAnswer */
/** @typedef {import('./api.js').TeamRef} TeamRef */


/**
 * Shows a result (the new key, an invitation link) in `slot`, focused, with a Done button.
 * @param {HTMLElement} slot @param {string} title @param {Child} content @param {...Child} actions
 */
function result(slot, title, content, ...actions) {
  const heading = h('h2', { tabindex: '-1' }, title);
  replace(slot, h('div', { class: 'card success' }, heading, content, h('div', { class: 'form-actions' }, actions,
    h('button', { type: 'button', class: 'btn secondary small', onclick: () => replace(slot) }, 'Done'))));
  heading.focus();
}

/** @param {string} u */
const absUrl = (u) => { try { return new URL(u, location.origin).href; } catch { return String(u); } };

/**
 * Acts on `team` from now on (the agency or one of its subteams), and shows `to` or this page again.
 * @param {TeamRef} team @param {string} [to]
 */
export function switchTeam(team, to) {
  setScope(team);
  toast(`Now acting on ${team.name}`);
  navigate(to || location.pathname + location.search, { replace: !to });
}


// ---------------------------------------------------------------- overview

/** @param {PageContext} ctx */
export function overview({ view }) {
  const team = actingTeam();
  view.append(loader(async () => {
    const [me, alert] = await Promise.all([
      api('GET', '/v1/me'),
      api('GET', '/v1/credits/alert').catch((err) => ({ err })),
    ]);
    const balance = me.credits?.balance;
    const sub = me.subscription || {};
    const thresholdSlot = h('div', { class: 'tile-slot' });
    const balanceSlot = h('div', { class: 'tile-slot' });
    /** Draws the two tiles that depend on the threshold. @param {number | null | undefined} threshold */
    const showThreshold = (threshold) => {
      const low = typeof threshold === 'number' && typeof balance === 'number' && balance < threshold;
      replace(balanceSlot, tile('Credit balance', num(balance), low ? 'Under the low-credit threshold' : 'Credits available', low ? 'warn' : ''));
      replace(thresholdSlot, alert?.err ? tile('Low-credit threshold', 'Unavailable', alert.err.message)
        : threshold == null ? tile('Low-credit threshold', 'Not set', 'No credits.low alert')
          : tile('Low-credit threshold', num(threshold), 'Webhooks hear credits.low when the balance falls under it'));
    };
    showThreshold(alert?.threshold);
    /** @type {import('./dom.js').Child[]} */ 
    const parts = [
      h('div', { class: 'tiles' },
        tile('Team', me.team?.name,
          me.agencyTeam ? `Client subteam of ${me.agencyTeam.name}` : me.ownsAgency ? 'Agency' : 'Team'),
        tile('Plan', cap(sub.plan) || '—',
          [cap(sub.status), sub.currentPeriodEnd && `period ends ${new Date(sub.currentPeriodEnd).toLocaleDateString()}`].filter(Boolean).join(' · ')),
        balanceSlot,
        thresholdSlot),
      section('Credits',
        alert?.err ? null : thresholdForm(alert?.threshold, showThreshold),
        creditPrices()),
    ];
    parts.push(usageSection());
    if (me.ownsAgency && !team.isSubteam) parts.push(subteamSummary(), subteamUsage());
    return parts;
  }));
}

/**
 * The low-credit threshold (PUT /v1/credits/alert): whoever may write to the team (owners,
 * admins, members: the API's rule) sets or clears it; a viewer reads it.
 * @param {number | null | undefined} initial
 * @param {(threshold: number | null | undefined) => void} changed
 */
function thresholdForm(initial, changed) {
  // The event is named in the sentence: the portal spells no event type as a value of its own
  // (scripts/portal-vocabulary-check).
  const about = h('p', null, 'When the balance falls under the threshold, the team\u2019s webhooks subscribed to credits.low hear it, once each time.');
  const status = h('p', { role: 'status', class: 'muted credit-alert-status' });
  if (!can('write')) {
    return h('div', { class: 'credit-alert' }, h('h3', null, 'Low-credit alert'), about,
      h('p', null, initial == null ? 'No threshold is set.' : `The threshold is ${plural(initial, 'credit')}.`,
        ' Owners, admins and members can change it.'));
  }
  let current = initial;
  const clear = h('button', { type: 'button', class: 'btn secondary', hidden: current == null }, 'Clear threshold');
  const save = async (/** @type {number | null} */ threshold) => {
    const answer = await api('PUT', '/v1/credits/alert', { threshold });
    current = answer.threshold ?? null;
    clear.hidden = current == null;
    changed(current);
    replace(status, current == null ? 'Threshold cleared: no credits.low alert.' : `Threshold set to ${plural(current, 'credit')}.`);
  };
  const f = form({
    className: 'inline',
    fields: [field({
      name: 'threshold', label: 'Alert when the balance falls under', type: 'number', required: true, min: 0, max: 1000000000000, step: 1,
      value: current == null ? '' : String(current), inputmode: 'numeric',
    })],
    submit: 'Save threshold',
    secondary: clear,
    onSubmit: async (v) => { await save(Number(v.threshold)); },
  });
  clear.addEventListener('click', () => busy(clear, status, async () => {
    await save(null);
    const input = /** @type {HTMLInputElement} */ (f.elements.namedItem('threshold'));
    input.value = '';
    setFieldError(input, ''); // an error of a value typed before is no longer true
  }));
  return h('div', { class: 'credit-alert' }, h('h3', null, 'Low-credit alert'), about, f, status);
}

/** What costs credits, as the API prices it (GET /v1/credits/prices): never a number of our own. */
function creditPrices() {
  return h('div', { class: 'credit-prices' }, h('h3', null, 'What costs credits'), loader(async () => {
    /** @type {Json[]} */
    const prices = await api('GET', '/v1/credits/prices', undefined, { scoped: false });
    return [
      table(['Operation', 'API', 'Cost'], prices.map((p) => h('tr', null,
        // The summary may end with its price in brackets ("(1 credit)"): the Cost column says it.
        h('th', { scope: 'row' }, p.summary.replace(/\s*\([^)]*\bcredits?\)$/, '')),
        h('td', null, h('code', null, `${p.method} ${p.path}`)),
        h('td', { class: 'num' }, `${plural(p.credits, 'credit')} each`))),
      { caption: 'What costs credits', empty: 'Nothing costs credits on this platform.' }),
      h('p', { class: 'muted' }, 'A failed operation is given back. Operations not listed cost no credits.'),
    ];
  }, 'Loading prices…'));
}

// ---------------------------------------------------------------- usage (GET /v1/usage)

function usageSection() {
  return section('Usage, last 30 days', loader(async () => {
    const days = await api('GET', '/v1/usage?interval=day');
    return [
      h('div', { class: 'charts' },
        barChart({ title: 'Credits used', field: 'creditsUsed', unit: 'credits', days }),
        barChart({ title: 'Calls', field: 'calls', unit: 'calls', days }),
        barChart({ title: 'Call minutes', field: 'callMinutes', unit: 'min', one: 'min', days })),
      usageTable(days),
    ];
  }, 'Loading usage…'));
}

/** An agency's subteams side by side: each one's last 30 days (the first 20 subteams). */
function subteamUsage() {
  return section('Usage per subteam, last 30 days', loader(async () => {
    /** @type {Json[]} */
    const subteams = (await api('GET', '/v1/agency/subteams?page=1&limit=20', undefined, { scoped: false })) || [];
    const rows = await Promise.all(subteams.map(async (t) => {
      const days = await api('GET', `/v1/usage?interval=day&teamId=${enc(t.id)}`, undefined, { scoped: false })
        .catch(() => null);
      const sum = days && totals(days);
      const cell = (/** @type {unknown} */ v) => h('td', { class: 'num' }, sum ? num(v) : '—');
      /** @param {string} field @param {string} unit */
      const spark = (field, unit) => h('td', null, days
        ? sparkBars({ label: `${t.name}: ${unit} per day`, field, unit, days }) : '—');
      return h('tr', null,
        h('th', { scope: 'row' }, t.name),
        spark('creditsUsed', 'credits'), cell(sum?.creditsUsed), cell(sum?.searches),
        spark('calls', 'calls'), cell(sum?.calls), cell(sum?.callMinutes), cell(sum?.chats));
    }));
    return table(['Subteam', 'Credits per day', 'Credits used', 'Searches', 'Calls per day', 'Calls', 'Call minutes', 'Chats'], rows,
      { caption: 'Usage per subteam, last 30 days', empty: 'This agency has no subteams yet.' });
  }, 'Loading usage per subteam…'));
}

/**
 * A subteam's row: its balance, and for those who manage the agency a "Top up" that moves
 * credits from the agency (POST /v1/agency/subteams/{id}/credits); the new balances are said in
 * `status` under the table, a refusal (not enough credits) beside the amount.
 * @param {Record<string, any>} t @param {boolean} withOwner @param {HTMLElement} status
 */
function subteamRow(t, withOwner, status) {
  const owner = (t.users || [])[0];
  const balance = h('td', { class: 'num subteam-balance' }, num(t.credits?.balance));
  const topUp = can('createSubteam') && h('button', {
    type: 'button', class: 'btn secondary small', 'aria-label': `Top up ${t.name}`,
    onclick: async () => {
      /** @type {Json | null} */
      let moved = /** @type {Json | null} */ (null); // the answer, once onSubmit had it
      const done = await formDialog({
        title: `Top up ${t.name}`,
        fields: [field({
          name: 'amount', label: 'Credits to move from the agency', type: 'number', required: true, min: 1, max: 1000000000, step: 1,
          inputmode: 'numeric', hint: `${t.name} has ${plural(t.credits?.balance ?? 0, 'credit')} now.`,
        })],
        submit: 'Move credits',
        onSubmit: async (v) => {
          try {
            moved = await api('POST', `/v1/agency/subteams/${enc(t.id)}/credits`, { amount: Number(v.amount) }, { scoped: false });
          } catch (err) {
            // Not enough credits is about the amount asked for: said beside it.
            if (err instanceof ApiError && err.status === 402) err.details = [{ field: 'amount', message: err.message }];
            throw err;
          }
        },
      });
      if (!done || !moved) return;
      t.credits = moved.credits;
      replace(balance, num(moved.credits?.balance));
      const agency = await api('GET', '/v1/me', undefined, { scoped: false }).catch(() => null);
      replace(status, `${t.name} now has ${plural(moved.credits?.balance, 'credit')}`,
        agency ? `; the agency has ${plural(agency.credits?.balance, 'credit')} left.` : '.');
    },
  }, 'Top up');
  return h('tr', null,
    h('th', { scope: 'row' }, t.name),
    balance,
    h('td', { class: 'num' }, num(t.totalMonthlyCredits)),
    withOwner && h('td', null, owner ? [fullName(owner), h('br'), h('span', { class: 'muted small' }, owner.email)] : '—'),
    h('td', null, time(t.createdAt, { day: true })),
    h('td', { class: 'actions' }, topUp, ' ', h('button', {
      type: 'button', class: 'btn secondary small', 'aria-label': `Switch to ${t.name}`,
      onclick: () => switchTeam({ id: t.id, name: t.name }, '/'),
    }, 'Switch to')));
}

function subteamSummary() {
  return section('Subteams',
    loader(async () => {
      /** @type {ListAnswer} */
      const data = await api('GET', '/v1/agency/subteams?page=1&limit=50', undefined, { full: true });
      const status = h('p', { role: 'status', class: 'subteam-topped' });
      return [
        table(['Subteam', 'Credit balance', 'Monthly credits', 'Created', ACTIONS], (data.data || []).map((t) => subteamRow(t, false, status)),
          { caption: 'Subteams and their balances', empty: 'This agency has no subteams yet.' }),
        status,
        h('p', null, h('a', { href: '/subteams' }, 'Go to the Subteams page')),
      ];
    }));
}

// ---------------------------------------------------------------- API keys

/** @param {PageContext} ctx */
export function keys({ view }) {
  if (!can('keys')) return noAccess({ view }, actingTeam().name);
  const team = actingTeam();
  const fresh = h('div', { class: 'fresh' });
  /** @type {() => Promise<void>} */
  let reload;
  const list = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/api-keys');
    return table(['Name', 'Prefix', 'Access', 'Created', 'Last used', 'Created by', ACTIONS],
      items.map((k) => keyRow(k, () => reload())),
      { caption: 'API keys', empty: 'No API keys yet. Create one above.' });
  });
  const create = form({
    className: 'inline',
    fields: [
      field({ name: 'name', label: 'Name', required: true, maxlength: 255, placeholder: 'e.g. CRM sync', autocomplete: 'off' }),
      field({ name: 'access', label: 'Access', type: 'select', value: 'full', options: [['full', 'Full access'], ['read-only', 'Read-only']] }),
    ],
    submit: 'Create key',
    onSubmit: async (v, f) => {
      const k = await api('POST', '/v1/api-keys', { name: v.name, access: v.access });
      f.reset();
      result(fresh, `Key “${k.name}” created`,
        copyField('New API key', k.key, 'Copy it now and keep it somewhere safe: it will not be shown again.'));
      reload?.();
    },
  });
  view.append(
    h('p', { class: 'lead' }, 'Keys let programs call the Switchboard API as ', h('strong', null, team.name),
      '. Send a key in the ', h('code', null, 'X-API-Key'), ' header.'),
    section('Create a key', create),
    fresh,
    section('Keys', list));
}

/** @param {Json} k an ApiKey @param {() => void} reload */
function keyRow(k, reload) {
  const by = k.createdBy
    ? [k.createdBy.name || k.createdBy.id, h('span', { class: 'muted' }, k.createdBy.type === 'key' ? ' (key)' : ' (user)')]
    : h('span', { class: 'muted' }, 'Operator');
  return h('tr', null,
    h('th', { scope: 'row' }, k.name),
    h('td', null, h('code', null, `${k.prefix}…`)),
    h('td', null, k.access === 'read-only' ? badge('Read-only') : badge('Full access', 'accent')),
    h('td', null, time(k.createdAt)),
    h('td', null, time(k.lastUsedAt, { empty: 'Never' })),
    h('td', null, by),
    h('td', { class: 'actions' }, h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Revoke key ${k.name}`,
      onclick: async () => {
        const done = await confirmDialog({
          title: `Revoke the key “${k.name}”?`,
          body: 'Programs that use it will be refused within a few seconds. This cannot be undone.',
          confirm: 'Revoke',
          action: () => api('DELETE', `/v1/api-keys/${enc(k.id)}`),
        });
        if (done) { toast(`Key “${k.name}” revoked`); reload(); focusTitle(); }
      },
    }, 'Revoke')));
}

// ---------------------------------------------------------------- members

const rolesFor = () => ROLES.filter(([r]) => !isOwnerRole(r) || isOwner());

/** @param {PageContext} ctx */
export function members({ view }) {
  if (!can('members')) return noAccess({ view }, actingTeam().name);
  const team = actingTeam();
  const fresh = h('div', { class: 'fresh' });
  /** @type {() => Promise<void>} */
  let reload;
  /** @type {() => Promise<void>} */
  let reloadPending;
  const list = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/members');
    return table(['Name', 'Email', 'Role', 'Last sign-in', 'Joined', ACTIONS],
      items.map((m) => memberRow(m, team, fresh, () => { reload(); reloadPending?.(); })),
      { caption: 'Members', empty: 'No members yet.' });
  });
  const pending = loader(async (again) => {
    reloadPending = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/members/invitations');
    return table(['Email', 'Role', 'Invited by', 'Expires', ACTIONS],
      items.map((i) => invitationRow(i, () => reloadPending())),
      { caption: 'Pending invitations', empty: 'No invitation is waiting to be accepted.' });
  });
  const invite = form({
    className: 'inline',
    fields: [
      field({ name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'off' }),
      field({ name: 'role', label: 'Role', type: 'select', value: 'member', options: rolesFor() }),
    ],
    submit: 'Create invitation',
    onSubmit: async (v, f) => {
      const inv = await api('POST', '/v1/members/invitations', { email: v.email, role: v.role });
      f.reset();
      reloadPending?.();
      // Issue 55: after the platform mailed the link, "Send this link" would ask for a second
      // copy; the link is still offered, for a person who cannot find the mail.
      const expiry = ['It works once', inv.expiresAt ? [' and expires ', time(inv.expiresAt)] : '', '.'];
      result(fresh, `Invitation for ${inv.email} (${inv.role})`,
        copyField('Invitation link', absUrl(inv.url), inv.mailed
          ? ['We e-mailed this link to ', inv.email, '; copy it only if they cannot find that mail. ', expiry]
          : ['Send this link to ', inv.email, ': this platform sends no e-mail. ', expiry]));
    },
  });
  view.append(
    h('p', { class: 'lead' }, 'People who can sign in to this portal for ', h('strong', null, team.name), '.'),
    section('Invite a member', invite),
    fresh,
    section('Pending invitations', pending),
    section('Members', list));
}

/** @param {Json} i an Invitation @param {() => void} reload */
function invitationRow(i, reload) {
  const ownerOnly = isOwnerRole(i.role) && !isOwner();
  return h('tr', null,
    h('th', { scope: 'row' }, i.email),
    h('td', null, badge(cap(i.role), isOwnerRole(i.role) ? 'accent' : '')),
    h('td', null, i.createdBy?.name || (i.createdBy ? cap(i.createdBy.type) : 'An operator')),
    h('td', null, time(i.expiresAt)),
    h('td', { class: 'actions' }, !ownerOnly && h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Revoke the invitation of ${i.email}`,
      onclick: async () => {
        const done = await confirmDialog({
          title: `Revoke the invitation of ${i.email}?`,
          body: 'Its link stops working at once. You can invite them again later.',
          confirm: 'Revoke',
          action: () => api('DELETE', `/v1/members/invitations/${enc(i.id)}`),
        });
        if (done) { toast(`Invitation of ${i.email} revoked`); reload(); focusTitle(); }
      },
    }, 'Revoke')));
}

/**
 * After a removal: what it ended, and the keys the member made, with an offer to revoke them.
 * @param {HTMLElement} slot @param {Json} m the Member @param {Json} removed the answer of the removal
 */
function removedResult(slot, m, removed) {
  /** @type {Json[]} */
  const keys = removed.apiKeys || [];
  const ended = removed.invitationsEnded
    ? h('p', null, `${removed.invitationsEnded} pending invitation${removed.invitationsEnded === 1 ? '' : 's'} they made no longer work.`)
    : null;
  if (!keys.length) {
    if (ended) result(slot, `${fullName(m)} removed`, ended);
    return;
  }
  const status = h('p', { role: 'status' });
  const revoke = h('button', {
    type: 'button', class: 'btn danger small',
    onclick: async () => {
      revoke.disabled = true;
      /** @type {string[]} */
      const failed = [];
      for (const k of keys) {
        try { await api('DELETE', `/v1/api-keys/${enc(k.id)}`); } catch { failed.push(k.name); }
      }
      replace(status, failed.length ? `Not revoked: ${failed.join(', ')}` : `${keys.length} key${keys.length === 1 ? '' : 's'} revoked.`);
      revoke.disabled = failed.length === 0;
    },
  }, keys.length === 1 ? 'Revoke this key' : `Revoke these ${keys.length} keys`);
  result(slot, `${fullName(m)} removed`, [
    ended,
    h('p', null, `API keys ${fullName(m)} made keep working until they are revoked:`),
    h('ul', null, keys.map((k) => h('li', null, h('strong', null, k.name), ` (${k.prefix}…, ${k.access === 'read_only' ? 'read-only' : 'full access'})`))),
    status,
  ], revoke);
}

/**
 * @param {Json} m a Member @param {TeamRef} team the team acted on
 * @param {HTMLElement} fresh where the removal's result is shown @param {() => void} reload
 */
function memberRow(m, team, fresh, reload) {
  const me = state.session?.user?.id === m.id;
  const locked = me || (isOwnerRole(m.role) && !isOwner());
  const rowError = h('div', { class: 'row-error', role: 'alert' });
  /** @type {import('./dom.js').Child} */
  let roleCell = badge(cap(m.role), isOwnerRole(m.role) ? 'accent' : '');
  if (!locked) {
    const select = h('select', { 'aria-label': `Role of ${fullName(m)}`, class: 'compact', value: m.role },
      rolesFor().map(([v, t]) => h('option', { value: v }, t)));
    select.addEventListener('change', async () => {
      const role = select.value;
      replace(rowError);
      select.disabled = true;
      try {
        await api('PUT', `/v1/members/${enc(m.id)}`, { role });
        m.role = role;
        toast(`${fullName(m)} is now ${role === 'admin' ? 'an' : 'a'} ${role}`);
      } catch (err) {
        select.value = m.role;
        replace(rowError, err instanceof Error ? err.message : String(err));
      } finally {
        select.disabled = false;
      }
    });
    roleCell = [select, rowError];
  }
  let signIn = time(m.lastSignInAt, { empty: 'Never' });
  if (!m.canSignIn) signIn = badge('Cannot sign in yet', 'warn');
  return h('tr', null,
    h('th', { scope: 'row' }, fullName(m), me && [' ', badge('You', 'accent')]),
    h('td', null, m.email),
    h('td', null, roleCell),
    h('td', null, signIn),
    h('td', null, time(m.createdAt, { day: true })),
    h('td', { class: 'actions' }, !locked && h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Remove ${fullName(m)}`,
      onclick: async () => {
        /** @type {Json} */
        let removed = {};
        const done = await confirmDialog({
          title: `Remove ${fullName(m)}?`,
          body: `${m.email} will no longer be able to sign in to ${team.name}, and the invitations they made stop working.`,
          confirm: 'Remove',
          action: async () => { removed = await api('DELETE', `/v1/members/${enc(m.id)}`); },
        });
        if (done) { toast(`${fullName(m)} removed`); reload(); removedResult(fresh, m, removed); if (!fresh.firstChild) focusTitle(); }
      },
    }, 'Remove')));
}

// ---------------------------------------------------------------- subteams

/** @param {PageContext} ctx */
export function subteams({ view, query }) {
  const s = /** @type {import('./api.js').Session} */ (state.session); // a page of the signed-in
  if (!can('subteams')) {
    // A viewer of an agency is told why, not that the agency is none (issue 55).
    view.append(alertBox(s.team.ownsAgency
      ? `${s.team.name} is an agency, and viewers do not act on its client subteams: an owner or admin can give you another role.`
      : `Subteams belong to agency teams, and ${s.team.name} is not one.`, { kind: 'info' }));
    return;
  }
  const team = actingTeam();
  if (team.isSubteam) {
    view.append(
      alertBox(`You are acting on ${team.name}. Subteams belong to your agency, ${s.team.name}.`, { kind: 'info' }),
      h('button', { type: 'button', class: 'btn primary', onclick: () => switchTeam(s.team) }, `Switch back to ${s.team.name}`));
    return;
  }
  const page = pageOf(query);
  const fresh = h('div', { class: 'fresh' });
  /** @type {() => Promise<void>} */
  let reload;
  const list = loader(async (again) => {
    reload = again;
    /** @type {ListAnswer} */
    const res = await api('GET', `/v1/agency/subteams?page=${page}&limit=50`, undefined, { full: true });
    const status = h('p', { role: 'status', class: 'subteam-topped' });
    return [
      table(['Subteam', 'Credit balance', 'Monthly credits', 'First owner', 'Created', ACTIONS], (res.data || []).map((t) => subteamRow(t, true, status)),
        { caption: 'Subteams', empty: page > 1 ? 'No subteams on this page.' : 'No subteams yet.' }),
      status,
      pager(res.pagination, (p) => `/subteams?page=${p}`),
    ];
  });
  /** @type {import('./dom.js').Child[]} */ 
  const parts = [h('p', { class: 'lead' }, 'Client teams of ', h('strong', null, s.team.name),
    '. Each has its own keys, members and credits; switch to one to act on it.')];
  if (can('createSubteam')) {
    parts.push(section('Create a subteam', form({
      className: 'grid',
      fields: [
        field({ name: 'teamName', label: 'Team name', required: true, maxlength: 50, autocomplete: 'off' }),
        field({ name: 'totalMonthlyCredits', label: 'Monthly credits', type: 'number', required: true, min: 0, max: 1000000000, step: 1, value: '1000', hint: "Moved from the agency's balance." }),
        h('fieldset', null, h('legend', null, 'Its first owner, who gets an invitation link'),
          field({ name: 'firstName', label: 'First name', required: true, maxlength: 50, autocomplete: 'off' }),
          field({ name: 'lastName', label: 'Last name', required: true, maxlength: 50, autocomplete: 'off' }),
          field({ name: 'email', label: 'Email', type: 'email', required: true, autocomplete: 'off' })),
      ],
      submit: 'Create subteam',
      onSubmit: async (v, f) => {
        const t = await api('POST', '/v1/agency/subteams', { ...v, totalMonthlyCredits: Number(v.totalMonthlyCredits) }, { scoped: false });
        f.reset();
        result(fresh, `Subteam “${t.name}” created`,
          t.inviteUrl && copyField('Invitation link', absUrl(t.inviteUrl), `Send this link to ${v.firstName} ${v.lastName} (${v.email}): it lets them choose a password and sign in as the subteam’s owner.`),
          h('button', { type: 'button', class: 'btn primary small', onclick: () => switchTeam(t, '/') }, `Switch to ${t.name}`));
        loadSubteams(true).catch(() => {}).then(() => document.dispatchEvent(new Event('subteams-changed')));
        reload?.();
      },
    })), fresh);
  }
  parts.push(section('Subteams', list));
  append(view, parts);
}

// ---------------------------------------------------------------- audit log

/** @param {PageContext} ctx */
export function auditLog({ view, query }) {
  if (!can('audit')) return noAccess({ view }, actingTeam().name);
  const page = pageOf(query);
  const action = (query.get('action') || '').trim();
  /** @param {number} p @param {string} [a] */
  const href = (p, a = action) => {
    const q = new URLSearchParams();
    if (a) q.set('action', a);
    if (p > 1) q.set('page', String(p));
    const s = q.toString();
    return `/audit-log${s ? `?${s}` : ''}`;
  };
  const filter = form({
    className: 'inline',
    fields: [field({ name: 'action', label: 'Action', type: 'select', value: action,
      options: [['', 'All actions'], ...(action ? [[action, action]] : [])] })],
    submit: 'Filter',
    secondary: action && h('a', { class: 'btn secondary', href: '/audit-log' }, 'Clear filter'),
    onSubmit: async (v) => navigate(href(1, v.action || '')),
  });
  const select = /** @type {HTMLSelectElement} */ (filter.elements.namedItem('action'));
  // The actions offered: those the API records (AuditAction of its OpenAPI document), first and
  // in its order, by their labels, and any other seen in the entries shown (all of them, when
  // the document cannot be read).
  /** @type {Map<string, HTMLOptionElement>} */
  const offered = new Map();
  for (const o of select.options) if (o.value) offered.set(o.value, o);
  /** @type {Map<string, string>} */
  const labels = new Map();
  /** @param {string[]} actions @param {boolean} [first] before the others offered */
  const offer = (actions, first = false) => {
    const others = first ? [...offered.values()].filter((o) => !actions.includes(o.value)) : [];
    for (const a of actions) {
      const had = offered.get(a);
      const o = had || h('option', { value: a }, labels.get(a) || a);
      if (had && labels.has(a)) had.textContent = labels.get(a) || a;
      offered.set(a, o);
      if (first || !had) select.append(o);
    }
    for (const o of others) select.append(o);
  };
  const known = auditActions().then((actions) => {
    for (const a of actions) labels.set(a.value, a.label);
    offer(actions.map((a) => a.value), true);
  }).catch(() => { /* the actions seen are offered, by their names */ });
  const list = loader(async () => {
    const q = new URLSearchParams({ page: String(page), limit: '50' });
    if (action) q.set('action', action);
    /** @type {ListAnswer} */
    const res = await api('GET', `/v1/audit-log?${q}`, undefined, { full: true });
    await known;
    const items = res.data || [];
    offer([...new Set(items.map((e) => e.action))]);
    const rows = items.map((e) => h('tr', null,
      h('td', { class: 'card-first card-plain' }, time(e.createdAt)),
      h('td', { class: 'card-wide card-plain' }, labels.get(e.action) || e.action, h('br'), h('code', { class: 'muted small' }, e.action)),
      h('td', null, e.actor ? [e.actor.name || e.actor.id || '—', h('br'), h('span', { class: 'muted small' }, e.actor.type)] : '—'),
      h('td', { class: 'card-wide' }, targetCell(e)),
      h('td', null, e.changes && e.changes.length ? e.changes.join(', ') : '—'),
      h('td', null, h('span', { title: e.userAgent || '' }, e.device || '—'), h('br'),
        h('span', { class: 'muted small nowrap' }, e.ip || '—'))));
    return [
      table(['Time', 'Action', 'Actor', 'Target', 'Changed', 'From'], rows,
        { caption: 'Audit log', dense: true, cards: true, empty: action ? `No entries with the action “${action}”.` : 'No entries yet.' }),
      pager(res.pagination, (p) => href(p)),
    ];
  });
  view.append(
    h('p', { class: 'lead' }, 'Who did what in ', h('strong', null, actingTeam().name), ', newest first.'),
    filter,
    section(action ? `Entries: ${action}` : 'Entries', list));
}

/**
 * An audit entry's target: its name as it was (a name, a URL, a question, an e-mail), with its
 * id small below; the id alone (shown in full, small) when it has no name.
 * @param {import('./api.js').Item} e
 */
function targetCell(e) {
  const id = e.target || '';
  const idText = (/** @type {string} */ text) => (/^[0-9a-f]{8}-[0-9a-f-]{27}$/i.test(text)
    ? h('code', { class: 'id truncate', title: text }, text) : text);
  if (e.targetName) return [h('span', { class: 'wrap-anywhere' }, e.targetName), ...(id && id !== e.targetName ? [h('br'), h('span', { class: 'muted small' }, idText(id))] : [])];
  return id ? idText(id) : '—';
}
