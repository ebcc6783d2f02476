// @ts-check
// The signed-in person's own security: their password and their sessions (each device they are
// signed in on, ended one by one or all but this one).
import {
  h, field, form, loader, table, badge, time, section, toast, confirmDialog, ACTIONS, replace, alertBox, copyField, enc,
  navigate,
} from './dom.js';
import { passkeysNotice } from './pages-auth.js';
import { api, state, startSession, loadSession, actingTeam, ROLES, isOwner, isOwnerRole, ApiError } from './api.js';
import { createPasskey, passkeysSupported } from './passkeys.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */

/** What a refused request is said as here: its message, then its hint. @param {unknown} err */
function said(err) {
  const message = err instanceof Error ? err.message : String(err);
  const hint = err instanceof ApiError ? err.hint : undefined;
  return hint ? `${message} ${hint}` : message;
}

/** The message of what a `catch` caught. @param {unknown} err */
const messageOf = (err) => (err instanceof Error ? err.message : String(err));

/** @param {PageContext} ctx */
export function security({ view }) {
  if (state.notice) {
    view.append(alertBox(state.notice, { kind: 'info' }));
    state.notice = null;
  }
  /** @type {() => Promise<void>} */
  let reload;
  const sessions = loader(async (again) => {
    reload = again;
    /** @type {Json[]} */
    const items = await api('GET', '/v1/auth/sessions');
    return table(['Device', 'Address', 'Signed in', 'Last active', ACTIONS],
      items.map((s) => sessionRow(s, () => reload())),
      { caption: 'Your sessions', empty: 'No other session.' });
  });
  const status = h('p', { role: 'status', class: 'muted' });
  const elsewhere = h('button', {
    type: 'button', class: 'btn secondary',
    onclick: async () => {
      const done = await confirmDialog({
        title: 'Sign out everywhere else?',
        body: 'Every other browser and device signed in as you is signed out at its next request. This one stays signed in.',
        confirm: 'Sign out everywhere else',
        action: async () => {
          const r = await api('POST', '/v1/auth/sessions/end-others');
          replace(status, r.ended === 1 ? '1 other session ended.' : `${r.ended} other sessions ended.`);
        },
      });
      if (done) reload();
    },
  }, 'Sign out everywhere else');

  const password = form({
    fields: [
      field({ name: 'currentPassword', label: 'Current password', type: 'password', autocomplete: 'current-password', required: true }),
      field({
        name: 'newPassword', label: 'New password', type: 'password', autocomplete: 'new-password',
        required: true, minlength: 10, maxlength: 256, hint: '10 to 256 characters, hard to guess: a few unrelated words work well.',
      }),
    ],
    submit: 'Change password',
    className: 'stack narrow',
    onSubmit: async (v, f) => {
      // A new session replaces this one (and every other ends): its answer carries the new CSRF token.
      const session = await api('POST', '/v1/auth/password', v);
      startSession(session);
      f.reset();
      toast('Password changed; your other sessions ended');
      // A passkey signs in without the password: the person sees which still do, to remove a stranger's.
      if (session.passkeys?.length) {
        state.notice = passkeysNotice(session.passkeys);
        navigate('/settings/security', { replace: true });
        return;
      }
      reload();
    },
  });

  view.append(
    h('p', { class: 'lead' }, 'Your password, your second factor, and where you are signed in.'),
    section('Two-step sign-in', secondFactor()),
    section('Passkeys', passkeys()),
    isOwner() && !actingTeam().isSubteam ? section('Team requirement', teamRequirement()) : '',
    section('Single sign-on', singleSignOn()),
    section('Password', password),
    section('Where you are signed in', h('div', null, sessions, h('div', { class: 'form-actions after-table' }, elsewhere), status)),
  );
}

