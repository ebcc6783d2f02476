// The workspace pages (agents, knowledge, calls, chats, contacts, boards, webhooks, usage,
// analytics) and every page at a phone's and a laptop's size (layout): each
// module exports `default async function (w)` that runs its steps on the signed-in owner's page.
//   w.browser   the browser (for a second context)
//   w.page      the owner's page, signed in, acting on the owner's own (agency) team
//   w.key       a full API key of that team, made through the API with the owner's session
//   w.api(method, path, body?) → {status, body, headers} with that key (path under /v1)
//   w.seed      what `switchboard admin seed-demo` printed for that team (PORTAL_SEED, a JSON
//               file), or {} when the run has no seeded data
// PORTAL_ONLY=calls,boards runs only the named modules.
import fs from 'node:fs';
import { BASE, T, ok, step, track } from '../harness.mjs';
import agents from './agents.mjs';
import knowledge from './knowledge.mjs';
import calls from './calls.mjs';
import contacts from './contacts.mjs';
import boards from './boards.mjs';
import webhooks from './webhooks.mjs';
import usage from './usage.mjs';
import analytics from './analytics.mjs';
import layout from './layout.mjs';

const MODULES = { agents, knowledge, calls, contacts, boards, webhooks, usage, analytics, layout };

export async function api(key, method, path, body) {
  const res = await fetch(`${BASE}/v1${path}`, {
    method,
    headers: { 'X-API-Key': key, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(T),
  });
  const text = await res.text();
  let json = null;
  try { json = JSON.parse(text); } catch { json = text; }
  return { status: res.status, body: json, headers: res.headers };
}

export async function workspace({ browser, owner }) {
  const only = (process.env.PORTAL_ONLY || '').split(',').map((s) => s.trim()).filter(Boolean);
  for (const name of only) ok(name in MODULES, `PORTAL_ONLY names ${name}; the modules are ${Object.keys(MODULES).join(', ')}`);
  const seed = process.env.PORTAL_SEED ? JSON.parse(fs.readFileSync(process.env.PORTAL_SEED, 'utf8')) : {};
  let key;
  await step('an API key for the workspace steps, made with the session', async () => {
    const page = track(owner.page);
    const session = await (await page.request.get('/v1/auth/session')).json();
    const res = await page.request.post('/v1/api-keys', {
      data: { name: 'workspace steps' },
      headers: { 'X-CSRF-Token': session.data.csrfToken },
    });
    ok(res.status() === 201, `POST /v1/api-keys answered ${res.status()}: ${await res.text()}`);
    key = (await res.json()).data.key;
    ok(typeof key === 'string' && key.length > 10, 'the new key is missing from the answer');
  });
  const w = { browser, page: owner.page, key, seed, api: (method, path, body) => api(key, method, path, body) };
  for (const [name, run] of Object.entries(MODULES)) {
    if (only.length && !only.includes(name)) continue;
    track(owner.page);
    await run(w);
  }
}
