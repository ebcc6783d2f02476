// A real OpenID Connect provider (npm `oidc-provider`) for Switchboard's SSO
// integration tests. Loopback and plain http only; never use it for anything else.
//
// Environment:
//   OIDC_PORT           port on 127.0.0.1 (0 or unset = a free port)
//   OIDC_CLIENT_ID      the one confidential client
//   OIDC_CLIENT_SECRET
//   OIDC_REDIRECT_URI
//   OIDC_USERS          JSON [{sub, email, given_name, family_name, password}, ...]
//   OIDC_TAMPER         "" (normal) | "nonce" | "signature" (see tamperIdToken)
//
// Prints exactly one line `oidc-provider ready <issuer>` on stdout when it
// serves; everything else goes to stderr.
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';

import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import Provider from 'oidc-provider';

function fail(msg) {
  console.error(`oidc-provider: ${msg}`);
  process.exit(2);
}

const env = process.env;
for (const name of ['OIDC_CLIENT_ID', 'OIDC_CLIENT_SECRET', 'OIDC_REDIRECT_URI']) {
  if (!env[name]) fail(`${name} must be set`);
}
let users;
try {
  users = JSON.parse(env.OIDC_USERS || '[]');
  if (!Array.isArray(users)) throw new Error('not an array');
} catch (err) {
  fail(`OIDC_USERS must be a JSON array: ${err.message}`);
}
const tamper = env.OIDC_TAMPER || '';
if (!['', 'nonce', 'signature'].includes(tamper)) fail(`unknown OIDC_TAMPER ${JSON.stringify(tamper)}`);

// The signing key lives only in memory for this process's life.
const kid = `test-${randomUUID()}`;
const { privateKey } = await generateKeyPair('RS256', { extractable: true });
const signingJwk = { ...(await exportJWK(privateKey)), kid, alg: 'RS256', use: 'sig' };
// For OIDC_TAMPER=signature: another key that claims the same kid.
const rogueKey = tamper === 'signature' ? (await generateKeyPair('RS256')).privateKey : undefined;

// The issuer URL needs the port, so listen first and attach the provider after.
const server = http.createServer();
await new Promise((resolve, reject) => {
  server.once('error', reject);
  server.listen(Number(env.OIDC_PORT || 0), '127.0.0.1', resolve);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [{
    client_id: env.OIDC_CLIENT_ID,
    client_secret: env.OIDC_CLIENT_SECRET,
    redirect_uris: [env.OIDC_REDIRECT_URI],
    grant_types: ['authorization_code'],
    response_types: ['code'],
    // oidc-provider accepts client_secret_post too for a client registered
    // with client_secret_basic (and vice versa): see shared/client_auth.js.
    token_endpoint_auth_method: 'client_secret_basic',
  }],
  jwks: { keys: [signingJwk] },
  // Cookie signing keys; random per process, as all state is in memory.
  cookies: { keys: [randomBytes(32).toString('base64url')] },
  pkce: { required: () => true }, // S256 is the only method oidc-provider 9 knows
  scopes: ['openid', 'email', 'profile'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['given_name', 'family_name'],
  },
  // Put the scope claims in the id_token too, not only at userinfo, so the
  // relying party can read them from the id_token alone.
  conformIdTokenClaims: false,
  features: { devInteractions: { enabled: false } }, // our own form below
  async findAccount(ctx, sub) {
    const user = users.find((u) => u.sub === sub);
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        return {
          sub,
          email: user.email,
          email_verified: true,
          given_name: user.given_name,
          family_name: user.family_name,
        };
      },
    };
  },
});

for (const event of ['server_error', 'authorization.error', 'grant.error', 'userinfo.error']) {
  provider.on(event, (ctx, err) => {
    console.error(`oidc-provider ${event}: ${err.message}${err.error_description ? ` (${err.error_description})` : ''}`);
  });
}

// ---- tamper modes: rewrite the id_token in the token endpoint's JSON body ----

async function tamperIdToken(idToken) {
  const header = decodeProtectedHeader(idToken);
  const payload = decodeJwt(idToken);
  if (tamper === 'nonce') {
    // Same real key, only the nonce differs: signature verifies, nonce check must fail.
    return new SignJWT({ ...payload, nonce: `tampered-${randomUUID()}` })
      .setProtectedHeader(header).sign(privateKey);
  }
  // "signature": same claims and header (same kid), wrong key.
  return new SignJWT(payload).setProtectedHeader(header).sign(rogueKey);
}

const tokenPath = provider.pathFor('token');
if (tamper) {
  // provider.use() puts this in front of the provider's own routes, so after
  // next() the token response body is there to rewrite.
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.path === tokenPath && ctx.status === 200 && ctx.body?.id_token) {
      ctx.body = { ...ctx.body, id_token: await tamperIdToken(ctx.body.id_token) };
    }
  });
}

// ---- interactions: a minimal login form; consent is granted automatically ----

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function loginPage(uid, { email = '', error = '' } = {}) {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in</title></head>
<body>
<h1>Sign in</h1>
${error ? `<p role="alert">${esc(error)}</p>` : ''}
<form method="post" action="/interaction/${esc(uid)}">
  <label for="email">Email</label>
  <input id="email" name="email" type="email" autocomplete="username" value="${esc(email)}" required>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
</body></html>`;
}

async function readForm(req) {
  let body = '';
  for await (const chunk of req) {
    body += chunk;
    if (body.length > 64 * 1024) throw new Error('form too large');
  }
  return new URLSearchParams(body);
}

provider.use(async (ctx, next) => {
  const m = /^\/interaction\/([^/]+)$/.exec(ctx.path);
  if (!m) return next();
  ctx.set('Cache-Control', 'no-store');

  // Throws SessionNotFound (rendered as an error page) without a valid
  // _interaction cookie for this uid.
  const { uid, prompt, params, session, grantId } = await provider.interactionDetails(ctx.req, ctx.res);
  if (uid !== m[1]) ctx.throw(400, 'interaction mismatch');

  if (prompt.name === 'consent') {
    // No consent screen: grant what the provider says is missing and resume.
    const grant = grantId
      ? await provider.Grant.find(grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const { missingOIDCScope, missingOIDCClaims } = prompt.details;
    if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
    if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
    const result = { consent: { grantId: await grant.save() } };
    ctx.status = 303;
    return ctx.redirect(await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true }));
  }
  if (prompt.name !== 'login') ctx.throw(501, `prompt ${prompt.name} not implemented`);

  if (ctx.method === 'GET') {
    ctx.type = 'html';
    ctx.body = loginPage(uid);
    return undefined;
  }
  if (ctx.method !== 'POST') ctx.throw(405);

  const form = await readForm(ctx.req);
  const email = form.get('email') || '';
  const user = users.find((u) => u.email?.toLowerCase() === email.trim().toLowerCase()
    && u.password === form.get('password'));
  if (!user) {
    ctx.status = 401;
    ctx.type = 'html';
    ctx.body = loginPage(uid, { email, error: 'Invalid email or password.' });
    return undefined;
  }
  const result = { login: { accountId: user.sub } };
  ctx.status = 303;
  return ctx.redirect(await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: false }));
});

server.on('request', provider.callback());

function shutdown() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
  setTimeout(() => process.exit(0), 2000).unref(); // never hang on shutdown
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);

console.log(`oidc-provider ready ${issuer}`);
