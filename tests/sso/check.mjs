// Self-test of provider.mjs without a browser: runs the authorization-code +
// PKCE flow with plain fetch (cookies kept by hand) against a real provider
// process, verifies the id_token with jose, and checks both tamper modes.
// Usage: node tests/sso/check.mjs   (exit 0 = all passed)
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

import { createRemoteJWKSet, decodeProtectedHeader, errors, jwtVerify } from 'jose';

const PROVIDER = fileURLToPath(new URL('./provider.mjs', import.meta.url));
const CLIENT_ID = 'switchboard-test';
const CLIENT_SECRET = 'not-a-real-secret';
const REDIRECT_URI = 'http://127.0.0.1:9/sso/callback'; // never fetched: we stop at it
const USER = {
  sub: 'user-ada', email: 'ada@example.test', given_name: 'Ada', family_name: 'Lovelace', password: 'correct horse',
};
const HTTP_TIMEOUT_MS = 5000;
const READY_TIMEOUT_MS = 15000;
const EXIT_TIMEOUT_MS = 5000;

const children = new Set();
let passed = 0;

function ok(msg) {
  passed += 1;
  console.log(`ok ${passed} - ${msg}`);
}
function assert(cond, msg) {
  if (!cond) throw new Error(`FAILED: ${msg}`);
  ok(msg);
}

// Reject after ms with a message, so no wait can hang.
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`timeout after ${ms} ms: ${what}`)), ms); }),
  ]).finally(() => clearTimeout(timer));
}

async function startProvider(tamper = '') {
  const child = spawn(process.execPath, [PROVIDER], {
    env: {
      ...process.env,
      OIDC_PORT: '0',
      OIDC_CLIENT_ID: CLIENT_ID,
      OIDC_CLIENT_SECRET: CLIENT_SECRET,
      OIDC_REDIRECT_URI: REDIRECT_URI,
      OIDC_USERS: JSON.stringify([USER]),
      OIDC_TAMPER: tamper,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  child.on('exit', () => children.delete(child));
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  child.stderr.on('end', () => { if (stderr.trim()) console.error(`[provider ${tamper || 'normal'} stderr]\n${stderr.trimEnd()}`); });

  let stdout = '';
  const issuer = await withTimeout(new Promise((resolve, reject) => {
    child.stdout.on('data', (d) => {
      stdout += d;
      const m = /^oidc-provider ready (\S+)$/m.exec(stdout);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`provider exited early (code ${code}): ${stderr}`)));
  }), READY_TIMEOUT_MS, `provider (tamper=${tamper || 'none'}) to print its ready line`);
  return { child, issuer };
}

async function stopProvider(child) {
  if (child.exitCode !== null) return child.exitCode;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  try {
    const [code] = await withTimeout(exited, EXIT_TIMEOUT_MS, 'provider to exit on SIGTERM');
    return code;
  } catch (err) {
    child.kill('SIGKILL');
    throw err;
  }
}

// ---- HTTP with a hand-kept cookie jar (all cookies go to the one host) ----

function makeClient() {
  const jar = new Map();
  return async function request(url, init = {}) {
    const headers = new Headers(init.headers);
    if (jar.size) headers.set('cookie', [...jar].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, {
      ...init, headers, redirect: 'manual', signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const i = pair.indexOf('=');
      const name = pair.slice(0, i).trim();
      const value = pair.slice(i + 1).trim();
      const expired = attrs.some((a) => /^\s*expires=/i.test(a) && Date.parse(a.split('=')[1]) < Date.now())
        || attrs.some((a) => /^\s*max-age=0\s*$/i.test(a));
      if (expired || value === '') jar.delete(name); else jar.set(name, value);
    }
    return res;
  };
}

const b64url = (buf) => buf.toString('base64url');

// The browser's part of the flow: /auth -> login form -> redirects -> redirect_uri?code=
async function authorize(meta, { nonce, state, challenge, password = USER.password, log = () => {} }) {
  const request = makeClient();
  const auth = new URL(meta.authorization_endpoint);
  auth.search = new URLSearchParams({
    client_id: CLIENT_ID,
    redirect_uri: REDIRECT_URI,
    response_type: 'code',
    scope: 'openid email profile',
    state,
    nonce,
    code_challenge: challenge,
    code_challenge_method: 'S256',
  });
  let url = auth.href;
  let res = await request(url);
  for (let hop = 0; hop < 12; hop += 1) {
    if (res.status >= 300 && res.status < 400) {
      url = new URL(res.headers.get('location'), url).href;
      if (url.startsWith(REDIRECT_URI)) return new URL(url);
      log(`redirect ${res.status} -> ${new URL(url).pathname}`);
      res = await request(url);
    } else if (res.status === 200 && new URL(url).pathname.startsWith('/interaction/')) {
      const html = await res.text();
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      if (!action || !/>Email</.test(html) || !/>Password</.test(html) || !/>Sign in</.test(html)) {
        throw new Error(`interaction page has no Email/Password/Sign in form:\n${html}`);
      }
      log(`login form at ${new URL(url).pathname}`);
      url = new URL(action, url).href;
      res = await request(url, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ email: USER.email, password }),
      });
      if (res.status === 401) return { loginRejected: await res.text() };
    } else {
      throw new Error(`unexpected ${res.status} at ${url}: ${(await res.text()).slice(0, 500)}`);
    }
  }
  throw new Error('too many redirects');
}

