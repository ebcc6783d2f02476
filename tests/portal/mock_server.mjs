// DEVELOPMENT AID, NOT THE PRODUCT: an in-memory stand-in for the Switchboard gateway, so
// the portal can be developed and its browser tests run before the real API exists.
// It serves portal/assets as the gateway will (GET /assets/<file>; index.html for every
// other page path; the same CSP) and answers the portal's part of the API contract from
// memory. Nothing here is used by the real stack; the real tests run against `switchboard dev`.
//
//   node mock_server.mjs            # http://127.0.0.1:8080, prints an owner invitation link
//   PORT=0 MOCK_SIGN_UP=closed MOCK_LATENCY_MS=300 node mock_server.mjs
//   node run.mjs --mock             # the browser tests against a fresh mock
import http from 'node:http';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ASSETS = fileURLToPath(new URL('../../portal/assets/', import.meta.url));
export const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.css': 'text/css; charset=utf-8', '.svg': 'image/svg+xml', '.png': 'image/png', '.ico': 'image/x-icon' };
const COMMON = new Set(['password123', 'password1234', '1234567890', '12345678910', 'qwertyuiop', 'iloveyou123', 'letmein1234', 'welcome123', 'passwordpassword', 'abcdefghij']);

const now = () => new Date().toISOString();
const uuid = () => crypto.randomUUID();
const token = (n = 24) => crypto.randomBytes(n).toString('base64url');

export function createState({ signUp = process.env.MOCK_SIGN_UP || 'open' } = {}) {
  const st = {
    signUp, teams: new Map(), users: new Map(), invites: new Map(), resets: new Map(),
    sessions: new Map(), keys: new Map(), audit: [], failures: new Map(),
  };
  const agency = addTeam(st, { name: 'Northwind Agency', ownsAgency: true, credits: 1000 });
  agency.threshold = 100;
  st.ownerInvite = addInvite(st, { teamId: agency.id, email: 'owner@northwind.example', role: 'owner' });
  st.agencyId = agency.id;
  return st;
}

function addTeam(st, { name, ownsAgency = false, parentId = null, credits = 0, totalMonthlyCredits = 0 }) {
  const t = { id: uuid(), name, ownsAgency, parentId, credits, totalMonthlyCredits, createdAt: now(), threshold: null, accessConfig: { users: true, conversations: true, crm: true, knowledgebase: true, agents: true } };
  st.teams.set(t.id, t);
  return t;
}

function addInvite(st, { teamId, email, role, userId = null }) {
  const tok = token();
  const inv = { id: uuid(), token: tok, teamId, email, role, userId, used: false, expiresAt: new Date(Date.now() + 7 * 864e5).toISOString() };
  st.invites.set(tok, inv);
  return inv;
}

// As the gateway records them: the target is the id in the path, or else the id (or e-mail)
// of what the answer made.
function log(st, teamId, req, actor, action, target) {
  st.audit.unshift({ id: uuid(), teamId, action, actor, target: String(target ?? ''), ip: req.socket.remoteAddress?.replace(/^::ffff:/, '') || '', userAgent: req.headers['user-agent'] || '', createdAt: now() });
}
const personActor = (u) => ({ type: 'user', id: u.id, name: `${u.firstName} ${u.lastName}` });

// ---------------------------------------------------------------- HTTP helpers

class HttpError extends Error {
  constructor(status, code, error, extra = {}) { super(error); Object.assign(this, { status, code, extra }); }
}
const bad = (details) => new HttpError(400, 'VALIDATION_ERROR', 'Invalid request', { details });
const E = {
  unauthorized: (msg = 'Not signed in') => new HttpError(401, 'UNAUTHORIZED', msg),
  forbidden: (msg = 'Forbidden') => new HttpError(403, 'FORBIDDEN', msg),
  notFound: (msg = 'Not found') => new HttpError(404, 'NOT_FOUND', msg),
  conflict: (msg) => new HttpError(409, 'CONFLICT', msg),
};

function send(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-store', 'X-Content-Type-Options': 'nosniff', ...headers });
  res.end(text);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (c) => { data += c; if (data.length > 1e6) req.destroy(); });
    req.on('end', () => {
      if (!data) return resolve({});
      if (!(req.headers['content-type'] || '').startsWith('application/json')) return reject(new HttpError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Type must be application/json'));
      try {
        const v = JSON.parse(data);
        if (!v || typeof v !== 'object' || Array.isArray(v)) throw new Error();
        resolve(v);
      } catch { reject(new HttpError(400, 'INVALID_JSON', 'The body is not a JSON object')); }
    });
    req.on('error', reject);
  });
}

