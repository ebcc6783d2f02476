// Browser steps of /analytics (issue 41): the figures of GET /v1/analytics/calls as tiles,
// charts and tables, the same numbers as the API; a shorter range; one agent; the agents side
// by side; a range the API refuses, said beside its field.
import { T, mock, check, ok, fail, settled, step, visible, nav, atPath, track } from '../harness.mjs';

const SENTIMENTS = { positive: 'Positive', neutral: 'Neutral', negative: 'Negative', unknown: 'Unknown' };
const REASONS = {
  customer_hangup: 'Customer hung up', agent_hangup: 'Agent hung up', transfer: 'Transferred', voicemail: 'Reached voicemail',
  no_answer: 'No answer', busy: 'Line busy', error: 'Error', other: 'Other reason',
};
const fmt = (n) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });
const digits = (s) => Number(String(s).replace(/[^\d.]/g, ''));

/** The sums of the API's days. */
function sum(days) {
  const t = { calls: 0, minutes: 0, successful: 0, unsuccessful: 0, cost: 0, sentiment: {}, disconnectionReasons: {} };
  for (const d of days) {
    for (const k of ['calls', 'minutes', 'successful', 'unsuccessful', 'cost']) t[k] += d[k];
    for (const k of Object.keys(SENTIMENTS)) t.sentiment[k] = (t.sentiment[k] || 0) + d.sentiment[k];
    for (const k of Object.keys(REASONS)) t.disconnectionReasons[k] = (t.disconnectionReasons[k] || 0) + d.disconnectionReasons[k];
  }
  return t;
}

