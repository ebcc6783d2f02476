// What every browser test step uses: the inputs (environment), steps with screenshots when
// they fail, bounded waits, axe-core checks, and watching every page for requests to another
// origin, CSP violations and script errors. run.mjs and the workspace/*.mjs steps import it.
import { AxeBuilder } from '@axe-core/playwright';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const T = Number(process.env.PORTAL_TIMEOUT_MS || 10000);

export let mock = null;
if (process.argv.includes('--mock')) {
  const { startMock } = await import('./mock_server.mjs');
  mock = await startMock({ port: 0, signUp: process.env.MOCK_SIGN_UP || 'open' });
  process.env.PORTAL_URL = mock.url;
  process.env.OWNER_INVITE_URL = mock.ownerInviteUrl;
  console.log(`# against the MOCK server at ${mock.url} (development aid, not the real API)`);
}


function need(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`${name} is not set. Usage: PORTAL_URL=http://127.0.0.1:8080 OWNER_INVITE_URL=<url> [SCREENSHOT_DIR=dir] node run.mjs   (or: node run.mjs --mock)`);
    process.exit(2);
  }
  return v;
}
export const BASE = need('PORTAL_URL').replace(/\/+$/, '');
export const ORIGIN = new URL(BASE).origin;
export const INVITE = new URL(need('OWNER_INVITE_URL'), `${BASE}/`).pathname; // followed on PORTAL_URL
export const SHOTS = path.resolve(process.env.SCREENSHOT_DIR || path.join(os.tmpdir(), 'switchboard-portal-screenshots'));
fs.mkdirSync(SHOTS, { recursive: true });

// ---------------------------------------------------------------- helpers

export const results = { passed: 0, failed: 0 };
export const problems = { foreign: new Set(), csp: [], pageErrors: [] };
export const axeNotes = [];
let shotNo = 0;
let current = null; // the page of the running step, for a screenshot when it fails
/** Names the page of the running step (its screenshot is taken when the step fails). */
export function track(page) { current = page; return page; }

export class Failure extends Error {}
export const fail = (msg) => { throw new Failure(msg); };
export const ok = (cond, msg) => { if (!cond) fail(msg); };

export async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    results.passed += 1;
    console.log(`ok - ${name} (${Date.now() - t0} ms)`);
  } catch (err) {
    results.failed += 1;
    console.log(`not ok - ${name}`);
    console.log(`  ${(err instanceof Failure ? err.message : err.stack || String(err)).split('\n').join('\n  ')}`);
    if (current && !current.isClosed()) {
      const file = path.join(SHOTS, `FAILED-${name.replace(/[^a-z0-9]+/gi, '-').toLowerCase()}.png`);
      await current.screenshot({ path: file, fullPage: true }).catch(() => {});
      const text = await current.locator('body').innerText({ timeout: 2000 }).catch(() => '');
      console.log(`  page: ${current.url()}\n  screenshot: ${file}\n  visible text: ${text.replace(/\s+/g, ' ').slice(0, 600)}`);
    }
    throw new Failure(`step failed: ${name}`);
  }
}

export async function visible(locator, what, timeout = T) {
  try {
    await locator.first().waitFor({ state: 'visible', timeout });
  } catch {
    fail(`timed out after ${timeout} ms waiting for ${what}`);
  }
  return locator.first();
}

export async function hidden(locator, what, timeout = T) {
  try {
    await locator.first().waitFor({ state: 'hidden', timeout });
  } catch {
    fail(`timed out after ${timeout} ms waiting for ${what} to go away`);
  }
}

/**
 * After a click whose request changes the person's factors or sessions: if the portal asks
 * "Confirm it is you" (the sign-in is older than the stack's re-authentication window),
 * `prove(dialog)` answers it; otherwise `done` shows. Waits at most T for one of them.
 */
