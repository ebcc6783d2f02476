// The overview's usage: credits used, calls and call minutes per day for the last 30 days as
// charts (with the figures as a table), and for an agency the same per subteam.
import { check, ok, settled, step, visible, hidden, nav, atPath, rand, newContext, password, track } from '../harness.mjs';

export default async function usage(w) {
  const { page } = w;
  await step('the overview charts the last 30 days of usage, as GET /v1/usage counts it', async () => {
    await nav(page).getByRole('link', { name: 'Overview' }).click();
    await atPath(page, '/');
    await settled(page);
    const res = await w.api('GET', '/usage');
    ok(res.status === 200, `GET /v1/usage answered ${res.status}`);
    const days = res.body.data;
    ok(days.length === 30, `GET /v1/usage gave ${days.length} days, not 30`);
    const sum = (k) => days.reduce((a, d) => a + d[k], 0);
    const credits = page.locator('figure.chart').filter({ hasText: 'Credits used' });
    await visible(credits, 'the credits chart');
    const total = (await credits.locator('.chart-total').textContent()).replace(/[^\d]/g, '');
    ok(Number(total) === sum('creditsUsed'), `the credits chart says ${total}, the API ${sum('creditsUsed')}`);
    const calls = page.locator('figure.chart').filter({ hasText: /^Calls/ });
    const callTotal = (await calls.locator('.chart-total').textContent()).replace(/[^\d]/g, '');
    ok(Number(callTotal) === sum('calls'), `the calls chart says ${callTotal}, the API ${sum('calls')}`);
    ok(await credits.locator('rect.bar').count() === 30, 'the credits chart has not 30 bars');
    await page.getByText('Show the figures as a table').click();
    const rows = page.locator('details.chart-table tbody tr');
    ok(await rows.count() === 30, `the usage table has ${await rows.count()} rows`);
    await visible(page.getByRole('heading', { name: 'Usage per subteam, last 30 days' }), 'the per-subteam usage of the agency');
    await check(page, 'overview-usage');
  });

  // Issue 40, defect 6: credits are manageable, not only visible.
  await step('the overview sets and clears the low-credit threshold; the API has it', async () => {
    await page.goto('/');
    await settled(page);
    const tile = page.locator('.tile').filter({ hasText: 'Low-credit threshold' });
    const input = await visible(page.getByLabel('Alert when the balance falls under'), 'the threshold field');
    await input.fill('120');
    await page.getByRole('button', { name: 'Save threshold' }).click();
    await visible(page.getByRole('status').filter({ hasText: 'Threshold set to 120 credits.' }), 'the saved threshold');
    await visible(tile.getByText('120', { exact: true }), 'the threshold tile showing 120');
    let alert = await w.api('GET', '/credits/alert');
    ok(alert.body.data.threshold === 120, `GET /v1/credits/alert has ${JSON.stringify(alert.body.data)}`);
    await input.fill('-5');
    await page.getByRole('button', { name: 'Save threshold' }).click();
    await visible(page.locator('.credit-alert .field-error').filter({ hasText: /./ }), 'the error beside the threshold field');
    await page.getByRole('button', { name: 'Clear threshold' }).click();
    await visible(page.getByRole('status').filter({ hasText: 'Threshold cleared' }), 'the cleared threshold');
    await visible(tile.getByText('Not set'), 'the threshold tile saying Not set');
    ok(!await page.locator('.credit-alert .field-error').filter({ hasText: /./ }).isVisible(), 'the error of the value typed before stays after clearing');
    await hidden(page.getByRole('button', { name: 'Clear threshold' }), 'the Clear button of a threshold not set');
    alert = await w.api('GET', '/credits/alert');
    ok(alert.body.data.threshold === null, `GET /v1/credits/alert still has ${JSON.stringify(alert.body.data)}`);
  });

  await step('the overview says what costs credits, as GET /v1/credits/prices prices it', async () => {
    const prices = await w.api('GET', '/credits/prices');
    ok(prices.status === 200 && prices.body.data.length > 0, `GET /v1/credits/prices answered ${prices.status}: ${JSON.stringify(prices.body)}`);
    const table = page.getByRole('table', { name: 'What costs credits' });
    await visible(table, 'the price table');
    for (const p of prices.body.data) {
      const row = table.getByRole('row').filter({ hasText: `${p.method} ${p.path}` });
      const each = `${p.credits} ${p.credits === 1 ? 'credit' : 'credits'} each`;
      await visible(row.getByText(each), `the price of ${p.operationId} (${each})`);
    }
    // No chart labels its scale "1 credits" any more.
    const ticks = await page.locator('figure.chart text').allTextContents();
    ok(!ticks.some((t) => /^1 credits$/.test(t.trim())), `a chart still says "1 credits": ${ticks.join(' | ')}`);
    await check(page, 'overview-credits');
  });

  await step('an agency tops up a subteam from its row; too many credits is said beside the amount', async () => {
    const name = `Top-up client ${rand}`;
    const made = await w.api('POST', '/agency/subteams', {
      teamName: name, totalMonthlyCredits: 0, firstName: 'Tia', lastName: 'Topup', email: `tia-${rand}@client.example`,
    });
    ok(made.status === 201, `POST /v1/agency/subteams answered ${made.status}: ${JSON.stringify(made.body)}`);
    const before = (await w.api('GET', '/me')).body.data.credits.balance;
    await page.goto('/');
    await settled(page);
    const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name, exact: true }) }).first();
    await row.getByRole('button', { name: `Top up ${name}` }).click();
    const dialog = page.getByRole('dialog', { name: `Top up ${name}` });
    await visible(dialog, 'the top-up dialog');
    const amount = dialog.getByLabel('Credits to move from the agency');
    await amount.fill(String(before + 1));
    await dialog.getByRole('button', { name: 'Move credits' }).click();
    await visible(dialog.locator('.field-error').filter({ hasText: /insufficient|credits/i }), 'the refusal beside the amount');
    await amount.fill('7');
    await dialog.getByRole('button', { name: 'Move credits' }).click();
    await hidden(dialog, 'the top-up dialog');
    await visible(row.getByRole('cell', { name: '7', exact: true }), "the subteam's new balance in its row");
    await visible(page.getByText(`${name} now has 7 credits; the agency has ${(before - 7).toLocaleString()} credits left.`),
      'the new balances under the table');
    const after = (await w.api('GET', '/me')).body.data.credits.balance;
    ok(after === before - 7, `the agency had ${before} credits and has ${after} after moving 7`);
    await check(page, 'overview-top-up');
  });

  await step('a viewer reads the threshold and the prices but is offered no change; they rename themselves', async () => {
    await w.api('PUT', '/credits/alert', { threshold: 40 });
    const inv = await w.api('POST', '/members/invitations', { email: `usage-viewer-${rand}@portal-dev.example`, role: 'viewer' });
    ok(inv.status === 201, `POST /v1/members/invitations answered ${inv.status}: ${JSON.stringify(inv.body)}`);
    const ctx = await newContext(w.browser, 'usage-viewer');
    try {
      const vp = track(await ctx.newPage());
      const token = decodeURIComponent(new URL(inv.body.data.url).pathname.split('/').pop());
      const res = await vp.request.post('/v1/auth/accept-invite', { data: { token, password: password(), firstName: 'Vera', lastName: 'Viewer' } });
      ok(res.ok(), `accepting the viewer invitation answered ${res.status()}: ${await res.text()}`);
      await vp.goto('/');
      await settled(vp);
      await visible(vp.getByText('The threshold is 40 credits.'), 'the threshold, read-only, for a viewer');
      ok(await vp.getByLabel('Alert when the balance falls under').count() === 0, 'a viewer is offered the threshold field');
      ok(await vp.getByRole('button', { name: /Top up/ }).count() === 0, 'a viewer is offered Top up');
      await visible(vp.getByRole('table', { name: 'What costs credits' }), 'the prices, for a viewer');
      await vp.getByRole('banner').getByRole('link', { name: 'Vera Viewer' }).click();
      await atPath(vp, '/settings/profile');
      await vp.getByLabel('Last name').fill('Reader');
      await vp.getByRole('button', { name: 'Save name' }).click();
      await visible(vp.getByRole('banner').getByText('Vera Reader'), "the viewer's new name in the header");
    } finally {
      track(page);
      await ctx.close();
    }
    await w.api('PUT', '/credits/alert', { threshold: null });
  });
}