export default async function analytics(w) {
  const page = track(w.page);
  if (mock) { console.log('# the mock server has no analytics: the analytics steps are skipped'); return; }
  const tileValue = async (label) => (await page.locator('.tile').filter({ has: page.locator('.tile-label', { hasText: label }) })
    .locator('.tile-value').innerText()).trim();
  /** The table named `caption`, as {rowName: [cells...]}. */
  const tableRows = (caption) => page.getByRole('table', { name: caption }).locator('tbody tr').evaluateAll((trs) => Object.fromEntries(
    trs.map((tr) => [tr.cells[0].textContent.trim(), [...tr.cells].slice(1).map((c) => c.textContent.trim())])));
  const get = async (query) => {
    const r = await w.api('GET', `/analytics/calls?interval=day${query}`);
    ok(r.status === 200, `GET /v1/analytics/calls${query} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`);
    return r.body.data;
  };
  /** Every figure of the page against the API's days. */
  const same = async (days) => {
    const t = sum(days);
    ok(digits(await tileValue('Calls')) === t.calls, `the Calls tile says ${await tileValue('Calls')}, the API ${t.calls}`);
    ok(digits(await tileValue('Cost')) === t.cost, `the Cost tile says ${await tileValue('Cost')}, the API ${t.cost}`);
    ok(await tileValue('Minutes') === fmt(Math.round(t.minutes * 10) / 10), `the Minutes tile says ${await tileValue('Minutes')}, the API ${t.minutes}`);
    const known = t.successful + t.unsuccessful;
    const rate = known ? `${Math.round((t.successful / known) * 100)}%` : '—';
    ok(await tileValue('Success rate') === rate, `the Success rate tile says ${await tileValue('Success rate')}, the API's figures ${rate}`);
    const sentiment = await tableRows('Calls by sentiment');
    for (const [k, label] of Object.entries(SENTIMENTS)) {
      ok(digits(sentiment[label]?.[0]) === t.sentiment[k], `the sentiment table says ${label}: ${sentiment[label]?.[0]}, the API ${t.sentiment[k]}`);
    }
    const reasons = await tableRows('Calls by how they ended');
    for (const [k, label] of Object.entries(REASONS)) {
      ok(digits(reasons[label]?.[0]) === t.disconnectionReasons[k], `the reasons table says ${label}: ${reasons[label]?.[0]}, the API ${t.disconnectionReasons[k]}`);
    }
    await page.getByText('Show the figures per day as a table').click();
    const perDay = await tableRows('Calls per day');
    ok(Object.keys(perDay).length === days.length, `the per-day table has ${Object.keys(perDay).length} rows, the API ${days.length} days`);
    for (const d of days) {
      const row = perDay[d.date];
      ok(row && digits(row[0]) === d.calls && digits(row[2]) === d.successful && digits(row[3]) === d.unsuccessful && digits(row[9]) === d.cost,
        `the row of ${d.date} reads ${JSON.stringify(row)}, the API ${JSON.stringify(d)}`);
    }
    const calls = page.locator('figure.chart').filter({ has: page.locator('.chart-title', { hasText: /^Calls$/ }) });
    ok(digits(await calls.locator('.chart-total').innerText()) === t.calls, 'the Calls chart\'s total is not the API\'s');
    ok(await calls.locator('rect.bar').count() === days.length, `the Calls chart has ${await calls.locator('rect.bar').count()} bars for ${days.length} days`);
  };

  await step('analytics: the page shows the last 30 days as GET /v1/analytics/calls counts them', async () => {
    await nav(page).getByRole('link', { name: 'Analytics' }).click();
    await atPath(page, '/analytics');
    await visible(page.getByRole('heading', { level: 1, name: 'Analytics' }), 'the Analytics heading');
    await settled(page);
    const days = await get('');
    ok(days.length === 30, `GET /v1/analytics/calls gave ${days.length} days by default, not 30`);
    ok(days.every((d) => Object.keys(d.disconnectionReasons).length === 8), 'a day lacks some of the 8 disconnection reasons');
    await same(days);
    await check(page, 'analytics');
  });

  await step('analytics: the agents side by side, each as the API counts it alone', async () => {
    const agents = ((await w.api('GET', '/agents')).body.data || []).slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
    const table = page.getByRole('table', { name: 'Calls per agent' });
    if (!agents.length) { await visible(page.getByText('No agents yet.'), 'the empty per-agent table'); return; }
    await visible(table, 'the per-agent table');
    const rows = table.locator('tbody tr[data-agent]:not([data-agent=""])');
    ok(await rows.count() === Math.min(20, agents.length), `the per-agent table has ${await rows.count()} agent rows for ${agents.length} agents`);
    // Issue 55: with a "No agent" row for the calls of none, the rows add up to the team's total.
    const team = sum(await get(''));
    const perRow = (await table.locator('tbody tr').evaluateAll((trs) => trs.map((tr) => tr.querySelector('td')?.textContent || '0')))
      .map(digits).reduce((a, b) => a + b, 0);
    if (agents.length <= 20) ok(perRow === team.calls, `the per-agent rows add up to ${perRow} calls, the team had ${team.calls}`);
    // The agents with calls, and the first one, against the API with agentId.
    const shown = agents.slice(0, 20);
    for (const a of shown.slice(0, 5)) {
      const t = sum(await get(`&agentId=${a.id}`));
      const row = table.locator(`tbody tr[data-agent="${a.id}"]`);
      const cells = await row.locator('td').allInnerTexts();
      ok(digits(cells[0]) === t.calls && digits(cells[5]) === t.cost, `the row of ${a.name} reads ${JSON.stringify(cells)}, the API ${t.calls} calls, ${t.cost} credits`);
    }
  });

  await step('analytics: one agent and a shorter range; the address holds them', async () => {
    const days = await get('');
    const busiest = days.slice().sort((a, b) => b.calls - a.calls)[0];
    const to = busiest.date;
    const from = new Date(Date.parse(`${to}T00:00:00Z`) - 6 * 864e5).toISOString().slice(0, 10);
    const agents = (await w.api('GET', '/calls?limit=100')).body.data.map((c) => c.agent).filter(Boolean);
    const agent = agents[0];
    await page.getByLabel('From').fill(from);
    await page.getByLabel('To').fill(to);
    if (agent) await page.getByLabel('Agent').selectOption(agent.id);
    await page.getByRole('button', { name: 'Show' }).click();
    try {
      await page.waitForURL((u) => u.pathname === '/analytics' && u.searchParams.get('from') === from && u.searchParams.get('to') === to
        && (!agent || u.searchParams.get('agentId') === agent.id), { timeout: T });
    } catch { fail(`the range is not in the address: ${page.url()}`); }
    await settled(page);
    const part = await get(`&from=${from}&to=${to}${agent ? `&agentId=${agent.id}` : ''}`);
    ok(part.length === 7, `the 7-day range gave ${part.length} days`);
    await same(part);
    if (agent) await visible(page.getByText(/One agent is chosen above/), 'the note that one agent is shown');
    await page.reload();
    await settled(page);
    ok(await page.getByLabel('From').inputValue() === from, 'the From field is not filled from the address');
    if (agent) ok(await page.getByLabel('Agent').inputValue() === agent.id, 'the Agent field is not filled from the address');
    await check(page, 'analytics-filtered');
  });

  await step('analytics: a range the API refuses is said beside its field', async () => {
    await page.goto('/analytics?from=2026-03-10&to=2026-03-01');
    await settled(page);
    const from = page.getByLabel('From');
    try {
      await page.waitForFunction(() => document.querySelector('input[name="from"]')?.getAttribute('aria-invalid') === 'true', null, { timeout: T });
    } catch { fail('the refused range is not marked on the From field'); }
    const errId = (await from.getAttribute('aria-describedby')).split(' ').pop();
    const msg = await page.locator(`[id="${errId}"]`).textContent();
    ok(/^From must not be after/.test(msg), `the From field's error reads "${msg}"`);
    await visible(page.getByRole('alert').filter({ hasText: 'This range cannot be shown' }), 'the alert of the refused range');
  });
}
