// @ts-check
// Pages that need no session: sign in, sign up, accept an invitation, ask for and use a reset link.
import { h, field, form, alertBox, errorText, navigate, replace, enc, time } from './dom.js';
import { api, state, startSession, safeNext, ApiError } from './api.js';
import { passkeysSupported, usePasskey } from './passkeys.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */
/**
 * What a sign-in answers (a Session), with the passkeys that still sign in after a reset.
 * @typedef {import('./api.js').Session & {passkeys?: Array<{name: string}>}} NewSession
 */

const PASSWORD_HINT = '10 to 256 characters, hard to guess: a few unrelated words work well.';

const newPassword = (label = 'Password') => field({
  name: 'password', label, type: 'password', autocomplete: 'new-password',
  required: true, minlength: 10, maxlength: 256, hint: PASSWORD_HINT,
});

const names = () => [
  field({ name: 'firstName', label: 'First name', autocomplete: 'given-name', required: true, maxlength: 50 }),
  field({ name: 'lastName', label: 'Last name', autocomplete: 'family-name', required: true, maxlength: 50 }),
];

/** @param {HTMLElement} view */
function notice(view) {
  if (state.notice) {
    view.append(alertBox(state.notice, { kind: 'info' }));
    state.notice = null;
  }
}

/** @param {PageContext} ctx */
export function signIn({ view, query }) {
  notice(view);
  const next = safeNext(query.get('next'));
  const links = h('p', { class: 'auth-links' });
  view.append(
    form({
      fields: [
        field({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true }),
        field({ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true }),
      ],
      submit: 'Sign in',
      onSubmit: async ({ email, password }) => {
        let answer;
        try {
          answer = await api('POST', '/v1/auth/sign-in', { email, password });
        } catch (err) {
          if (err instanceof ApiError && err.status === 429 && !err.retryAfter) err.message = 'Too many sign-in attempts. Wait a minute and try again.';
          throw err;
        }
        // 202: the password was right and a second factor is asked for.
        if (answer?.challenge) return secondStep(view, answer, next);
        signedIn(answer, next);
      },
    }),
    h('p', { class: 'auth-links' }, h('a', { href: '/forgot' }, 'Forgot password?')),
    passkeysSupported() ? passkeyButton(next) : '',
    h('p', { class: 'auth-links' }, h('a', { href: `/sign-in/sso${next === '/' ? '' : `?next=${encodeURIComponent(next)}`}` }, 'Sign in with single sign-on')),
    links,
  );
  api('GET', '/v1/auth/options').then((o) => {
    if (o?.signUp === 'open') replace(links, 'New to Switchboard? ', h('a', { href: '/sign-up' }, 'Create a team'));
  }).catch(() => { /* no link then */ });
}

/**
 * "Sign in with a passkey": no e-mail, no password; the passkey names its person.
 * @param {string} next where to go once signed in
 */
function passkeyButton(next) {
  const slot = h('div', { class: 'form-alert' });
  const button = h('button', {
    type: 'button', class: 'btn secondary',
    onclick: async () => {
      button.disabled = true;
      replace(slot);
      try {
        const options = await api('POST', '/v1/auth/passkey/options');
        const credential = await usePasskey(options.options);
        signedIn(await api('POST', '/v1/auth/passkey', { ceremony: options.ceremony, credential }), next);
      } catch (err) {
        replace(slot, alertBox(err instanceof Error && err.name === 'NotAllowedError' ? 'The passkey was not used.' : errorText(err)));
        button.disabled = false;
      }
    },
  }, 'Sign in with a passkey');
  return h('div', { class: 'passkey-sign-in' }, button, slot);
}

/**
 * Single sign-on: the e-mail picks the team, whose identity provider the browser goes to.
 * @param {PageContext} ctx
 */
export function ssoSignIn({ view, query }) {
  notice(view);
  const next = safeNext(query.get('next'));
  view.append(
    h('p', null, 'Enter your work e-mail: you continue at your organisation’s sign-in page.'),
    form({
      fields: [field({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true })],
      submit: 'Continue',
      onSubmit: async ({ email }) => {
        const started = await api('POST', '/v1/auth/sso/start', { email });
        sessionStorage.setItem('switchboard.sso.next', next);
        location.assign(started.url);
      },
    }),
    h('p', { class: 'auth-links' }, h('a', { href: '/sign-in' }, 'Sign in with a password')));
}

/**
 * Back from the identity provider: the code it sent is turned into a session.
 * @param {PageContext} ctx
 */