function cookies(req) {
  return Object.fromEntries((req.headers.cookie || '').split(';').map((c) => c.trim().split('=')).filter((p) => p.length === 2));
}

// ---------------------------------------------------------------- validation

function check(body, rules) {
  const details = [];
  for (const [field, rule] of Object.entries(rules)) {
    const v = body[field];
    if (v === undefined || v === null || v === '') { if (!rule.optional) details.push({ field, message: 'is required' }); continue; }
    if (rule.type === 'int') {
      if (!Number.isInteger(v) || v < rule.min || v > rule.max) details.push({ field, message: `must be an integer from ${rule.min} to ${rule.max}` });
      continue;
    }
    if (typeof v !== 'string') { details.push({ field, message: 'must be a string' }); continue; }
    if (rule.enum && !rule.enum.includes(v)) { details.push({ field, message: `must be ${rule.enum.join(' or ')}` }); continue; }
    if (!v.trim()) { details.push({ field, message: 'must not be blank' }); continue; }
    if (rule.max && [...v].length > rule.max) details.push({ field, message: `must be 1 to ${rule.max} characters` });
    if (rule.email && !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(v)) details.push({ field, message: 'must be an email address' });
    if (rule.password) {
      if ([...v].length < 10 || [...v].length > 256) details.push({ field, message: 'must be 10 to 256 characters' });
      else if (COMMON.has(v.toLowerCase())) details.push({ field, message: 'is too common: choose another password' });
    }
  }
  if (details.length) throw bad(details);
}
const NAME = { max: 50 };

// ---------------------------------------------------------------- views

const userView = (u) => ({ id: u.id, firstName: u.firstName, lastName: u.lastName, email: u.email, role: u.role, createdAt: u.createdAt });
const teamRef = (t) => ({ id: t.id, name: t.name, ownsAgency: t.ownsAgency });
const memberView = (u) => ({ ...userView(u), canSignIn: Boolean(u.password), lastSignInAt: u.lastSignInAt || null });
const keyView = (k) => ({ id: k.id, name: k.name, prefix: k.key.slice(0, 9), access: k.access, createdAt: k.createdAt, lastUsedAt: k.lastUsedAt, createdBy: k.createdBy });
const subteamView = (st, t) => ({
  id: t.id, name: t.name, createdAt: t.createdAt, totalMonthlyCredits: t.totalMonthlyCredits, credits: { balance: t.credits },
  accessConfig: t.accessConfig, users: [...st.users.values()].filter((u) => u.teamId === t.id).map(userView),
});

function startSessionFor(st, res, user) {
  const sid = token(32);
  const s = { sid, userId: user.id, csrfToken: token(), expiresAt: new Date(Date.now() + 12 * 3600e3).toISOString() };
  st.sessions.set(sid, s);
  user.lastSignInAt = now();
  res.setHeader('Set-Cookie', `sb_session=${sid}; Path=/; HttpOnly; SameSite=Lax; Max-Age=43200`);
  return sessionView(st, s);
}

function sessionView(st, s) {
  const user = st.users.get(s.userId);
  const team = st.teams.get(user.teamId);
  return { user: userView(user), team: teamRef(team), role: user.role, teams: [teamRef(team)], csrfToken: s.csrfToken, expiresAt: s.expiresAt };
}

function paginate(items, url, defLimit = 20) {
  const page = Math.max(1, Number.parseInt(url.searchParams.get('page') || '1', 10) || 1);
  const limit = Math.min(100, Math.max(1, Number.parseInt(url.searchParams.get('limit') || String(defLimit), 10) || defLimit));
  const totalCount = items.length;
  return { data: items.slice((page - 1) * limit, page * limit), pagination: { page, limit, totalCount, totalPages: Math.ceil(totalCount / limit) } };
}

// ---------------------------------------------------------------- the API

