// @ts-check
// Passkeys in the browser: the API's WebAuthn options (JSON) parsed by the browser itself, and
// the credential sent back as its own JSON encoding (WebAuthn Level 3).

/** Whether this browser can create and use passkeys the way the portal asks. */
export function passkeysSupported() {
  return typeof window.PublicKeyCredential?.parseCreationOptionsFromJSON === 'function';
}

/** A new passkey for `options` (the API's `{publicKey}`), as JSON for the API. */
/**
 * @param {{publicKey: PublicKeyCredentialCreationOptionsJSON}} options
 * @returns {Promise<PublicKeyCredentialJSON>}
 */
export async function createPasskey(options) {
  const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey);
  // Discoverable, so that it also signs in alone, without the e-mail or a password.
  publicKey.authenticatorSelection = { ...publicKey.authenticatorSelection, residentKey: 'required', requireResidentKey: true };
  const credential = await navigator.credentials.create({ publicKey });
  return /** @type {PublicKeyCredential} */ (credential).toJSON();
}

/** A passkey's answer to `options` (the API's `{publicKey}`), as JSON for the API. */
/**
 * @param {{publicKey: PublicKeyCredentialRequestOptionsJSON}} options
 * @returns {Promise<PublicKeyCredentialJSON>}
 */
export async function usePasskey(options) {
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
  const credential = await navigator.credentials.get({ publicKey });
  return /** @type {PublicKeyCredential} */ (credential).toJSON();
}
