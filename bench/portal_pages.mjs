// Page timings of the portal in Debian's Chromium, signed in with a session cookie: from
// navigation (page.goto, the portal's files already in the browser's cache, as for a returning
// user) to the data shown. Prints one JSON object: {scenario: {p50, p95, max, runs}}.
// Usage: node portal_pages.mjs <origin> <session token> <scenarios JSON file> [screenshot dir]
// The scenarios file: [{name, path, selector, count}] (count: how many matches mean "shown").
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const require = createRequire(fileURLToPath(new URL('../tests/portal/package.json', import.meta.url)));
const { chromium } = require('playwright-core');
const [origin, token, file, shots] = process.argv.slice(2);
const scenarios = JSON.parse(fs.readFileSync(file, 'utf8'));
const RUNS = Number(process.env.RUNS || 20);
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', args: ['--no-sandbox'] });
const context = await browser.newContext({ viewport: { width: 1280, height: 820 }, locale: 'en-US', timezoneId: 'UTC' });
await context.addCookies([{ name: 'switchboard_session', value: token, url: origin }]);
const page = await context.newPage();
await page.goto(`${origin}/`); // the files into the cache
await page.locator('main h1').waitFor({ timeout: 10000 });
const results = {};
for (const s of scenarios) {
  const times = [];
  for (let run = 0; run < RUNS; run++) {
    const started = Date.now();
    await page.goto(`${origin}${s.path}`);
    try {
      await page.locator(s.selector).nth((s.count || 1) - 1).waitFor({ state: 'visible', timeout: 10000 });
    } catch {
      throw new Error(`${s.name}: ${s.selector} (${s.count || 1}) not shown at ${s.path} within 10 s`);
    }
    times.push(Date.now() - started);
  }
  if (shots && s.screenshot) await page.screenshot({ path: `${shots}/${s.screenshot}`, fullPage: false });
  times.sort((a, b) => a - b);
  const at = (q) => times[Math.min(times.length - 1, Math.ceil(q * times.length) - 1)];
  results[s.name] = { p50: at(0.5), p95: at(0.95), max: times[times.length - 1], runs: times.length };
}
await browser.close();
console.log(JSON.stringify(results));
