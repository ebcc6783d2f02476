// @ts-check
// The API client and the portal's state: the session (its cookie is HttpOnly; we keep the
// answer of /v1/auth/session, with its CSRF token) and the team the portal acts on.
import { navigate } from './dom.js';

// ---- the API's shapes, as the pages read them (JSDoc only: `import('./api.js').Json`) ----

/**
 * An object of the API's JSON (an answer's `data`, an item of a list) whose fields a page reads
 * as it needs them: the API, not the portal, defines them (docs/openapi.json).
 * @typedef {Record<string, any>} Json
 */
/** An object of the API with its id (an item of a list). @typedef {Json & {id: string}} Item */
/**
 * A list answer read with `{full: true}`: its items and, when paged, its pagination.
 * @typedef {{data?: Item[], pagination?: Pagination, [key: string]: any}} ListAnswer
 */
/** @typedef {{page: number, totalPages: number, totalCount: number}} Pagination */
/** A contact's tag. @typedef {{id: string, name: string, color?: string | null}} Tag */
/** A field's error in an ApiError: details[]. @typedef {{field?: string, message: string, hint?: string}} ErrorDetail */
/** A team as the switcher and the scope keep it. @typedef {{id: string, name: string}} TeamRef */
/**
 * GET /v1/auth/session's Session (the fields the portal reads).
 * @typedef {object} Session
 * @property {string} [csrfToken]
 * @property {Role} role
 * @property {{id: string, firstName?: string, lastName?: string, email?: string}} user
 * @property {{id: string, name: string, ownsAgency?: boolean}} team
 * @property {boolean} [secondFactorNeeded]
 */

/**
 * The API's error answer: {error, code, hint, details[]}.
 * @typedef {{error?: string, code?: string, hint?: string, details?: ErrorDetail[], [key: string]: any}} ErrorBody
 */

/** A refused or failed request: status 0 when the server could not be reached. */
export class ApiError extends Error {
  /**
   * @param {number} status
   * @param {ErrorBody | null} body
   * @param {number} [retryAfter] seconds, from Retry-After
   */
  constructor(status, body, retryAfter) {
    super(body?.error || (status ? `The server answered ${status}.` : 'Request failed.'));
    this.status = status;
    this.code = body?.code || (status ? `HTTP_${status}` : 'NETWORK');
    this.hint = body?.hint;
    /** @type {ErrorDetail[]} */
    this.details = Array.isArray(body?.details) ? body.details : [];
    this.retryAfter = retryAfter;
    this.body = body; // the whole answer, for fields a page reads itself (e.g. nextAvailableAt)
  }
}

/**
 * The portal's state: the session (GET /v1/auth/session's Session), the agency's subteams for
 * the switcher, and a notice for the next page.
 * @type {{session: Session | null, subteams: TeamRef[] | null, notice: string | null}}
 */
export const state = {
  session: null,      // Session of the contract, or null when signed out
  subteams: null,     // the agency's subteams for the team switcher ([{id, name}]), loaded on demand
  notice: null,       // a message for the next page (e.g. "Your session has ended")
};

// ---- the team the portal acts on (agency → one of its subteams) ----

const SCOPE_KEY = 'switchboard.scope';

/**
 * {id, name} of the chosen subteam, or null for the session's own team.
 * @returns {TeamRef | null}
 */
export function scope() {
  const s = state.session;
  if (!s || !s.team?.ownsAgency || s.role === 'viewer') return null;
  try {
    const v = JSON.parse(sessionStorage.getItem(SCOPE_KEY) || 'null');
    if (v && v.userId === s.user.id && v.agencyId === s.team.id && v.id && v.id !== s.team.id) return { id: v.id, name: v.name };
  } catch { /* ignore a damaged entry */ }
  return null;
}

/** @param {TeamRef | null} team the subteam to act on; the own team or null for none */
export function setScope(team) {
  const s = state.session;
  if (!team || !s || team.id === s.team.id) sessionStorage.removeItem(SCOPE_KEY);
  else sessionStorage.setItem(SCOPE_KEY, JSON.stringify({ id: team.id, name: team.name, userId: s.user.id, agencyId: s.team.id }));
}

/**
 * The team the pages act on: {id, name, isSubteam}. Signed-in pages ask (signed out, the id and
 * name are undefined).
 * @returns {TeamRef & {isSubteam: boolean}}
 */
export function actingTeam() {
  const sc = scope();
  if (sc) return { ...sc, isSubteam: true };
  const own = /** @type {TeamRef} */ ({ id: state.session?.team.id, name: state.session?.team.name });
  return { ...own, isSubteam: false };
}

