#!/usr/bin/env node
// Passkey sign-ins for bench/sign-in.sh: Chromium with a virtual authenticator signs in as
// `email` (password "correct horse battery"), registers a passkey, then times RUNS sign-ins
// with the passkey alone and RUNS with the password and the passkey as second factor, each
// from the first request to the session (the API calls and the authenticator, in the page).
// Usage: node passkey_sign_in.mjs PORTAL_URL EMAIL RUNS. Prints JSON {alone, second} with
// p50/p95 in ms.
import { createRequire } from 'node:module';

const require = createRequire(new URL('../tests/portal/package.json', import.meta.url));
const { chromium } = require('playwright-core');
const [base, email, runs] = [process.argv[2], process.argv[3], Number(process.argv[4] || 20)];
const PASSWORD = 'correct horse battery';
const T = 10000;

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
});
const context = await browser.newContext({ baseURL: base });
const page = await context.newPage();
page.setDefaultTimeout(T);
const cdp = await context.newCDPSession(page);
await cdp.send('WebAuthn.enable');
await cdp.send('WebAuthn.addVirtualAuthenticator', { options: {
  protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true,
  isUserVerified: true, automaticPresenceSimulation: true,
} });
await page.goto('/sign-in');

// In the page: the portal's own passkey module, and fetch as the portal calls the API.
const registered = await page.evaluate(async ([email, password]) => {
  const { createPasskey } = await import('/assets/passkeys.js');
  const post = async (path, body, csrf) => {
    const headers = { 'Content-Type': 'application/json' };
    if (csrf) headers['X-CSRF-Token'] = csrf;
    const res = await fetch(path, { method: 'POST', headers, body: JSON.stringify(body ?? {}) });
    return { status: res.status, body: await res.json() };
  };
  const signedIn = await post('/v1/auth/sign-in', { email, password });
  if (signedIn.status !== 200) return `sign-in answered ${signedIn.status}`;
  const csrf = signedIn.body.data.csrfToken;
  const options = await post('/v1/auth/second-factors/passkeys/options', {}, csrf);
  const credential = await createPasskey(options.body.data.options);
  const done = await post('/v1/auth/second-factors/passkeys', { ceremony: options.body.data.ceremony, name: 'Bench', credential }, csrf);
  return done.status === 201 ? 'ok' : `registering answered ${done.status}`;
}, [email, PASSWORD]);
if (registered !== 'ok') throw new Error(registered);

const timings = await page.evaluate(async ([email, password, runs]) => {
  const { usePasskey } = await import('/assets/passkeys.js');
  const post = async (path, body) => {
    const res = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body ?? {}) });
    return { status: res.status, body: await res.json() };
  };
  const alone = [];
  const second = [];
  for (let i = 0; i < runs; i += 1) {
    let started = performance.now();
    const options = await post('/v1/auth/passkey/options');
    const credential = await usePasskey(options.body.data.options);
    const done = await post('/v1/auth/passkey', { ceremony: options.body.data.ceremony, credential });
    if (done.status !== 200) throw new Error(`passkey sign-in answered ${done.status}`);
    alone.push(performance.now() - started);

    started = performance.now();
    const first = await post('/v1/auth/sign-in', { email, password });
    if (first.status !== 202) throw new Error(`sign-in answered ${first.status}`);
    const challenge = first.body.data.challenge;
    const keyOptions = await post('/v1/auth/sign-in/passkey-options', { challenge });
    const assertion = await usePasskey(keyOptions.body.data.options);
    const verified = await post('/v1/auth/sign-in/verify', { challenge, passkey: { ceremony: keyOptions.body.data.ceremony, credential: assertion } });
    if (verified.status !== 200) throw new Error(`verify answered ${verified.status}`);
    second.push(performance.now() - started);
  }
  return { alone, second };
}, [email, PASSWORD, runs]);
await browser.close();

const figures = (samples) => {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.round(q * (sorted.length - 1)))];
  return { p50: Math.round(at(0.5) * 10) / 10, p95: Math.round(at(0.95) * 10) / 10 };
};
console.log(JSON.stringify({ alone: figures(timings.alone), second: figures(timings.second) }));