/** Who calls: {kind: 'key'|'user', team (own), user?, key?, session?}; throws 401. */
function authenticate(st, req) {
  const apiKey = req.headers['x-api-key'];
  if (apiKey) {
    const k = [...st.keys.values()].find((x) => x.key === apiKey && !x.revoked);
    if (!k) throw E.unauthorized('Invalid API key');
    if (Date.now() - (k.lastUsedMs || 0) > 60e3) { k.lastUsedAt = now(); k.lastUsedMs = Date.now(); }
    return { kind: 'key', key: k, team: st.teams.get(k.teamId), actor: { type: 'key', id: k.id, name: k.name } };
  }
  const s = st.sessions.get(cookies(req).sb_session);
  if (!s || Date.parse(s.expiresAt) < Date.now()) throw E.unauthorized(req.headers.cookie ? 'Your session has ended' : 'Missing X-API-Key header');
  const user = st.users.get(s.userId);
  if (!user) throw E.unauthorized('Your session has ended');
  return { kind: 'user', session: s, user, role: user.role, team: st.teams.get(user.teamId), actor: { type: 'user', id: user.id, name: `${user.firstName} ${user.lastName}` } };
}

function csrf(req, who) {
  if (who.kind === 'user' && req.method !== 'GET' && req.headers['x-csrf-token'] !== who.session.csrfToken) {
    throw E.forbidden('Missing or wrong X-CSRF-Token header');
  }
}

/** The team a request acts on (teamId scoping, as the gateway does it). */
function effectiveTeam(st, url, who) {
  const teamId = url.searchParams.get('teamId');
  if (!teamId || teamId === who.team.id) return who.team;
  if (!/^[0-9a-f-]{36}$/i.test(teamId)) throw bad([{ field: 'teamId', message: 'must be a UUID' }]);
  const t = st.teams.get(teamId);
  if (!who.team.ownsAgency || !t || t.parentId !== who.team.id) throw E.forbidden('This team is not one of your subteams');
  return t;
}

function requireRole(who, roles) {
  if (who.kind === 'user' && !roles.includes(who.role)) throw E.forbidden('Your role does not allow this');
}
function requireWrite(who) {
  if (who.kind === 'key' && who.key.access !== 'full') throw E.forbidden('This API key is read-only');
  if (who.kind === 'user' && who.role === 'viewer') throw E.forbidden('Viewers cannot change anything');
}