// ---- roles: what each role is offered ----

/**
 * The roles, as the API names them (its `MemberRole`), with their labels: spelled here only.
 * @typedef {'owner' | 'admin' | 'member' | 'viewer'} Role
 * @type {Array<[Role, string]>}
 */
export const ROLES = [['owner', 'Owner'], ['admin', 'Admin'], ['member', 'Member'], ['viewer', 'Viewer']];

/** @param {string | undefined} role */
export const isOwnerRole = (role) => role === 'owner';

/** Whether the signed-in person is an owner of their team. */
export const isOwner = () => isOwnerRole(state.session?.role);

/** @type {Set<string | undefined>} */
const ADMIN = new Set(['owner', 'admin']);
/**
 * Whether the session's role is offered `what`.
 * @param {'keys' | 'members' | 'audit' | 'createSubteam' | 'webhooks' | 'write' | 'subteams'} what
 */
export function can(what) {
  const role = state.session?.role;
  switch (what) {
    case 'keys': case 'members': case 'audit': case 'createSubteam': case 'webhooks': return ADMIN.has(role);
    // Creating, changing and deleting agents, knowledge, calls, chats and CRM data; a viewer reads.
    case 'write': return ADMIN.has(role) || role === 'member';
    // A viewer reads their own team: acting on the agency's clients is work for the others.
    case 'subteams': return Boolean(state.session?.team?.ownsAgency) && role !== 'viewer';
    default: return false;
  }
}

// ---- requests ----

/**
 * `path` for the team the portal acts on: with ?teamId= of the chosen subteam (a link, such as a
 * download, needs it as api() does).
 * @param {string} path
 */
export function withTeam(path) {
  const sc = scope();
  if (!sc || path.startsWith('/v1/auth/')) return path;
  return `${path}${path.includes('?') ? '&' : '?'}teamId=${encodeURIComponent(sc.id)}`;
}

const UNREACHABLE = 'Could not reach the Switchboard server. Check your connection and try again.';

/**
 * What asks the person to confirm it is them (reauth.js): resolves true once they did.
 * @type {(() => Promise<boolean>) | null}
 */
let reauthenticator = null;

/**
 * Sets what api() calls when a change answers 403 REAUTHENTICATION_REQUIRED; after it
 * resolves true, the change is sent once more.
 * @param {() => Promise<boolean>} ask
 */
export function setReauthenticator(ask) {
  reauthenticator = ask;
}

/**
 * api('GET', '/v1/me') → the answer's `data` (or the whole body with {full: true}).
 * Throws ApiError; a network failure is status 0. A 401 on a signed-in page ends the session.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body] sent as JSON
 * @param {{scoped?: boolean, full?: boolean}} [options] scoped: add ?teamId= of the chosen subteam; full: the whole answer
 * @returns {Promise<any>}
 */
export async function api(method, path, body, options = {}) {
  try {
    return await request(method, path, body, options);
  } catch (err) {
    // A change to the person's factors or sessions wants a recent sign-in: ask, then again.
    if (err instanceof ApiError && err.code === 'REAUTHENTICATION_REQUIRED' && reauthenticator && await reauthenticator()) {
      return request(method, path, body, options);
    }
    throw err;
  }
}

/**
 * One request of api(), without asking anyone anything.
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @param {{scoped?: boolean, full?: boolean}} [options]
 * @returns {Promise<any>}
 */
async function request(method, path, body, { scoped = true, full = false } = {}) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  // On every request: writes need it, and so do reads that spend credits (searches).
  if (state.session?.csrfToken) headers['X-CSRF-Token'] = state.session.csrfToken;
  let res;
  try {
    res = await fetch(scoped ? withTeam(path) : path, {
      method,
      headers,
      credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, { error: UNREACHABLE, code: 'NETWORK' });
  }
  let json = null;
  if ((res.headers.get('Content-Type') || '').includes('json')) {
    try { json = await res.json(); } catch { json = null; }
  }
  if (!res.ok) throw failure(path, res.status, json, res.headers.get('Retry-After'));
  return full ? json : json?.data;
}

/**
 * POSTs `body` as JSON like api() (X-CSRF-Token, ?teamId=, the same errors) to an operation that
 * answers server-sent events, and calls onEvent(name, data) for each as it arrives. Resolves
 * when the stream ends; throws ApiError for a refusal, and for an `error` event.
 * @param {string} path
 * @param {unknown} body
 * @param {(name: string, data: any) => void} onEvent
 * @param {AbortSignal} [signal]
 * @returns {Promise<void>}
 */
