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
  const credential = await plainly(navigator.credentials.create({ publicKey }), options.publicKey.rp?.id);
  return /** @type {PublicKeyCredential} */ (credential).toJSON();
}

/** A passkey's answer to `options` (the API's `{publicKey}`), as JSON for the API. */
/**
 * @param {{publicKey: PublicKeyCredentialRequestOptionsJSON}} options
 * @returns {Promise<PublicKeyCredentialJSON>}
 */
export async function usePasskey(options) {
  const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
  const credential = await plainly(navigator.credentials.get({ publicKey }), options.publicKey.rpId);
  return /** @type {PublicKeyCredential} */ (credential).toJSON();
}

/**
 * The browser's own refusal when the page's address is not the passkeys' domain is a bare
 * "invalid domain" (SecurityError): said in words, with the address that works (issue 55: a
 * portal opened at 127.0.0.1 whose public URL names localhost).
 * @template T
 * @param {Promise<T>} ceremony
 * @param {string | undefined} rpId the domain the platform's passkeys belong to
 * @returns {Promise<T>}
 */
async function plainly(ceremony, rpId) {
  try {
    return await ceremony;
  } catch (err) {
    if (err instanceof DOMException && err.name === 'SecurityError' && rpId && rpId !== location.hostname) {
      throw new Error(`Passkeys of this platform belong to ${rpId}, and this page is open at ${location.hostname}. ` +
        `Open the portal at ${rpId} (the address SWITCHBOARD_PUBLIC_URL names) to use them.`, { cause: err });
    }
    throw err;
  }
}