async function handleApi(st, req, res, url) {
  const p = url.pathname.replace(/\/+$/, '');
  const m = req.method;
  const body = m === 'GET' || m === 'HEAD' ? {} : await readJson(req);
  const origin = `http://${req.headers.host}`;

  // ---- auth (no teamId) ----
  if (p === '/v1/auth/options' && m === 'GET') return send(res, 200, { data: { signUp: st.signUp } });
  if (p === '/v1/auth/session' && m === 'GET') {
    const s = st.sessions.get(cookies(req).sb_session);
    if (!s || !st.users.has(s.userId)) throw E.unauthorized('Not signed in');
    return send(res, 200, { data: sessionView(st, s) });
  }
  if (p === '/v1/auth/sign-in' && m === 'POST') {
    check(body, { email: { email: true, max: 254 }, password: { max: 256 } });
    const keyName = `${req.socket.remoteAddress}|${body.email.toLowerCase()}`;
    const f = st.failures.get(keyName);
    if (f && f.count >= 5 && Date.now() - f.first < 60e3) {
      const retry = Math.ceil((60e3 - (Date.now() - f.first)) / 1000);
      throw new HttpError(429, 'RATE_LIMITED', 'Too many sign-in attempts', { retryAfter: retry, headers: { 'Retry-After': String(retry) } });
    }
    const user = [...st.users.values()].find((u) => u.email.toLowerCase() === body.email.toLowerCase());
    if (!user || !user.password || user.password !== body.password) {
      if (!f || Date.now() - f.first >= 60e3) st.failures.set(keyName, { count: 1, first: Date.now() });
      else f.count += 1;
      if (user) log(st, user.teamId, req, personActor(user), 'auth.sign_in_failed', user.email);
      throw E.unauthorized('Invalid email or password');
    }
    st.failures.delete(keyName);
    const data = startSessionFor(st, res, user);
    log(st, user.teamId, req, personActor(user), 'auth.signed_in', user.email);
    return send(res, 200, { data });
  }
  if (p === '/v1/auth/sign-out' && m === 'POST') {
    const sid = cookies(req).sb_session;
    const s = st.sessions.get(sid);
    if (s && req.headers['x-csrf-token'] !== s.csrfToken) throw E.forbidden('Missing or wrong X-CSRF-Token header');
    if (!s) throw E.unauthorized('Not signed in');
    st.sessions.delete(sid);
    const u = st.users.get(s.userId);
    if (u) log(st, u.teamId, req, personActor(u), 'auth.signed_out', u.email);
    return send(res, 200, { data: { signedOut: Boolean(s) } }, { 'Set-Cookie': 'sb_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0' });
  }
  if (p === '/v1/auth/sign-up' && m === 'POST') {
    if (st.signUp !== 'open') throw E.forbidden('Sign-up is closed on this server');
    check(body, { email: { email: true, max: 254 }, password: { password: true }, firstName: NAME, lastName: NAME, teamName: NAME });
    if ([...st.users.values()].some((u) => u.email.toLowerCase() === body.email.toLowerCase())) throw E.conflict('An account with this e-mail address exists already.');
    const team = addTeam(st, { name: body.teamName, credits: 0 });
    const user = { id: uuid(), teamId: team.id, firstName: body.firstName, lastName: body.lastName, email: body.email, role: 'owner', password: body.password, createdAt: now() };
    st.users.set(user.id, user);
    const data = startSessionFor(st, res, user);
    log(st, team.id, req, personActor(user), 'auth.signed_up', user.email);
    return send(res, 201, { data, message: 'Team created; signed in' });
  }
  if (p === '/v1/auth/accept-invite' && m === 'POST') {
    check(body, { token: { max: 200 }, password: { password: true }, firstName: NAME, lastName: NAME });
    const inv = st.invites.get(body.token);
    if (!inv || inv.used || Date.parse(inv.expiresAt) < Date.now()) throw E.notFound('Invitation not found');
    inv.used = true;
    let user = inv.userId && st.users.get(inv.userId);
    if (user) Object.assign(user, { firstName: body.firstName, lastName: body.lastName, password: body.password });
    else if ([...st.users.values()].some((u) => u.email.toLowerCase() === inv.email.toLowerCase())) {
      throw E.conflict('An account with this e-mail address exists already.');
    } else {
      user = { id: uuid(), teamId: inv.teamId, firstName: body.firstName, lastName: body.lastName, email: inv.email, role: inv.role, password: body.password, createdAt: now() };
      st.users.set(user.id, user);
    }
    const data = startSessionFor(st, res, user);
    log(st, inv.teamId, req, personActor(user), 'member.joined', user.email);
    return send(res, 201, { data, message: 'Invitation accepted; signed in' });
  }
  if (p === '/v1/auth/reset' && m === 'POST') {
    check(body, { token: { max: 200 }, password: { password: true } });
    const userId = st.resets.get(body.token);
    if (!userId) throw E.notFound('Reset link not found');
    st.resets.delete(body.token);
    const user = st.users.get(userId);
    user.password = body.password;
    for (const [sid, s] of st.sessions) if (s.userId === userId) st.sessions.delete(sid);
    log(st, user.teamId, req, personActor(user), 'auth.password_reset', user.email);
    return send(res, 200, { data: startSessionFor(st, res, user) });
  }
  if (p.startsWith('/v1/auth/')) throw E.notFound('Not found');

  // ---- everything else: authenticated, CSRF-checked, teamId-scoped ----
  const who = authenticate(st, req);
  csrf(req, who);
  const team = effectiveTeam(st, url, who);

  if (p === '/v1/me' && m === 'GET') {
    const parent = team.parentId && st.teams.get(team.parentId);
    const created = Date.parse(team.createdAt);
    const period = 30 * 864e5;
    const end = new Date(created + (Math.floor((Date.now() - created) / period) + 1) * period).toISOString();
    return send(res, 200, { data: {
      team: { id: team.id, name: team.name, createdAt: team.createdAt }, ownsAgency: team.ownsAgency, credits: { balance: team.credits },
      subscription: { plan: 'self-hosted', status: 'active', currentPeriodEnd: end },
      ...(parent ? { agencyTeam: { id: parent.id, name: parent.name } } : {}),
    } });
  }
  if (p === '/v1/credits/alert' && m === 'GET') return send(res, 200, { data: { threshold: team.threshold, balance: team.credits } });

  if (p === '/v1/api-keys') {
    if (who.kind === 'key' && who.key.access !== 'full') throw E.forbidden('Read-only keys cannot manage keys');
    requireRole(who, ['owner', 'admin']);
    if (m === 'GET') {
      const list = [...st.keys.values()].filter((k) => k.teamId === team.id && !k.revoked).sort((a, b) => b.seq - a.seq).map(keyView);
      return send(res, 200, { data: list });
    }
    if (m === 'POST') {
      check(body, { name: { max: 255 }, access: { enum: ['full', 'read-only'] } });
      if ([...st.keys.values()].filter((k) => k.teamId === team.id && !k.revoked).length >= 100) throw E.conflict('A team has at most 100 keys');
      const k = { id: uuid(), seq: st.keys.size, teamId: team.id, name: body.name, access: body.access, key: `ew_${token(32).replace(/[-_]/g, 'x').slice(0, 43)}`, createdAt: now(), lastUsedAt: null, createdBy: who.actor, revoked: false };
      st.keys.set(k.id, k);
      log(st, team.id, req, who.actor, 'api_key.created', k.id);
      return send(res, 201, { data: { ...keyView(k), key: k.key }, message: 'API key created' });
    }
  }
  const keyMatch = p.match(/^\/v1\/api-keys\/([^/]+)$/);
  if (keyMatch && m === 'DELETE') {
    requireRole(who, ['owner', 'admin']);
    const k = st.keys.get(decodeURIComponent(keyMatch[1]));
    if (!k || k.teamId !== team.id) throw E.notFound('API key not found');
    if (!k.revoked) { k.revoked = true; log(st, team.id, req, who.actor, 'api_key.revoked', k.id); }
    return send(res, 200, { data: keyView(k) });
  }

  if (p === '/v1/members' && m === 'GET') {
    requireRole(who, ['owner', 'admin']);
    return send(res, 200, { data: [...st.users.values()].filter((u) => u.teamId === team.id).map(memberView) });
  }
  if (p === '/v1/members/invitations' && m === 'POST') {
    requireRole(who, ['owner', 'admin']);
    check(body, { email: { email: true, max: 254 }, role: { enum: ['owner', 'admin', 'member', 'viewer'] } });
    if (body.role === 'owner' && who.kind === 'user' && who.role !== 'owner' && team.id === who.team.id) throw E.forbidden('Only an owner may invite an owner');
    if ([...st.users.values()].some((u) => u.email.toLowerCase() === body.email.toLowerCase())) throw E.conflict('This person is a member already, or their address signs in to another team.');
    const inv = addInvite(st, { teamId: team.id, email: body.email, role: body.role });
    log(st, team.id, req, who.actor, 'member.invited', inv.id);
    return send(res, 201, { message: 'Invitation created', data: { id: inv.id, email: inv.email, role: inv.role, url: `${origin}/invite/${inv.token}`, expiresAt: inv.expiresAt } });
  }
  const memberMatch = p.match(/^\/v1\/members\/([^/]+)$/);
  if (memberMatch && (m === 'PUT' || m === 'DELETE')) {
    requireRole(who, ['owner', 'admin']);
    const u = st.users.get(decodeURIComponent(memberMatch[1]));
    if (!u || u.teamId !== team.id) throw E.notFound('Member not found');
    const owners = [...st.users.values()].filter((x) => x.teamId === team.id && x.role === 'owner');
    const ownerOnly = u.role === 'owner' || body.role === 'owner';
    if (ownerOnly && who.kind === 'user' && who.role !== 'owner' && team.id === who.team.id) throw E.forbidden('Only an owner can make, change or remove an owner; members and viewers manage no one.');
    if (m === 'PUT') {
      check(body, { role: { enum: ['owner', 'admin', 'member', 'viewer'] } });
      if (u.role === 'owner' && body.role !== 'owner' && owners.length === 1) throw E.conflict('The team would have no owner left');
      u.role = body.role;
      log(st, team.id, req, who.actor, 'member.role_changed', u.id);
      return send(res, 200, { data: memberView(u) });
    }
    if (u.role === 'owner' && owners.length === 1) throw E.conflict('The team would have no owner left');
    st.users.delete(u.id);
    for (const [sid, s] of st.sessions) if (s.userId === u.id) st.sessions.delete(sid);
    log(st, team.id, req, who.actor, 'member.removed', u.id);
    return send(res, 200, { data: memberView(u) });
  }

  if (p === '/v1/agency/subteams') {
    if (!team.ownsAgency) throw E.forbidden('This team owns no agency');
    if (m === 'GET') {
      const list = [...st.teams.values()].filter((t) => t.parentId === team.id).sort((a, b) => b.createdAt.localeCompare(a.createdAt)).map((t) => subteamView(st, t));
      return send(res, 200, paginate(list, url));
    }
    if (m === 'POST') {
      requireRole(who, ['owner', 'admin']);
      requireWrite(who);
      if (body.totalMonthlyCredits === undefined) body.totalMonthlyCredits = 1000;
      check(body, { teamName: NAME, firstName: NAME, lastName: NAME, email: { email: true, max: 254 }, totalMonthlyCredits: { type: 'int', min: 0, max: 1e9 } });
      if (team.credits < body.totalMonthlyCredits) throw new HttpError(402, 'INSUFFICIENT_CREDITS', `The agency has ${team.credits} credits`);
      team.credits -= body.totalMonthlyCredits;
      const sub = addTeam(st, { name: body.teamName, parentId: team.id, credits: body.totalMonthlyCredits, totalMonthlyCredits: body.totalMonthlyCredits });
      const owner = { id: uuid(), teamId: sub.id, firstName: body.firstName, lastName: body.lastName, email: body.email, role: 'owner', password: null, createdAt: now() };
      st.users.set(owner.id, owner);
      const inv = addInvite(st, { teamId: sub.id, email: body.email, role: 'owner', userId: owner.id });
      log(st, team.id, req, who.actor, 'subteam.created', sub.id);
      return send(res, 201, { data: { ...subteamView(st, sub), inviteUrl: `${origin}/invite/${inv.token}` }, message: 'Subteam created successfully' });
    }
  }

  if (p === '/v1/audit-log' && m === 'GET') {
    requireRole(who, ['owner', 'admin']);
    const action = url.searchParams.get('action');
    const list = st.audit.filter((e) => e.teamId === team.id && (!action || e.action === action)).map(({ teamId, ...e }) => e);
    return send(res, 200, paginate(list, url, 50));
  }

  throw E.notFound('Not found');
}