export async function postEvents(path, body, onEvent, signal) {
  /** @type {Record<string, string>} */
  const headers = { Accept: 'text/event-stream', 'Content-Type': 'application/json' };
  if (state.session?.csrfToken) headers['X-CSRF-Token'] = state.session.csrfToken;
  let res;
  try {
    res = await fetch(withTeam(path), { method: 'POST', headers, credentials: 'same-origin', body: JSON.stringify(body), signal });
  } catch (err) {
    if (signal?.aborted) throw err;
    throw new ApiError(0, { error: UNREACHABLE, code: 'NETWORK' });
  }
  if (!res.ok || !res.body) {
    /** @type {ErrorBody | null} */
    let json;
    try { json = await res.json(); } catch { json = null; }
    throw failure(path, res.status, json, res.headers.get('Retry-After'));
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let done = false;
  try {
    while (!done) {
      const chunk = await reader.read();
      done = chunk.done;
      buffer += chunk.value || '';
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        // Lines split on \n alone: a regular expression's `.` and `$` would also end a line at
        // U+2028 and U+2029, which JSON leaves unescaped in the data.
        let name = 'message';
        let data = '';
        for (const line of event.split('\n')) {
          if (line.startsWith('event: ')) name = line.slice(7);
          else if (line.startsWith('data: ')) data = line.slice(6);
        }
        const parsed = data ? JSON.parse(data) : null;
        if (name === 'error') throw new ApiError(res.status, parsed);
        onEvent(name, parsed);
      }
    }
  } finally {
    if (!done) void reader.cancel().catch(() => {});
  }
}

/**
 * The ApiError of a refused request; a 401 on a signed-in page ends the session.
 * @param {string} path
 * @param {number} status
 * @param {ErrorBody | null} json
 * @param {string | null} retryAfter
 */
function failure(path, status, json, retryAfter) {
  const retry = Number(retryAfter) || undefined;
  const err = new ApiError(status, json, retry);
  if (status === 401 && state.session && !path.startsWith('/v1/auth/')) sessionEnded();
  if (status === 413 && !json?.error) err.message = 'The file is too large.';
  if (status === 429 && !json?.error) err.message = 'Too many requests.';
  if (status === 429 && retry) err.message = `${err.message.replace(/\.$/, '')}. Try again in ${retry} seconds.`;
  if (status >= 500 && !json?.error) err.message = 'The server had a problem. Try again in a moment.';
  return err;
}

/**
 * POSTs a file as multipart/form-data (field `file`) like api() does a request (X-CSRF-Token,
 * ?teamId=, the same errors, a 401 ends the session), with XMLHttpRequest for its upload
 * progress: onProgress(fraction, or null when unknown). Aborting `signal` cancels it.
 * Resolves with the answer's `data`.
 * @param {string} path
 * @param {File} file
 * @param {{onProgress: (fraction: number | null) => void, signal: AbortSignal}} options
 * @returns {Promise<any>}
 */
export function upload(path, file, { onProgress, signal }) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', withTeam(path));
    xhr.withCredentials = true;
    xhr.setRequestHeader('Accept', 'application/json');
    if (state.session?.csrfToken) xhr.setRequestHeader('X-CSRF-Token', state.session.csrfToken);
    xhr.upload.addEventListener('progress', (e) => onProgress(e.lengthComputable ? e.loaded / e.total : null));
    xhr.addEventListener('load', () => {
      let body;
      try { body = JSON.parse(xhr.responseText); } catch { body = null; }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body?.data);
      else reject(failure(path, xhr.status, body, xhr.getResponseHeader('Retry-After')));
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, { error: UNREACHABLE, code: 'NETWORK' })));
    xhr.addEventListener('abort', () => reject(new ApiError(0, { error: 'The upload was cancelled.' })));
    signal.addEventListener('abort', () => xhr.abort(), { once: true });
    const fd = new FormData();
    fd.append('file', file, file.name);
    xhr.send(fd);
  });
}

// The team's boards, users, tags and custom fields change seldom: kept 30 s per team, so that
// moving between pages does not spend the standard rate limit (100 a minute) on them.
/** @type {Map<string, {at: number, p: Promise<any>}>} */
const memo = new Map();

/**
 * GET `path`'s data, from a cache of 30 s per team (a failure is not kept).
 * @param {string} path
 * @returns {Promise<any>}
 */