async function token(meta, code, verifier, authMethod) {
  const body = new URLSearchParams({
    grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: verifier,
  });
  const headers = { 'content-type': 'application/x-www-form-urlencoded' };
  if (authMethod === 'client_secret_basic') {
    const enc = encodeURIComponent; // RFC 6749 2.3.1: form-encode before base64
    headers.authorization = `Basic ${Buffer.from(`${enc(CLIENT_ID)}:${enc(CLIENT_SECRET)}`).toString('base64')}`;
  } else {
    body.set('client_id', CLIENT_ID);
    body.set('client_secret', CLIENT_SECRET);
  }
  const res = await fetch(meta.token_endpoint, {
    method: 'POST', headers, body, signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
  });
  const json = await res.json();
  if (res.status !== 200) throw new Error(`token endpoint ${res.status}: ${JSON.stringify(json)}`);
  return json;
}

// One full code flow; returns what the RP would see.
async function codeFlow(issuer, { authMethod = 'client_secret_basic', log } = {}) {
  const meta = await (await fetch(`${issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) })).json();
  const verifier = b64url(randomBytes(32));
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  const nonce = b64url(randomBytes(16));
  const state = b64url(randomBytes(16));
  const back = await authorize(meta, { nonce, state, challenge, log });
  assert(back.searchParams.get('state') === state, 'redirect_uri got back our state');
  assert(back.searchParams.get('iss') === issuer, 'redirect_uri got iss (RFC 9207) = issuer');
  const code = back.searchParams.get('code');
  assert(code, `redirect_uri got ?code= (${back.origin}${back.pathname})`);
  const tokens = await token(meta, code, verifier, authMethod);
  assert(tokens.id_token && tokens.access_token, `token endpoint (${authMethod}) returned id_token and access_token`);
  const jwks = createRemoteJWKSet(new URL(meta.jwks_uri), { timeoutDuration: HTTP_TIMEOUT_MS });
  return { meta, nonce, tokens, jwks };
}

const verifyOpts = (issuer) => ({ issuer, audience: CLIENT_ID, algorithms: ['RS256'] });

async function checkNormal() {
  const { child, issuer } = await startProvider('');
  ok(`provider started: ${issuer}`);
  const meta = await (await fetch(`${issuer}/.well-known/openid-configuration`, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) })).json();
  assert(meta.issuer === issuer, 'discovery issuer matches');
  assert(JSON.stringify(meta.code_challenge_methods_supported) === '["S256"]', 'discovery: PKCE S256 only');

  // PKCE is required: /auth without code_challenge bounces back with an error.
  const noPkce = new URL(meta.authorization_endpoint);
  noPkce.search = new URLSearchParams({
    client_id: CLIENT_ID, redirect_uri: REDIRECT_URI, response_type: 'code', scope: 'openid', state: 's', nonce: 'n',
  });
  const res = await makeClient()(noPkce.href);
  const err = new URL(res.headers.get('location') ?? 'about:blank');
  assert(res.status === 303 && err.searchParams.get('error') === 'invalid_request'
    && /PKCE/.test(err.searchParams.get('error_description')),
    `PKCE required: no code_challenge -> ${err.searchParams.get('error')} (${err.searchParams.get('error_description')})`);

  // Wrong password re-renders the form with an error.
  const rejected = await authorize(meta, { nonce: 'n', state: 's', challenge: b64url(randomBytes(32)), password: 'wrong' });
  assert(rejected.loginRejected && /Invalid email or password/.test(rejected.loginRejected), 'wrong password -> 401 with "Invalid email or password."');

  const hops = [];
  const flow = await codeFlow(issuer, { log: (m) => hops.push(m) });
  console.log(`   flow: ${hops.join('; ')}`);
  const { payload, protectedHeader } = await jwtVerify(flow.tokens.id_token, flow.jwks, verifyOpts(issuer));
  assert(protectedHeader.alg === 'RS256', `id_token verifies against JWKS (alg ${protectedHeader.alg}, kid ${protectedHeader.kid}), iss and aud ok`);
  assert(payload.nonce === flow.nonce, 'id_token nonce matches');
  assert(payload.sub === USER.sub && payload.email === USER.email && payload.email_verified === true
    && payload.given_name === USER.given_name && payload.family_name === USER.family_name,
    `id_token claims: ${JSON.stringify({ sub: payload.sub, email: payload.email, email_verified: payload.email_verified, given_name: payload.given_name, family_name: payload.family_name })}`);

  const info = await (await fetch(flow.meta.userinfo_endpoint, {
    headers: { authorization: `Bearer ${flow.tokens.access_token}` }, signal: AbortSignal.timeout(HTTP_TIMEOUT_MS),
  })).json();
  assert(info.email === USER.email && info.sub === USER.sub, 'userinfo returns the same sub and email');

  const post = await codeFlow(issuer, { authMethod: 'client_secret_post' });
  await jwtVerify(post.tokens.id_token, post.jwks, verifyOpts(issuer));
  ok('client_secret_post is accepted too and its id_token verifies');

  assert(await stopProvider(child) === 0, 'provider exits 0 on SIGTERM');
}

async function checkTamperNonce() {
  const { child, issuer } = await startProvider('nonce');
  ok(`provider (OIDC_TAMPER=nonce) started: ${issuer}`);
  const flow = await codeFlow(issuer);
  const { payload } = await jwtVerify(flow.tokens.id_token, flow.jwks, verifyOpts(issuer));
  ok('tampered-nonce id_token still verifies against JWKS (iss, aud ok)');
  assert(payload.nonce !== flow.nonce, `its nonce is wrong (sent ${flow.nonce}, got ${payload.nonce})`);
  assert(await stopProvider(child) === 0, 'provider exits 0 on SIGTERM');
}

async function checkTamperSignature() {
  const { child, issuer } = await startProvider('signature');
  ok(`provider (OIDC_TAMPER=signature) started: ${issuer}`);
  const flow = await codeFlow(issuer);
  const jwks = await (await fetch(flow.meta.jwks_uri, { signal: AbortSignal.timeout(HTTP_TIMEOUT_MS) })).json();
  const { kid } = decodeProtectedHeader(flow.tokens.id_token);
  assert(jwks.keys.length === 1 && jwks.keys[0].kid === kid, `tampered id_token carries the published kid ${kid}`);
  let failure;
  try {
    await jwtVerify(flow.tokens.id_token, flow.jwks, verifyOpts(issuer));
  } catch (e) {
    failure = e;
  }
  assert(failure instanceof errors.JWSSignatureVerificationFailed, `verification fails: ${failure?.code ?? 'it verified!'}`);
  assert(await stopProvider(child) === 0, 'provider exits 0 on SIGTERM');
}

// Overall bound, in case something slips past the per-wait timeouts.
const watchdog = setTimeout(() => {
  console.error('check.mjs: overall timeout (90 s)');
  for (const c of children) c.kill('SIGKILL');
  process.exit(1);
}, 90_000);

let failed = 0;
try {
  await checkNormal();
  await checkTamperNonce();
  await checkTamperSignature();
} catch (e) {
  failed = 1;
  console.error(e.stack || e);
} finally {
  for (const c of children) {
    try { await stopProvider(c); } catch { c.kill('SIGKILL'); }
  }
  clearTimeout(watchdog);
}
console.log(`sso check: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