export async function confirmIfAsked(page, prove, done, what) {
  const dialog = page.getByRole('dialog').filter({ has: page.getByRole('heading', { name: 'Confirm it is you' }) });
  for (const until = Date.now() + T; ;) {
    if (await dialog.isVisible()) {
      await prove(dialog);
      await hidden(dialog, 'the "Confirm it is you" dialog');
      return 'asked';
    }
    if (await done.first().isVisible()) return 'not asked';
    ok(Date.now() < until, `neither ${what} nor "Confirm it is you" within ${T} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function atPath(page, pathname, what = pathname) {
  try {
    await page.waitForURL((u) => u.pathname === pathname, { timeout: T });
  } catch {
    fail(`timed out after ${T} ms waiting to be at ${what}; the page is at ${page.url()}`);
  }
}

/** Waits for every loader of the page to finish (no aria-busy left). */
export async function settled(page) {
  try {
    await page.waitForFunction(() => !document.querySelector('[aria-busy="true"]'), null, { timeout: T });
  } catch {
    fail(`timed out after ${T} ms waiting for ${page.url()} to finish loading`);
  }
}

/**
 * A value a page appended by mistake (`append(cond && node)` appends "false"): fails on text
 * nodes that are nothing but false, true, undefined, null, NaN or [object Object] (issue 55).
 */
export async function noStrayValues(page, name) {
  const stray = await page.evaluate(() => {
    const found = [];
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = (node.nodeValue || '').trim();
      const parent = node.parentElement;
      if (!parent || parent.closest('pre, code, textarea, script, style')) continue;
      if (/^(false|true|undefined|null|NaN|\[object Object\])+$/.test(text)) found.push(`<${parent.tagName.toLowerCase()}> ${text}`);
    }
    return found;
  });
  ok(!stray.length, `stray values shown on ${name} (${page.url()}): ${stray.join(', ')}`);
}

/** axe-core (0 serious or critical violations) and a full-page screenshot. */
export async function check(page, name) {
  await settled(page);
  await page.evaluate(() => document.fonts && document.fonts.ready);
  await noStrayValues(page, name);
  const file = path.join(SHOTS, `${String(++shotNo).padStart(2, '0')}-${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  const { violations } = await new AxeBuilder({ page }).analyze();
  const severe = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
  for (const v of violations.filter((x) => !severe.includes(x))) axeNotes.push(`${name}: ${v.impact} ${v.id} (${v.nodes.length})`);
  ok(!severe.length, `axe found ${severe.length} serious/critical violations on ${name} (${page.url()}):\n${severe
    .map((v) => `  ${v.impact} ${v.id}: ${v.help}\n${v.nodes.slice(0, 5).map((n) => `    ${n.target.join(' ')}: ${n.failureSummary.replace(/\n/g, ' ')}`).join('\n')}`).join('\n')}`);
}

export function watch(context, label) {
  context.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('data:') && !u.startsWith('blob:') && new URL(u).origin !== ORIGIN) problems.foreign.add(u);
  });
  context.on('page', (p) => {
    p.on('pageerror', (e) => problems.pageErrors.push(`${label}: ${e.message}`));
    p.on('console', (m) => {
      if (/Content Security Policy|Refused to (execute|load|apply|connect|frame)/i.test(m.text())) problems.csp.push(`${label}: ${m.text()}`);
    });
  });
  return context;
}

export async function newContext(browser, label) {
  const ctx = watch(await browser.newContext({ baseURL: BASE, viewport: { width: 1280, height: 820 }, locale: 'en-US', timezoneId: 'UTC' }), label);
  ctx.setDefaultTimeout(T);
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: ORIGIN }).catch(() => {});
  return ctx;
}

export const password = () => `Sb-${crypto.randomBytes(12).toString('base64url')}-pw`;
export const rand = crypto.randomBytes(3).toString('hex');

/** The code an authenticator app shows at `seconds` (Unix time) for a base32 secret (RFC 6238). */
export function totp(secret, seconds = Date.now() / 1000) {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const c of secret.replace(/=+$/, '')) bits += alphabet.indexOf(c).toString(2).padStart(5, '0');
  const key = Buffer.from((bits.match(/.{8}/g) || []).map((b) => parseInt(b, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(seconds / 30)));
  const mac = crypto.createHmac('sha1', key).update(counter).digest();
  const at = mac[mac.length - 1] & 15;
  return String((mac.readUInt32BE(at) & 0x7fffffff) % 1e6).padStart(6, '0');
}

export async function me(key) {
  const res = await fetch(`${BASE}/v1/me`, { headers: { 'X-API-Key': key }, signal: AbortSignal.timeout(T) });
  return { status: res.status, body: await res.json().catch(() => null) };
}

export const nav = (page) => page.getByRole('navigation', { name: 'Main' });