export function ssoCallback({ view, query }) {
  const next = safeNext(sessionStorage.getItem('switchboard.sso.next'));
  sessionStorage.removeItem('switchboard.sso.next');
  const retry = h('p', { class: 'auth-links' }, h('a', { href: '/sign-in/sso' }, 'Try again'), ' · ', h('a', { href: '/sign-in' }, 'Sign in with a password'));
  const error = query.get('error');
  if (error || !query.get('code') || !query.get('state')) {
    view.append(alertBox(`Your identity provider did not sign you in${error ? ` (${error})` : ''}.`), retry);
    return;
  }
  const status = h('p', { class: 'muted', role: 'status' }, 'Signing you in…');
  view.append(status);
  api('POST', '/v1/auth/sso/finish', { code: query.get('code'), state: query.get('state') })
    .then((session) => signedIn(session, next))
    .catch((err) => replace(view, alertBox(errorText(err)), retry));
}

/**
 * Where a new session goes: its page; the set-up of a second factor the team requires; or,
 * after a password reset, the security page with the passkeys that still sign in.
 * @param {NewSession} session
 * @param {string} next
 */
function signedIn(session, next) {
  startSession(session);
  if (session?.secondFactorNeeded) {
    state.notice = 'Your team requires a second factor. Set up an authenticator app to continue.';
    navigate('/settings/security', { replace: true });
  } else if (session?.passkeys?.length) {
    state.notice = passkeysNotice(session.passkeys);
    navigate('/settings/security', { replace: true });
  } else navigate(next, { replace: true });
}

/**
 * What a person is told after their password was reset or changed: the passkeys that still
 * sign in without it, to remove any they do not know.
 * @param {Array<{name: string}>} passkeys
 */
export function passkeysNotice(passkeys) {
  const names = passkeys.map((p) => `“${p.name}”`).join(', ');
  return `Your password is changed. ${passkeys.length === 1 ? 'This passkey still signs' : 'These passkeys still sign'} in as you without it: ${names}. If you do not know one, remove it below.`;
}

/**
 * The second step of a sign-in: a code of the authenticator app, or a recovery code.
 * @param {HTMLElement} view
 * @param {{challenge: string, methods: string[]}} challenge the answer 202 of a sign-in
 * @param {string} next
 */
function secondStep(view, challenge, next) {
  const withPasskey = challenge.methods.includes('passkey') && passkeysSupported();
  const passkeyError = h('div', { class: 'form-alert' });
  const passkey = withPasskey && h('button', {
    type: 'button', class: 'btn primary',
    onclick: async () => {
      replace(passkeyError);
      try {
        const options = await api('POST', '/v1/auth/sign-in/passkey-options', { challenge: challenge.challenge });
        const credential = await usePasskey(options.options);
        const body = { challenge: challenge.challenge, passkey: { ceremony: options.ceremony, credential } };
        signedIn(await api('POST', '/v1/auth/sign-in/verify', body), next);
      } catch (err) {
        replace(passkeyError, alertBox(err instanceof Error && err.name === 'NotAllowedError' ? 'The passkey was not used.' : errorText(err)));
      }
    },
  }, 'Use a passkey');
  replace(view,
    withPasskey && h('div', null, passkey, passkeyError, h('p', { class: 'muted' }, 'Or:')),
    h('p', null, 'Enter the 6-digit code from your authenticator app, or one of your recovery codes.'),
    form({
      fields: [field({
        name: 'code', label: 'Code', autocomplete: 'one-time-code', inputmode: 'text', required: true, maxlength: 32,
        hint: 'A recovery code looks like xxxxxx-xxxxxx-xxxxxx-xxxxxx and works once.',
      })],
      submit: 'Verify',
      onSubmit: async ({ code }) => {
        signedIn(await api('POST', '/v1/auth/sign-in/verify', { challenge: challenge.challenge, code }), next);
      },
    }),
    h('p', { class: 'auth-links' }, h('a', { href: '/sign-in' }, 'Start again')));
  view.querySelector('input')?.focus();
}

