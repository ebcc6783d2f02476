// The time from navigation to the portal's keys table shown, signed in (the session cookie
// given), in Debian's Chromium: the median of 5 cold loads (a fresh browser context each).
// Usage: node portal_keys.mjs <portal origin> <session token>; prints milliseconds.
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(fileURLToPath(new URL('../tests/portal/package.json', import.meta.url)));
const { chromium } = require('playwright-core');
const [origin, token] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const times = [];
for (let run = 0; run < 5; run++) {
  const context = await browser.newContext();
  await context.addCookies([{ name: 'switchboard_session', value: token, url: origin }]);
  const page = await context.newPage();
  const started = Date.now();
  await page.goto(`${origin}/keys`);
  await page.locator('table').first().waitFor({ state: 'visible', timeout: 10000 });
  times.push(Date.now() - started);
  await context.close();
}
await browser.close();
times.sort((a, b) => a - b);
console.log(times[2]);
