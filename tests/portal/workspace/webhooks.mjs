// Browser steps of the webhooks pages: /webhooks (create one in the UI, its secret shown once;
// a failing one marked) and /webhooks/{id} (test, deliveries, edit, retry, delete), against two
// local receivers (node:http on 127.0.0.1, port 0): one answering 200, one answering 500.
import crypto from 'node:crypto';
import http from 'node:http';
import { T, step, visible, hidden, atPath, check, ok, fail, rand, track } from '../harness.mjs';

const IMG = '<img src=x onerror=window.__xss=1>';
const SCRIPT = '<script>window.__xss=1</script>';

async function receiver(status, body) {
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status, { 'Content-Type': 'text/plain' });
      res.end(body);
    });
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const close = () => new Promise((resolve) => { server.closeAllConnections?.(); server.close(() => resolve()); });
  return { url: `http://127.0.0.1:${server.address().port}/hook`, got, close };
}

async function until(fn, what) {
  const end = Date.now() + T;
  while (Date.now() < end) {
    const v = await fn();
    if (v) return v;
    await new Promise((r) => setTimeout(r, 200)); // the next poll
  }
  return fail(`timed out after ${T} ms waiting for ${what}`);
}

/** Standard Webhooks: v1 = base64(HMAC-SHA256(key, `${id}.${timestamp}.${body}`)), key = base64 after whsec_. */
function signed(req, secret) {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expect = crypto.createHmac('sha256', key)
    .update(`${req.headers['webhook-id']}.${req.headers['webhook-timestamp']}.${req.body}`).digest('base64');
  return String(req.headers['webhook-signature'] || '').split(' ').some((s) => s === `v1,${expect}`);
}