/** @param {PageContext} ctx */
export function signUp({ view }) {
  const body = h('div', null, h('p', { class: 'muted' }, 'Loading…'));
  view.append(body);
  api('GET', '/v1/auth/options').then((o) => {
    if (o?.signUp !== 'open') {
      replace(body,
        alertBox('Sign-up is closed on this server. Ask an owner of your team for an invitation.', { kind: 'info' }),
        h('p', { class: 'auth-links' }, h('a', { href: '/sign-in' }, 'Sign in')));
      return;
    }
    replace(body,
      h('p', { class: 'lead' }, 'Create a team and its first account. You will be its owner.'),
      form({
        fields: [
          ...names(),
          field({ name: 'teamName', label: 'Team name', autocomplete: 'organization', required: true, maxlength: 50 }),
          field({ name: 'email', label: 'Email', type: 'email', autocomplete: 'email', required: true }),
          newPassword(),
        ],
        submit: 'Create team',
        onSubmit: async (v) => {
          startSession(await api('POST', '/v1/auth/sign-up', v));
          navigate('/', { replace: true });
        },
      }),
      h('p', { class: 'auth-links' }, 'Already have an account? ', h('a', { href: '/sign-in' }, 'Sign in')));
  }).catch((err) => replace(body, alertBox(err.message)));
}

/** @param {PageContext} ctx */
export function invite({ view, params }) {
  if (state.session) {
    view.append(alertBox(`You are signed in as ${state.session.user.email}. Accepting this invitation signs you in as the invited person instead.`, { kind: 'info' }));
  }
  // Who invited whom where, before anything is typed: a link opened by the wrong person, or an
  // old one, says so here.
  const about = h('div', { class: 'lead' }, h('p', null, 'You have been invited to a Switchboard team. Tell us your name and choose a password.'));
  api('GET', `/v1/auth/invitations/${enc(params[0])}`).then((inv) => {
    replace(about,
      h('p', null, 'You are invited to join ', h('strong', null, inv.team.name), ` as ${/^[aeiou]/.test(inv.role) ? 'an' : 'a'} ${inv.role}.`),
      h('p', null, 'Your account will sign in as ', h('strong', null, inv.email), '. Tell us your name and choose a password.'),
      h('p', { class: 'muted' }, 'The invitation expires ', time(inv.expiresAt), '.'));
  }).catch((err) => {
    if (err.status === 404) replace(about, alertBox('This invitation link is not valid: it may have been used already or have expired. Ask whoever invited you for a new one.'));
  });
  view.append(
    about,
    form({
      fields: [...names(), newPassword()],
      submit: 'Accept invitation',
      onSubmit: async ({ firstName, lastName, password }) => {
        try {
          startSession(await api('POST', '/v1/auth/accept-invite', { token: params[0], password, firstName, lastName }));
        } catch (err) {
          if (err instanceof ApiError && err.status === 404) err.message = 'This invitation link is not valid: it may have been used already or have expired. Ask whoever invited you for a new one.';
          throw err;
        }
        navigate('/', { replace: true });
      },
    }));
}

/**
 * "Forgot password?": asks for a reset link by e-mail. The answer is the same whether or not an
 * account uses the address, and so is what this page says.
 * @param {PageContext} ctx
 */
export function forgot({ view }) {
  const done = h('div', { role: 'status' });
  view.append(
    h('p', { class: 'lead' }, 'Enter the e-mail address you sign in with. If an account uses it, we e-mail it a link to choose a new password.'),
    form({
      fields: [field({ name: 'email', label: 'Email', type: 'email', autocomplete: 'username', required: true })],
      submit: 'Send the link',
      onSubmit: async ({ email }) => {
        try {
          await api('POST', '/v1/auth/forgot', { email });
        } catch (err) {
          if (err instanceof ApiError && err.status === 429 && !err.retryAfter) err.message = 'Too many requests for this address. Wait a few minutes and try again.';
          throw err;
        }
        replace(done, alertBox(`If an account uses ${email}, a link to reset its password is on its way. It works once, for 1 day.`, { kind: 'info' }));
      },
    }),
    done,
    h('p', { class: 'auth-links' }, h('a', { href: '/sign-in' }, 'Back to sign in')));
}

/** @param {PageContext} ctx */
export function reset({ view, params }) {
  view.append(
    h('p', { class: 'lead' }, 'Choose a new password for your account.'),
    form({
      fields: [newPassword('New password')],
      submit: 'Set password',
      onSubmit: async ({ password }) => {
        let answer;
        try {
          answer = await api('POST', '/v1/auth/reset', { token: params[0], password });
        } catch (err) {
          if (err instanceof ApiError && err.status === 404) err.message = 'This reset link is not valid: it may have been used already or have expired. Ask an owner of your team for a new one.';
          throw err;
        }
        // 202: the password is set, and the person's second factor signs them in.
        if (answer?.challenge) return secondStep(view, answer, '/');
        signedIn(answer, '/');
      },
    }),
    h('p', { class: 'auth-links' }, h('a', { href: '/sign-in' }, 'Back to sign in')));
}
