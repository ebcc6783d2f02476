#!/usr/bin/env node
// Single sign-on in a real browser: Playwright drives Debian's Chromium through the portal's
// "Sign in with single sign-on", a real OpenID provider's login form (tests/sso/provider.mjs)
// and back. tests/api/sso.rs starts the platform and the providers and checks the API after.
//
// Inputs (environment):
//   PORTAL_URL       the gateway
//   SSO_CASES        JSON [{name, email, login, password, expect: "signed-in" | "refused" | "not-covered",
//                    text}] (login: the account at the provider; text: what the page must show),
//                    or, for a person signed in with their portal password (portalPassword) at
//                    /settings/security: {expect: "proven", domain} clicks the domain's "Check now";
//                    {expect: "linked"} clicks "Link single sign-on" and signs in at the provider
//   SCREENSHOT_DIR   where the pages go
// The last line is "N passed, N failed"; exit status 0 when every case passed.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const BASE = process.env.PORTAL_URL.replace(/\/+$/, '');
const CASES = JSON.parse(process.env.SSO_CASES || '[]');
const SHOTS = process.env.SCREENSHOT_DIR || '/tmp/switchboard-sso-screenshots';
const T = 10000;
fs.mkdirSync(SHOTS, { recursive: true });

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update'],
});
let passed = 0;
let failed = 0;
for (const c of CASES) {
  const context = await browser.newContext({ baseURL: BASE });
  const page = await context.newPage();
  page.setDefaultTimeout(T);
  try {
    if (c.expect === 'proven' || c.expect === 'linked') {
      await securityPage(page, c);
      await page.screenshot({ path: path.join(SHOTS, `sso-${c.name}.png`), fullPage: true });
      console.log(`ok - ${c.name}`);
      passed += 1;
      await context.close();
      continue;
    }
    await page.goto('/sign-in');
    await page.getByRole('link', { name: 'Sign in with single sign-on' }).click();
    await page.waitForURL('**/sign-in/sso', { timeout: T });
    await page.getByLabel('Email').fill(c.email);
    await page.getByRole('button', { name: 'Continue' }).click();
    if (c.expect === 'not-covered') {
      await page.getByText(c.text).waitFor({ timeout: T });
    } else {
      // The provider's own login form, on its own origin.
      await page.waitForURL((url) => !url.href.startsWith(BASE), { timeout: T });
      await page.screenshot({ path: path.join(SHOTS, `sso-${c.name}-provider.png`) });
      await page.getByLabel('Email').fill(c.login);
      await page.getByLabel('Password').fill(c.password);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL((url) => url.href.startsWith(BASE), { timeout: T });
      if (c.expect === 'signed-in') {
        await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: T });
        await page.getByRole('banner').getByText(c.text).waitFor({ timeout: T });
        const session = await (await page.request.get('/v1/auth/session')).json();
        if (session.data?.user?.email !== c.login.toLowerCase()) throw new Error(`signed in as ${session.data?.user?.email}`);
      } else {
        await page.getByText(c.text).waitFor({ timeout: T });
        const session = await page.request.get('/v1/auth/session');
        if (session.status() !== 401) throw new Error(`a refused sign-in left a session (${session.status()})`);
      }
    }
    await page.screenshot({ path: path.join(SHOTS, `sso-${c.name}.png`) });
    console.log(`ok - ${c.name}`);
    passed += 1;
  } catch (err) {
    await page.screenshot({ path: path.join(SHOTS, `FAILED-sso-${c.name}.png`) }).catch(() => {});
    console.log(`not ok - ${c.name}\n  ${String(err.message).split('\n')[0]}\n  page: ${page.url()}\n  text: ${(await page.locator('body').innerText().catch(() => '')).slice(0, 600).replace(/\s+/g, ' ')}`);
    failed += 1;
  }
  await context.close();
}
await browser.close();
console.log(`${passed} passed, ${failed} failed`);

/** Signed in with a password, the person's /settings/security: a domain proven, or single sign-on linked. */
async function securityPage(page, c) {
  await page.goto('/sign-in');
  await page.getByLabel('Email').fill(c.email);
  await page.getByLabel('Password').fill(c.portalPassword);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.getByRole('heading', { level: 1, name: 'Overview' }).waitFor({ timeout: T });
  await page.goto('/settings/security');
  if (c.expect === 'proven') {
    // What to publish is shown as text to copy; "Check now" proves it.
    const name = await page.getByLabel(`TXT record name for ${c.domain}`).inputValue();
    if (name !== `_switchboard-verification.${c.domain}`) throw new Error(`the TXT record's name is ${name}`);
    await page.screenshot({ path: path.join(SHOTS, `sso-${c.name}-before.png`), fullPage: true });
    await page.getByRole('button', { name: `Check now whether ${c.domain} is proven` }).click();
    await page.getByRole('heading', { level: 3, name: `${c.domain} Proven` }).waitFor({ timeout: T });
    return;
  }
  await page.getByRole('button', { name: 'Link single sign-on' }).click();
  await page.waitForURL((url) => !url.href.startsWith(BASE), { timeout: T });
  await page.getByLabel('Email').fill(c.login);
  await page.getByLabel('Password').fill(c.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${BASE}/settings/security`, { timeout: T });
  await page.getByText('You can sign in with single sign-on').waitFor({ timeout: T });
}
process.exit(failed === 0 && passed === CASES.length ? 0 : 1);