export default async function webhooks(w) {
  const page = track(w.page);
  const good = await receiver(200, 'ok');
  const bad = await receiver(500, `${IMG} receiver broke`);
  const made = [];
  try {
    const description = `Orders ${rand} ${IMG} ${SCRIPT}`;
    let hook;
    let secret;

    await step('webhooks: create one in the UI; its secret is shown once', async () => {
      await page.goto('/webhooks');
      await visible(page.getByRole('button', { name: 'Create webhook' }), 'the create form');
      await check(page, 'webhooks');
      // no event chosen: the error beside the checkboxes
      await page.getByLabel('URL').fill(good.url);
      await page.getByRole('button', { name: 'Create webhook' }).click();
      await visible(page.getByText('Choose at least one event.').first(), 'the "choose an event" error');
      await page.getByLabel(/^call\.ended/).check();
      await page.getByLabel(/^contact\.created/).check();
      await page.getByLabel('Description (optional)').fill(description);
      await page.getByRole('button', { name: 'Create webhook' }).click();
      const box = await visible(page.getByLabel('Signing secret'), 'the signing secret');
      secret = await box.inputValue();
      ok(/^whsec_[A-Za-z0-9+/=]+$/.test(secret), `the secret shown is ${secret}`);
      await visible(page.getByRole('button', { name: 'Copy' }), 'the Copy button');
      const list = (await w.api('GET', '/webhooks')).body.data;
      hook = list.find((x) => x.url === good.url);
      ok(hook, 'the new webhook is missing from GET /webhooks');
      made.push(hook.id);
      ok(hook.description === description, `its description is ${hook.description}`);
      ok(JSON.stringify([...hook.events].sort()) === JSON.stringify(['call.ended', 'contact.created']), `its events are ${hook.events}`);
      ok(!JSON.stringify(list).includes(secret), 'GET /webhooks shows the secret again');
      await visible(page.getByRole('row').filter({ hasText: good.url }).getByText(description), 'the hostile description, as text');
      await check(page, 'webhook-created');
      await page.getByRole('link', { name: 'Open the webhook' }).click();
      await atPath(page, `/webhooks/${hook.id}`);
      await visible(page.getByRole('button', { name: 'Send a test event' }), 'the webhook page');
      ok(!(await page.locator('main').innerText()).includes(secret), 'the webhook page shows the secret again');
    });

    await step('webhooks: a test event is delivered (200, signed with the secret)', async () => {
      await page.getByRole('button', { name: 'Send a test event' }).click();
      const row = page.locator('tr[data-delivery]').filter({ hasText: 'webhook.test' }).filter({ hasText: 'Delivered' });
      await visible(row, 'the delivered test event in the deliveries (the page polls)', 2 * T);
      ok((await row.first().locator('.wh-code').innerText()).trim() === '200', 'the delivery should show the status 200');
      const req = await until(() => good.got.find((r) => r.body.includes('webhook.test')), 'the receiver to get the test event');
      ok(signed(req, secret), `the test event's webhook-signature does not verify with the secret shown: ${req.headers['webhook-signature']}`);
      ok(await row.first().getByRole('button', { name: /^Retry/ }).count() === 0, 'a delivered delivery offers Retry');
      // Issue 55: a delivered one shows its payload, as the receiver got it, and is sent again
      // on demand.
      await row.first().getByRole('button', { name: /^Payload of/ }).click();
      const dlg = page.getByRole('dialog');
      const shown = JSON.parse(await dlg.locator('pre').innerText());
      ok(shown.type === 'webhook.test' && JSON.stringify(shown) === JSON.stringify(JSON.parse(req.body)),
        `the payload shown is not what the receiver got: ${JSON.stringify(shown)} vs ${req.body}`);
      await check(page, 'webhook-payload');
      await dlg.getByRole('button', { name: 'Close' }).click();
      await hidden(dlg, 'the payload dialog');
      const before = good.got.filter((r) => r.body.includes('webhook.test')).length;
      await row.first().getByRole('button', { name: /^Send again/ }).click();
      await visible(page.getByText('Delivery queued again'), 'the send-again confirmation');
      await until(() => good.got.filter((r) => r.body.includes('webhook.test')).length > before, 'the receiver to get the test event again');
      await check(page, 'webhook');
    });

    await step('webhooks: edit the events and the description', async () => {
      await page.getByLabel(/^contact\.created/).uncheck();
      await page.getByLabel(/^chat\.ended/).check();
      await page.getByLabel('Description (optional)').fill(`Edited ${rand} ${SCRIPT}`);
      await page.getByRole('button', { name: 'Save changes' }).click();
      await until(async () => {
        const r = (await w.api('GET', `/webhooks/${hook.id}`)).body.data;
        return r.description === `Edited ${rand} ${SCRIPT}` && JSON.stringify([...r.events].sort()) === JSON.stringify(['call.ended', 'chat.ended']);
      }, 'the edited webhook in the API');
      await visible(page.getByLabel(/^chat\.ended/).and(page.locator(':checked')), 'chat.ended checked after the save');
    });

    await step('webhooks: the switch pauses a webhook: an event is held, not sent; switching it on sends it', async () => {
      const r = await w.api('POST', '/webhooks', { url: good.url, events: ['contact.created'], description: `Pausable ${rand}` });
      ok(r.status === 201 && r.body.data.enabled === true, `POST /webhooks answered ${r.status}: ${JSON.stringify(r.body)}`);
      const id = r.body.data.id;
      made.push(id);
      await page.goto(`/webhooks/${id}`);
      const toggle = page.getByRole('switch', { name: 'Send events to this endpoint' });
      await visible(toggle, 'the on/off switch');
      ok(await toggle.isChecked(), 'a new webhook should be switched on');
      ok(!(await page.locator('main').innerText()).includes('The API has no switch'), 'the developer talk is still there');
      await toggle.click();
      await visible(page.getByText(/^Paused: new events are held/), 'the paused explanation');
      await until(async () => (await w.api('GET', `/webhooks/${id}`)).body.data.enabled === false, 'the webhook to be disabled in the API');
      ok(await page.getByRole('switch', { name: 'Send events to this endpoint' }).isChecked() === false, 'the switch should be off');
      ok(await page.getByRole('button', { name: 'Send a test event' }).isDisabled(), 'a paused webhook offers a test event');
      const number = `+1415555${String(Math.floor(Math.random() * 10000)).padStart(4, '0')}`;
      const contact = await w.api('POST', '/contacts', { number, firstName: `Held ${rand}` });
      ok(contact.status === 201, `POST /contacts answered ${contact.status}: ${JSON.stringify(contact.body)}`);
      const sent = () => good.got.filter((g) => g.body.includes('contact.created') && g.body.includes(number));
      try {
        const held = page.locator('tr[data-delivery]').filter({ hasText: 'contact.created' }).filter({ hasText: 'Held' });
        await until(async () => {
          await page.getByRole('button', { name: 'Refresh' }).click();
          return (await held.count()) > 0;
        }, 'the held delivery in the list');
        ok(await held.first().getByRole('button', { name: /^Retry/ }).count() === 0, 'a held delivery offers Retry');
        ok(sent().length === 0, 'a paused webhook was sent the event');
        await page.goto('/webhooks');
        await visible(page.getByRole('row').filter({ hasText: `Pausable ${rand}` }).getByText('Paused'), 'the Paused badge in the list');
        await check(page, 'webhooks-paused');
        await page.goto(`/webhooks/${id}`);
        await page.getByRole('switch', { name: 'Send events to this endpoint' }).click();
        await visible(page.getByText(/^On: events are sent/), 'the switched-on explanation');
        await until(() => sent().length > 0, 'the held event to reach the receiver once switched on');
        const delivered = page.locator('tr[data-delivery]').filter({ hasText: 'contact.created' }).filter({ hasText: 'Delivered' });
        await until(async () => {
          await page.getByRole('button', { name: 'Refresh' }).click();
          return (await delivered.count()) > 0;
        }, 'the held delivery to show as delivered');
        ok(await delivered.first().getByRole('button', { name: /^Retry/ }).count() === 0, 'a delivered delivery offers Retry');
        await check(page, 'webhook-switched-on');
      } finally {
        await w.api('DELETE', `/contacts/${contact.body.data.id}`).catch(() => {});
      }
    });

    await step('webhooks: a receiver answering 500 shows failing deliveries; retry sends again', async () => {
      const r = await w.api('POST', '/webhooks', { url: bad.url, events: ['call.ended'], description: `Broken ${rand} ${IMG}` });
      ok(r.status === 201, `POST /webhooks answered ${r.status}: ${JSON.stringify(r.body)}`);
      made.push(r.body.data.id);
      await page.goto(`/webhooks/${r.body.data.id}`);
      await page.getByRole('button', { name: 'Send a test event' }).click();
      const row = page.locator('tr[data-delivery]').filter({ hasText: 'webhook.test' }).filter({ hasText: 'Retrying' });
      await visible(row, 'the failing test delivery (Retrying)', 2 * T);
      await visible(row.getByText(`${IMG} receiver broke`), 'the receiver\'s answer as the error, as text');
      ok((await row.first().locator('.wh-code').innerText()).trim() === '500', 'the delivery should show the status 500');
      await visible(page.getByRole('alert').filter({ hasText: 'This webhook is failing' }), 'the failing alert at the top');
      const before = bad.got.length;
      await row.first().getByRole('button', { name: /^Retry/ }).click();
      await visible(page.getByText('Delivery queued again'), 'the retry confirmation');
      await until(() => bad.got.length > before, 'the receiver to get the retried delivery');
      await check(page, 'webhook-failing');
      await page.goto('/webhooks');
      const listRow = page.getByRole('row').filter({ hasText: bad.url });
      await visible(listRow.getByText('Deliveries failing'), 'the failing badge in the list');
      await visible(listRow.getByText(/HTTP 500/), 'the failing delivery text in the list');
      await check(page, 'webhooks-failing');
    });

    await step('webhooks: delete one with confirmation', async () => {
      await page.goto(`/webhooks/${hook.id}`);
      await page.getByRole('button', { name: 'Delete webhook' }).click();
      const dlg = page.getByRole('dialog');
      await visible(dlg, 'the confirmation dialog');
      await dlg.getByRole('button', { name: 'Delete webhook' }).click();
      await atPath(page, '/webhooks');
      ok((await w.api('GET', `/webhooks/${hook.id}`)).status === 404, 'the deleted webhook is still there');
      made.splice(made.indexOf(hook.id), 1);
      ok(await page.evaluate(() => window.__xss) === undefined, 'a hostile string ran as script');
    });
  } finally {
    for (const id of made) await w.api('DELETE', `/webhooks/${id}`).catch(() => {});
    await good.close();
    await bad.close();
  }
}
