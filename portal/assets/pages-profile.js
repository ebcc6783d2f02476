// @ts-check
// The signed-in person's own profile: their name (PATCH /v1/me) and their e-mail address, which
// changes only when the link mailed to the new one is opened (POST /v1/me/email, then the page
// /confirm-email/{token}). The password is changed on /settings/security, not here.
import { h, field, form, section, toast, replace, alertBox, fullName, time } from './dom.js';
import { api, state, loadSession, ApiError } from './api.js';

/** @typedef {import('./dom.js').PageContext} PageContext */

/**
 * The header shows the session's name: after a change, the state and the header follow at
 * once (the next page draws the header from the state).
 * @param {Record<string, any>} user the User the API answered
 */
function showUser(user) {
  if (!state.session) return;
  state.session.user = { ...state.session.user, ...user };
  const shown = document.querySelector('.topbar .user-name');
  if (shown) replace(shown, fullName(state.session.user));
}

/** @param {PageContext} ctx */
export function profile({ view }) {
  /** @type {{firstName?: string, lastName?: string, email?: string}} */
  const user = state.session?.user || {};
  const nameForm = form({
    className: 'stack narrow',
    fields: [
      field({ name: 'firstName', label: 'First name', required: true, maxlength: 50, autocomplete: 'given-name', value: user.firstName || '' }),
      field({ name: 'lastName', label: 'Last name', required: true, maxlength: 50, autocomplete: 'family-name', value: user.lastName || '' }),
    ],
    submit: 'Save name',
    onSubmit: async (v) => {
      const updated = await api('PATCH', '/v1/me', { firstName: v.firstName, lastName: v.lastName });
      showUser(updated);
      toast('Your name was changed');
    },
  });

  const current = h('p', null, 'You sign in with ', h('strong', { class: 'profile-email' }, user.email || '—'), '.');
  const sent = h('div', { class: 'profile-sent' });
  const emailForm = form({
    className: 'stack narrow',
    fields: [
      field({ name: 'email', label: 'New e-mail address', type: 'email', required: true, maxlength: 254, autocomplete: 'email' }),
      field({
        name: 'password', label: 'Current password', type: 'password', autocomplete: 'current-password', maxlength: 256,
        hint: 'To be sure it is you. Leave it empty if you sign in only with single sign-on.',
      }),
    ],
    submit: 'Send confirmation link',
    onSubmit: async (v, f) => {
      /** @type {Record<string, string>} */
      const body = { email: v.email };
      if (v.password) body.password = v.password;
      let answer;
      try {
        answer = await api('POST', '/v1/me/email', body, { full: true });
      } catch (err) {
        // The address is someone else's: said beside the address, not above the button.
        if (err instanceof ApiError && err.status === 409) err.details = [{ field: 'email', message: err.message }];
        throw err;
      }
      f.reset();
      const change = answer.data;
      replace(sent, alertBox(change.mailed
        ? ['We sent a link to ', h('strong', null, change.email), '. Open it to use this address from then on (it works once, until ',
          time(change.expiresAt), '). Until then you sign in with ', h('strong', null, user.email), '.']
        : answer.message, { kind: change.mailed ? 'success' : 'error' }));
    },
  });

  view.append(
    h('p', { class: 'lead' }, 'Your name as your team sees it, and the address you sign in with.'),
    section('Name', nameForm),
    section('E-mail address', current, emailForm, sent),
    section('Password', h('p', null, 'Change your password, second factor and sessions on the ',
      h('a', { href: '/settings/security' }, 'Security page'), '.')));
}

/**
 * /confirm-email/{token}: opened from the mail, signed in or not.
 * @param {PageContext} ctx
 */
export function confirmEmail({ view, params }) {
  const status = h('div', { role: 'status' }, h('p', { class: 'muted' }, 'Confirming your new address…'));
  view.append(status);
  (async () => {
    try {
      const done = await api('POST', '/v1/auth/confirm-email', { token: params[0] });
      // A signed-in browser shows the new address from now on (the gateway read the session
      // again when this browser's cookie came with the link).
      if (state.session) await loadSession().catch(() => null);
      replace(status,
        alertBox(['Your e-mail address is now ', h('strong', null, done.email), '. Sign in with it from now on.'], { kind: 'success' }),
        h('p', { class: 'auth-links' }, state.session
          ? h('a', { href: '/settings/profile' }, 'Go to your profile')
          : h('a', { href: '/sign-in' }, 'Sign in')));
    } catch (err) {
      const text = err instanceof ApiError && err.status === 404
        ? 'This link is not valid: it may have been used already or have expired. Ask for a new one on your profile page.'
        : err instanceof Error ? err.message : String(err);
      replace(status, alertBox(text), h('p', { class: 'auth-links' },
        h('a', { href: state.session ? '/settings/profile' : '/sign-in' }, state.session ? 'Go to your profile' : 'Sign in')));
    }
  })();
}