/** @param {Json} s a Session of GET /v1/auth/sessions @param {() => void} reload */
function sessionRow(s, reload) {
  return h('tr', null,
    h('th', { scope: 'row' }, s.device, s.current && [' ', badge('This browser', 'accent')]),
    h('td', null, s.ip || '—'),
    h('td', null, time(s.createdAt)),
    h('td', null, time(s.lastSeenAt)),
    h('td', { class: 'actions' }, !s.current && h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Sign out ${s.device} (${s.ip})`,
      onclick: async () => {
        const done = await confirmDialog({
          title: `Sign out ${s.device}?`,
          body: 'That browser is signed out at its next request.',
          confirm: 'Sign out',
          action: () => api('DELETE', `/v1/auth/sessions/${enc(s.id)}`),
        });
        if (done) { toast(`${s.device} signed out`); reload(); }
      },
    }, 'Sign out')));
}

/** Recovery codes, shown once, with a way to copy them all. @param {string[]} codes */
function recoveryCodes(codes) {
  return h('div', { class: 'card success' },
    h('h3', { tabindex: '-1' }, 'Your recovery codes'),
    h('p', null, 'Each signs you in once if you lose your authenticator app. Keep them somewhere safe: they are shown only now.'),
    h('ul', { class: 'codes mono', 'aria-label': 'Recovery codes' }, codes.map((c) => h('li', null, c))),
    copyField('All recovery codes', codes.join(' ')));
}

function secondFactor() {
  const slot = h('div');
  /** @param {import('./dom.js').Child} [fresh] shown under the state (new recovery codes) */
  const show = async (fresh) => {
    const f = await api('GET', '/v1/auth/second-factors');
    if (!f.totp) {
      replace(slot,
        h('p', null, f.passkeys.length
          ? 'Signing in with your password asks for one of your passkeys. You can add an authenticator app too.'
          : 'Signing in asks only for your password. Add an authenticator app (1Password, Google Authenticator, Authy, …) or a passkey so that a stolen password is not enough.'),
        f.required && alertBox('Your team requires a second factor.', { kind: 'info' }),
        h('button', { type: 'button', class: 'btn primary', onclick: () => enrol().catch(failed) }, 'Set up an authenticator app'));
      return;
    }
    replace(slot,
      h('p', null, badge('On', 'accent'), ' Signing in asks for a code of your authenticator app',
        f.totpEnabledAt ? [' (since ', time(f.totpEnabledAt), ')'] : '', '.'),
      h('p', { class: 'muted' }, `${f.recoveryCodesLeft} recovery code${f.recoveryCodesLeft === 1 ? '' : 's'} left.`),
      fresh,
      h('div', { class: 'form-actions' },
        h('button', {
          type: 'button', class: 'btn secondary',
          onclick: () => api('POST', '/v1/auth/second-factors/recovery-codes').then((r) => show(recoveryCodes(r.codes))).catch(failed),
        }, 'New recovery codes'),
        !f.required && h('button', {
          type: 'button', class: 'btn danger-quiet',
          onclick: async () => {
            const done = await confirmDialog({
              title: 'Remove the authenticator app?',
              body: 'Signing in will ask only for your password, and your recovery codes stop working.',
              confirm: 'Remove',
              action: () => api('DELETE', '/v1/auth/second-factors/totp'),
            });
            if (done) { toast('Authenticator app removed'); show(); }
          },
        }, 'Remove the authenticator app')));
  };
  const failed = (/** @type {unknown} */ err) => slot.append(alertBox(messageOf(err)));
  const enrol = async () => {
    const e = await api('POST', '/v1/auth/second-factors/totp');
    replace(slot,
      h('p', null, 'Scan this code with your authenticator app, or type the secret into it. Then enter the 6-digit code it shows.'),
      h('img', { src: e.qrCode, alt: 'QR code of the authenticator set-up link', width: 200, height: 200, class: 'qr' }),
      copyField('Secret', e.secret),
      form({
        className: 'stack narrow',
        fields: [field({ name: 'code', label: 'Code from the app', autocomplete: 'one-time-code', required: true, maxlength: 16 })],
        submit: 'Turn on two-step sign-in',
        onSubmit: async ({ code }) => {
          const r = await api('POST', '/v1/auth/second-factors/totp/confirm', { code });
          toast('Two-step sign-in is on');
          // A session that could only set up a factor is a whole one now.
          if (state.session?.secondFactorNeeded) await loadSession();
          await show(recoveryCodes(r.codes));
          slot.querySelector('h3')?.focus();
        },
      }));
    slot.querySelector('img')?.focus();
  };
  show().catch((err) => replace(slot, alertBox(err.message)));
  return slot;
}

function teamRequirement() {
  const team = actingTeam();
  return loader(async (again) => {
    const p = await api('GET', '/v1/members/security');
    const on = p.requireSecondFactor;
    return h('div', null,
      h('p', null, on
        ? `Everyone in ${team.name} needs a second factor: people without one can only set one up.`
        : `People of ${team.name} may sign in with a password alone.`),
      h('p', { class: 'muted' }, 'API keys are not affected.'),
      h('button', {
        type: 'button', class: on ? 'btn secondary' : 'btn primary',
        onclick: async (/** @type {MouseEvent} */ ev) => {
          const btn = /** @type {HTMLButtonElement} */ (ev.target);
          btn.disabled = true;
          try {
            await api('PUT', '/v1/members/security', { requireSecondFactor: !on });
            toast(on ? 'A second factor is no longer required' : 'A second factor is now required');
            again();
          } catch (err) {
            btn.disabled = false;
            toast(messageOf(err));
          }
        },
      }, on ? 'Stop requiring a second factor' : `Require a second factor for everyone in ${team.name}`));
  });
}

/**
 * Single sign-on: every person's own link to their team's provider (an account that exists
 * signs in through it only once its person linked it from here); for an owner, the team's
 * provider and its domains, each with the DNS record or file that proves it and "Check now".
 */
function singleSignOn() {
  const team = actingTeam();
  const manages = isOwner() && !team.isSubteam;
  return loader(async (again) => {
    const link = await api('GET', '/v1/auth/sso/link');
    /** @type {Json | null} */
    let config = null;
    if (manages) {
      try {
        config = await api('GET', '/v1/members/sso');
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 404) throw err;
      }
    }
    return h('div', null, h('div', { class: 'sso-link' }, linkPart(link)), manages && configPart(config, again));
  });

  /** @param {Json} link GET /v1/auth/sso/link */
  function linkPart(link) {
    if (link.linked) {
      return h('p', null, badge('Linked', 'accent'), ' You can sign in with single sign-on',
        link.issuer ? ` through ${link.issuer}` : '', '.');
    }
    if (!link.available) {
      return h('p', { class: 'muted' }, `Single sign-on does not cover your address${link.domain ? ` (${link.domain})` : ''}.`);
    }
    const status = h('div', { class: 'form-alert' });
    return h('div', null,
      h('p', null, `Your team signs in through ${link.issuer || 'its identity provider'}. To sign in that way, link your account once: you sign in there with your own address.`),
      h('button', {
        type: 'button', class: 'btn primary',
        onclick: async (/** @type {MouseEvent} */ ev) => {
          const btn = /** @type {HTMLButtonElement} */ (ev.target);
          btn.disabled = true;
          try {
            const started = await api('POST', '/v1/auth/sso/link');
            // The callback page returns here once the provider sent the person back.
            sessionStorage.setItem('switchboard.sso.next', '/settings/security');
            location.assign(started.url);
          } catch (err) {
            btn.disabled = false;
            replace(status, alertBox(said(err)));
          }
        },
      }, 'Link single sign-on'),
      status);
  }

  /** @param {Json} d a domain of the provider @param {() => void} again */
  function domainCard(d, again) {
    const status = h('div', { class: 'form-alert' });
    if (d.verified) {
      return h('div', { class: 'card' },
        h('h3', null, d.domain, ' ', badge('Proven', 'accent')),
        h('p', { class: 'muted' }, d.method === 'https' ? 'Proven by its file' : 'Proven by its DNS record', ' ', time(d.verifiedAt), '.'));
    }
    return h('div', { class: 'card' },
      h('h3', null, d.domain, ' ', badge('Not proven', 'warn')),
      h('p', null, `Nobody signs in through ${d.domain} until you prove the team controls it: publish this DNS TXT record, or this file, then check.`),
      copyField(`TXT record name for ${d.domain}`, d.txtRecord.name),
      copyField(`TXT record value for ${d.domain}`, d.txtRecord.value),
      copyField(`Or a file for ${d.domain}, at`, d.httpsFile.url),
      copyField(`The file for ${d.domain}, holding this line`, d.httpsFile.content),
      h('div', { class: 'form-actions' }, h('button', {
        type: 'button', class: 'btn secondary', 'aria-label': `Check now whether ${d.domain} is proven`,
        onclick: async (/** @type {MouseEvent} */ ev) => {
          const btn = /** @type {HTMLButtonElement} */ (ev.target);
          btn.disabled = true;
          replace(status);
          try {
            await api('POST', `/v1/members/sso/domains/${enc(d.domain)}/verify`);
            toast(`${d.domain} is proven`);
            again();
          } catch (err) {
            btn.disabled = false;
            replace(status, alertBox(said(err)));
          }
        },
      }, 'Check now')),
      status);
  }

  /** @param {Json | null} config the team's provider, null when it has none @param {() => void} again */
  function configPart(config, again) {
    // People new through single sign-on are members or viewers; admins and owners are made by people.
    const roles = ROLES.filter(([role]) => !isOwnerRole(role) && role !== 'admin');
    const defaultRole = roles.some(([role]) => role === config?.defaultRole) ? config?.defaultRole : 'member';
    const f = form({
      className: 'stack narrow',
      fields: [
        field({ name: 'issuer', label: 'Issuer URL', type: 'url', required: true, value: config?.issuer || '', hint: 'As your provider names it, e.g. its Okta or Entra ID issuer.' }),
        field({ name: 'clientId', label: 'Client ID', required: true, value: config?.clientId || '', autocomplete: 'off' }),
        field({
          name: 'clientSecret', label: 'Client secret', type: 'password', autocomplete: 'off', required: !config,
          hint: config ? 'Stored and never shown; leave empty to keep it.' : undefined,
        }),
        field({ name: 'domains', label: 'E-mail domains', required: true, value: (config?.domains || []).join(', '), hint: 'Comma-separated, e.g. acme.example, eu.acme.example. Each counts once proven; public mail services (gmail.com, …) cannot be.' }),
        field({ name: 'defaultRole', label: 'Role of people new to the team', type: 'select', value: defaultRole, options: roles }),
      ],
      submit: config ? 'Save single sign-on' : 'Turn on single sign-on',
      onSubmit: async (v) => {
        /** @type {{issuer: string, clientId: string, defaultRole: string, domains: string[], clientSecret?: string}} */
        const body = {
          issuer: v.issuer, clientId: v.clientId, defaultRole: v.defaultRole,
          domains: v.domains.split(',').map((/** @type {string} */ d) => d.trim()).filter(Boolean),
        };
        if (v.clientSecret) body.clientSecret = v.clientSecret;
        await api('PUT', '/v1/members/sso', body);
        toast('Single sign-on saved');
        again();
      },
    });
    const remove = config && h('button', {
      type: 'button', class: 'btn danger-quiet',
      onclick: async () => {
        const done = await confirmDialog({
          title: 'Remove single sign-on?',
          body: `People of ${team.name} who only ever signed in through it can no longer sign in.`,
          confirm: 'Remove',
          action: () => api('DELETE', '/v1/members/sso'),
        });
        if (done) { toast('Single sign-on removed'); again(); }
      },
    }, 'Remove single sign-on');
    /** @type {Json[]} */
    const domains = config?.domainStatus || [];
    const proven = domains.filter((d) => d.verified).map((d) => d.domain);
    return h('div', { class: 'sso-provider' },
      h('h3', null, `${team.name}’s provider`),
      h('p', null, !config
        ? `Let people of ${team.name} sign in through your OpenID Connect provider (Okta, Entra ID, Google Workspace, Keycloak, …).`
        : proven.length
          ? `People with an address in ${proven.join(', ')} sign in through ${config.issuer}.`
          : `No domain is proven yet: nobody signs in through ${config.issuer}.`),
      copyField('Redirect URI to register at the provider', `${location.origin}/sso/callback`),
      domains.length > 0 && h('div', { class: 'sso-domains' }, domains.map((d) => domainCard(d, again))),
      f,
      remove && h('div', { class: 'form-actions after-table' }, remove));
  }
}

function passkeys() {
  const slot = h('div');
  const status = h('div', { class: 'form-alert' });
  const show = async () => {
    const f = await api('GET', '/v1/auth/second-factors');
    const rows = f.passkeys.map((/** @type {Json} */ p) => h('tr', null,
      h('th', { scope: 'row' }, p.name),
      h('td', null, time(p.createdAt, { day: true })),
      h('td', null, time(p.lastUsedAt, { empty: 'Never' })),
      h('td', { class: 'actions' }, h('button', {
        type: 'button', class: 'btn danger-quiet small', 'aria-label': `Remove the passkey ${p.name}`,
        onclick: async () => {
          const done = await confirmDialog({
            title: `Remove the passkey ${p.name}?`,
            body: 'It will no longer sign you in.',
            confirm: 'Remove',
            action: () => api('DELETE', `/v1/auth/second-factors/passkeys/${enc(p.id)}`),
          });
          if (done) { toast(`Passkey ${p.name} removed`); show(); }
        },
      }, 'Remove'))));
    replace(slot,
      h('p', null, 'A passkey signs you in with your fingerprint, face or device PIN, without a password, and counts as your second factor.'),
      table(['Name', 'Added', 'Last used', ACTIONS], rows, { caption: 'Your passkeys', empty: 'No passkey yet.' }),
      passkeysSupported()
        ? form({
          className: 'inline',
          fields: [field({ name: 'name', label: 'Passkey name', required: true, maxlength: 60, placeholder: 'Laptop' })],
          submit: 'Add a passkey',
          onSubmit: async ({ name }, f) => {
            const options = await api('POST', '/v1/auth/second-factors/passkeys/options');
            let credential;
            try {
              credential = await createPasskey(options.options);
            } catch (err) {
              if (!(err instanceof Error)) throw err;
              throw new Error(err.name === 'NotAllowedError' ? 'The passkey was not created.' : err.message, { cause: err });
            }
            await api('POST', '/v1/auth/second-factors/passkeys', { ceremony: options.ceremony, name, credential });
            f.reset();
            toast(`Passkey ${name} added`);
            if (state.session?.secondFactorNeeded) await loadSession();
            show();
          },
        })
        : alertBox('This browser cannot create passkeys.', { kind: 'info' }),
      status);
  };
  show().catch((err) => replace(slot, alertBox(err.message)));
  return slot;
}