export function cachedGet(path) {
  const key = `${actingTeam().id} ${path}`;
  const hit = memo.get(key);
  if (hit && Date.now() - hit.at < 30000) return hit.p;
  const p = api('GET', path);
  memo.set(key, { at: Date.now(), p });
  p.catch(() => memo.delete(key));
  return p;
}

/**
 * Puts what another answer told of `path` into cachedGet's cache.
 * @param {string} path
 * @param {unknown} data
 */
export function primeCache(path, data) {
  memo.set(`${actingTeam().id} ${path}`, { at: Date.now(), p: Promise.resolve(data) });
}

/** Empties cachedGet's cache (after a write that changes what it holds). */
export function forgetCached() {
  memo.clear();
}

// ---- the platform's vocabularies, from the OpenAPI document the gateway serves ----

/** @type {Promise<Json> | null} */
let openApiDocument = null;

/**
 * GET /v1/openapi.json (public, the same origin), read once per page load; a failure is not
 * kept, so that the next page that needs it asks again.
 * @returns {Promise<Json>}
 */
function openApi() {
  if (!openApiDocument) {
    const p = api('GET', '/v1/openapi.json', undefined, { scoped: false, full: true });
    openApiDocument = p;
    p.catch(() => { if (openApiDocument === p) openApiDocument = null; });
  }
  return openApiDocument;
}

/**
 * The values of a string enum of the document's schemas, with one label each: the schema's
 * `x-enum-descriptions` (parallel to `enum`), else the value itself.
 * @param {string} schema a name under components.schemas
 * @returns {Promise<Array<{value: string, label: string}>>}
 */
async function vocabulary(schema) {
  const doc = await openApi();
  const s = doc?.components?.schemas?.[schema];
  /** @type {unknown[]} */
  const values = Array.isArray(s?.enum) ? s.enum : [];
  /** @type {unknown[]} */
  const labels = Array.isArray(s?.['x-enum-descriptions']) ? s['x-enum-descriptions'] : [];
  /** @type {Array<{value: string, label: string}>} */
  const out = [];
  values.forEach((value, i) => {
    const label = labels[i];
    if (typeof value === 'string') out.push({ value, label: typeof label === 'string' && label.trim() ? label : value });
  });
  return out;
}

/** The event types a webhook can hear (EventName), each with its human label. */
export const eventTypes = () => vocabulary('EventName');

/** The actions the audit log records (AuditAction), each with its human label. */
export const auditActions = () => vocabulary('AuditAction');

function sessionEnded() {
  state.session = null;
  state.subteams = null;
  state.notice = 'Your session has ended. Sign in again to continue.';
  const here = location.pathname + location.search;
  navigate(`/sign-in?next=${encodeURIComponent(here)}`, { replace: true });
}

/** Loads the session: the Session, or null when signed out. Throws on a network failure. */
export async function loadSession() {
  try {
    state.session = await api('GET', '/v1/auth/session');
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) state.session = null;
    else throw err;
  }
  return state.session;
}

/** @param {Session | null} session a Session (sign-in, sign-up, invitation answers) */
export function startSession(session) {
  const before = state.session?.user?.id;
  state.session = session;
  state.subteams = null;
  if (before !== session?.user?.id) sessionStorage.removeItem(SCOPE_KEY);
}

export async function signOut() {
  await api('POST', '/v1/auth/sign-out');
  state.session = null;
  state.subteams = null;
  sessionStorage.removeItem(SCOPE_KEY);
}

/**
 * The agency's subteams for the switcher (first 100; the Subteams page lists every one).
 * @param {boolean} [force] read them again
 * @returns {Promise<TeamRef[]>}
 */
export async function loadSubteams(force = false) {
  if (!can('subteams')) return [];
  let subteams = state.subteams;
  if (!subteams || force) {
    /** @type {Json[] | null} */
    const data = await api('GET', '/v1/agency/subteams?page=1&limit=100', undefined, { scoped: false });
    subteams = (data || []).map((t) => ({ id: t.id, name: t.name }));
    state.subteams = subteams;
  }
  return subteams;
}

/**
 * `next` of /sign-in?next=..., only when it is a path of this site.
 * @param {string | null} next
 * @returns {string}
 */
export function safeNext(next) {
  if (!next || !next.startsWith('/') || next.startsWith('//') || next.startsWith('/\\')) return '/';
  if (/^\/(sign-in|sign-up|invite\/|reset\/)/.test(next)) return '/';
  return next;
}
