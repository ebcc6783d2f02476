// @ts-check
// "Confirm it is you": a change to the person's second factors or sessions answers 403
// REAUTHENTICATION_REQUIRED when their sign-in is more than a few minutes old. api() then asks
// here, and sends the change again once the person confirmed (POST /v1/auth/reauthenticate)
// with their strongest proof: a code of their authenticator app (or a recovery code), a
// passkey, or, without a second factor, their password.
import { h, field, formDialog, confirmDialog } from './dom.js';
import { api, setReauthenticator } from './api.js';
import { passkeysSupported, usePasskey } from './passkeys.js';

const TITLE = 'Confirm it is you';

/** @returns {Promise<boolean>} true once the session is recently authenticated again */
async function confirmItIsYou() {
  const factors = await api('GET', '/v1/auth/second-factors');
  const confirm = (/** @type {Record<string, unknown>} */ proof) => api('POST', '/v1/auth/reauthenticate', proof);
  if (factors.totp) {
    return formDialog({
      title: TITLE,
      fields: [
        h('p', null, 'This change needs a recent sign-in. Enter the 6-digit code from your authenticator app, or one of your recovery codes.'),
        field({ name: 'code', label: 'Code', autocomplete: 'one-time-code', required: true, maxlength: 64 }),
      ],
      submit: 'Confirm',
      onSubmit: ({ code }) => confirm({ code }),
    });
  }
  if (factors.passkeys.length) {
    return confirmDialog({
      title: TITLE,
      body: passkeysSupported()
        ? 'This change needs a recent sign-in. Use one of your passkeys to confirm it is you.'
        : 'This change needs a recent sign-in with one of your passkeys, which this browser cannot use. Use another browser.',
      confirm: 'Use a passkey',
      danger: false,
      action: async () => {
        const options = await api('POST', '/v1/auth/reauthenticate/passkey-options');
        let credential;
        try {
          credential = await usePasskey(options.options);
        } catch (err) {
          if (!(err instanceof Error)) throw err;
          throw new Error(err.name === 'NotAllowedError' ? 'The passkey was not used.' : err.message, { cause: err });
        }
        await confirm({ passkey: { ceremony: options.ceremony, credential } });
      },
    });
  }
  if (factors.hasPassword) {
    return formDialog({
      title: TITLE,
      fields: [
        h('p', null, 'This change needs a recent sign-in. Enter your password.'),
        field({ name: 'password', label: 'Password', type: 'password', autocomplete: 'current-password', required: true }),
      ],
      submit: 'Confirm',
      onSubmit: ({ password }) => confirm({ password }),
    });
  }
  // Single sign-on only, without a second factor: the provider confirms it, at a new sign-in.
  await confirmDialog({
    title: TITLE,
    body: 'This change needs a recent sign-in. Sign in again through your single sign-on, then make it.',
    confirm: 'Sign in again',
    danger: false,
    action: async () => {
      const here = location.pathname + location.search;
      location.assign(`/sign-in/sso?next=${encodeURIComponent(here)}`);
    },
  });
  return false;
}

setReauthenticator(confirmItIsYou);