// ---------------------------------------------------------------- the server

function serveFile(res, file) {
  const full = path.join(ASSETS, file);
  if (!full.startsWith(ASSETS) || !fs.existsSync(full) || !fs.statSync(full).isFile()) {
    res.writeHead(404, { 'Content-Type': 'text/plain' });
    return res.end('Not found');
  }
  res.writeHead(200, {
    'Content-Type': TYPES[path.extname(full)] || 'application/octet-stream',
    'Content-Security-Policy': CSP, 'X-Content-Type-Options': 'nosniff', 'Cache-Control': 'no-cache',
    'Referrer-Policy': 'same-origin',
  });
  res.end(fs.readFileSync(full));
}

export function startMock({ port = Number(process.env.PORT ?? 8080), host = '127.0.0.1', latencyMs = Number(process.env.MOCK_LATENCY_MS || 0), ...opts } = {}) {
  const st = createState(opts);
  const server = http.createServer(async (req, res) => {
    const url = new URL(req.url, `http://${req.headers.host || host}`);
    try {
      if (url.pathname.startsWith('/v1/') || url.pathname === '/v1') {
        if (latencyMs) await new Promise((r) => setTimeout(r, latencyMs));
        return await handleApi(st, req, res, url);
      }
      // Mock-only helper (not in the contract): a password reset link for an email.
      if (url.pathname === '/__mock/reset-link' && req.method === 'GET') {
        const u = [...st.users.values()].find((x) => x.email === url.searchParams.get('email'));
        if (!u) return send(res, 404, { error: 'No such user', code: 'NOT_FOUND' });
        const tok = token();
        st.resets.set(tok, u.id);
        return send(res, 200, { data: { url: `http://${req.headers.host}/reset/${tok}` } });
      }
      if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, { error: 'Method not allowed', code: 'METHOD_NOT_ALLOWED' });
      if (url.pathname.startsWith('/assets/')) return serveFile(res, decodeURIComponent(url.pathname.slice('/assets/'.length)));
      if (url.pathname === '/healthz') return send(res, 200, { status: 'ok' });
      return serveFile(res, 'index.html');
    } catch (err) {
      if (err instanceof HttpError) {
        const { headers, ...extra } = err.extra;
        return send(res, err.status, { error: err.message, code: err.code, ...extra }, headers || {});
      }
      console.error(err);
      return send(res, 500, { error: 'Internal error', code: 'INTERNAL_ERROR' });
    }
  });
  return new Promise((resolve) => {
    server.listen(port, host, () => {
      const base = `http://${host}:${server.address().port}`;
      resolve({ url: base, ownerInviteUrl: `${base}/invite/${st.ownerInvite.token}`, state: st, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(r); }) });
    });
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const m = await startMock();
  console.log('Switchboard portal MOCK server (development aid, data in memory)');
  console.log(`PORTAL_URL=${m.url}`);
  console.log(`OWNER_INVITE_URL=${m.ownerInviteUrl}`);
  console.log(`Sign-up is ${m.state.signUp}. Stop with Ctrl-C.`);
}
