// The overview's usage: credits used, calls and call minutes per day for the last 30 days as
// charts (with the figures as a table), and for an agency the same per subteam.
import { check, ok, settled, step, visible, nav, atPath } from '../harness.mjs';

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
}
