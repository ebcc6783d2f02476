// Browser steps of the contacts pages: the list with its filters in the address, a contact
// edited in place (an API error beside its field), notes with hostile text, the CSV import with
// failed rows, and the Tags and Custom fields settings.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { T, ok, fail, step, visible, hidden, atPath, settled, check, rand, track } from '../harness.mjs';

const XSS_IMG = '<img src=x onerror=window.__xss=1>';
const XSS_SCRIPT = '<script>window.__xss=1</script>';

// A US number nobody has used yet (not 555: a new exchange per run, so reruns do not collide).
const freshNumber = () => `+1415${2 + crypto.randomInt(8)}${String(crypto.randomInt(1000000)).padStart(6, '0')}`;

async function apiOk(w, method, path, body, status = [200, 201]) {
  const res = await w.api(method, path, body);
  ok([].concat(status).includes(res.status), `${method} ${path} answered ${res.status}: ${JSON.stringify(res.body).slice(0, 400)}`);
  return res.body;
}

/** The text of the error beside a control (its aria-describedby's last id). */
async function errorBeside(page, control, what) {
  await visible(control.and(page.locator('[aria-invalid="true"]')), `${what} marked invalid`);
  const errId = (await control.getAttribute('aria-describedby')).split(' ').pop();
  const text = (await (await visible(page.locator(`[id="${errId}"]`), `the error beside ${what}`)).textContent()).trim();
  ok(text.length > 0, `the error beside ${what} is empty`);
  return text;
}

// In-app navigation (the router's popstate), as a link would: no reload, so the page does not
// spend the team's standard rate limit (100 a minute) on the session and the shell again.
async function go(page, path) {
  await page.evaluate((p) => { history.pushState(null, '', p); dispatchEvent(new PopStateEvent('popstate')); }, path);
  await atPath(page, path.split('?')[0]);
}

export default async function contacts(w) {
  const page = track(w.page);
  const tags = (await apiOk(w, 'GET', '/tags')).data;
  const vip = tags.find((t) => t.name === 'VIP') || tags[0];
  let contactId;
  const first = `Zed${rand}`;

  await step('contacts: search and filter by tag, the filters in the address', async () => {
    ok(vip, 'the team has no tag to filter by (seed-demo makes some)');
    const made = await apiOk(w, 'POST', '/contacts', {
      number: freshNumber(), firstName: first, lastName: XSS_IMG, email: `zed.${rand}@example.com`, tagIds: [vip.id], note: XSS_SCRIPT,
    });
    contactId = made.data.id;
    await page.goto('/contacts');
    await visible(page.getByRole('heading', { level: 1, name: 'Contacts' }), 'the Contacts heading');
    await settled(page);
    await check(page, 'contacts');
    const search = page.getByRole('search', { name: 'Filter contacts' });
    await search.getByLabel('Tag', { exact: true }).selectOption(vip.id);
    await search.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL((u) => u.searchParams.get('tagIds') === vip.id, { timeout: T });
    await settled(page);
    const rows = page.getByRole('region', { name: 'Contacts' }).locator('tbody tr');
    const n = await rows.count();
    ok(n > 0, `no rows with the tag ${vip.name}`);
    for (let i = 0; i < n; i++) {
      const tagText = await rows.nth(i).locator('td').nth(2).innerText();
      ok(tagText.includes(vip.name), `row ${i + 1} lacks the tag ${vip.name}: ${tagText}`);
    }
    const expected = (await apiOk(w, 'GET', `/contacts?tagIds=${vip.id}&limit=25`)).data.length;
    ok(n === expected, `${n} rows shown, the API has ${expected} on the first page`);
    await check(page, 'contacts-tag');
    await search.getByLabel('Search', { exact: true }).fill(first);
    await search.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL((u) => u.searchParams.get('search') === first && u.searchParams.get('tagIds') === vip.id, { timeout: T });
    await settled(page);
    ok(await rows.count() === 1, `searching ${first} with the tag shows ${await rows.count()} rows, not 1`);
    const link = rows.first().getByRole('link');
    ok((await link.innerText()).includes(`${first} ${XSS_IMG}`), `the row shows ${await link.innerText()}, not the hostile last name as text`);
    // The address holds the filters: a reload shows the same view, the filters filled in.
    await page.reload();
    await settled(page);
    ok(await rows.count() === 1, 'after a reload the filtered view changed');
    ok(await page.getByRole('search', { name: 'Filter contacts' }).getByLabel('Search', { exact: true }).inputValue() === first, 'the search box lost its value after a reload');
    await check(page, 'contacts-search');
    await link.click();
    await atPath(page, `/contacts/${contactId}`);
  });

  await step('contacts: a new contact from the list; a number in use is refused beside its field', async () => {
    await go(page, '/contacts');
    await settled(page);
    await page.getByText('New contact', { exact: true }).click();
    const taken = (await apiOk(w, 'GET', `/contacts/${contactId}`)).data.number;
    await page.getByLabel('First name').fill(`New${rand}`);
    await page.getByLabel('Last name').fill(XSS_SCRIPT);
    await page.getByLabel('Phone number').fill(taken);
    await page.getByRole('button', { name: 'Create contact' }).click();
    await errorBeside(page, page.getByLabel('Phone number'), 'the phone number (already used)');
    await visible(page.getByRole('alert').getByRole('link', { name: 'Open that contact' }), 'the link to the contact that has the number');
    await check(page, 'contacts-new-taken');
    await page.getByLabel('Phone number').fill(freshNumber());
    await page.getByRole('button', { name: 'Create contact' }).click();
    await page.waitForURL((u) => /^\/contacts\/[0-9a-f-]{36}$/.test(u.pathname), { timeout: T });
    const id = new URL(page.url()).pathname.split('/').pop();
    await settled(page);
    await visible(page.locator('.contact-name').getByText(`New${rand} ${XSS_SCRIPT}`, { exact: true }), 'the new contact, its hostile name as text');
    await apiOk(w, 'DELETE', `/contacts/${id}`);
    await go(page, `/contacts/${contactId}`);
  });

  await step('contacts: a contact edited in place, the API error beside its field', async () => {
    await visible(page.getByRole('heading', { level: 1, name: 'Contact' }), 'the Contact heading');
    await settled(page);
    await visible(page.locator('.contact-name').getByText(`${first} ${XSS_IMG}`, { exact: true }), 'the hostile name as text');
    await check(page, 'contact');
    const number = page.getByLabel('Phone number', { exact: true });
    await number.fill('12');
    await page.getByRole('button', { name: 'Save changes' }).click();
    const msg = await errorBeside(page, number, 'the phone number field');
    ok(/phone/i.test(msg), `the error beside the number does not speak of a phone number: ${msg}`);
    await check(page, 'contact-invalid-number');
    const next = freshNumber();
    await number.fill(next);
    await page.getByLabel('Carrier').fill(`Carrier ${XSS_SCRIPT}`);
    await page.getByRole('button', { name: 'Save changes' }).click();
    await visible(page.getByRole('status').filter({ hasText: 'Contact saved' }), 'the "Contact saved" message');
    ok(await number.getAttribute('aria-invalid') === null, 'the number field stays marked invalid after saving');
    const c = (await apiOk(w, 'GET', `/contacts/${contactId}`)).data;
    ok(c.number === next && c.carrier === `Carrier ${XSS_SCRIPT}`, `the API has ${c.number} / ${c.carrier} after saving ${next}`);
  });

  await step('contacts: a note with hostile text is shown as text, then deleted', async () => {
    const text = `Called back ${rand}: ${XSS_IMG} ${XSS_SCRIPT}`;
    await page.getByLabel('New note').fill(text);
    await page.getByLabel('Kind').selectOption('warning');
    await page.getByRole('button', { name: 'Add note' }).click();
    const note = page.locator('.note').filter({ hasText: `Called back ${rand}` });
    await visible(note, 'the new note');
    ok((await note.locator('.note-text').innerText()) === text, 'the note is not shown as the text it holds');
    ok(await page.locator('.note img, .note script').count() === 0, 'the note made elements of its text');
    // The note given at creation is there too, as text.
    await visible(page.locator('.note-text').getByText(XSS_SCRIPT, { exact: true }), 'the first note (given at creation) as text');
    await check(page, 'contact-note');
    await note.getByRole('button', { name: 'Delete this note' }).click();
    const dlg = await visible(page.getByRole('dialog'), 'the confirmation dialog');
    await dlg.getByRole('button', { name: 'Delete note' }).click();
    await hidden(note, 'the deleted note');
    const notes = (await apiOk(w, 'GET', `/contacts/${contactId}/notes`)).data;
    ok(!notes.some((n) => n.note === text), 'the API still has the deleted note');
  });

  await step('contacts: import a CSV with two bad rows', async () => {
    const good = [freshNumber(), freshNumber(), freshNumber(), freshNumber()];
    const csv = [
      'First name,Last name,Phone,Email,Tags',
      `"Imp${rand}","Quote ""Q"" ${XSS_IMG}",${good[0]},imp1.${rand}@example.com,"Lead, VIP"`,
      `Imp${rand},"Multi\r\nline, with comma",${good[1]},,`,
      `Imp${rand},${XSS_SCRIPT},not-a-phone,,`,
      `Imp${rand},Nonumber,,imp4.${rand}@example.com,`,
      `Imp${rand},Four,${good[2]},imp5.${rand}@example.com,Customer`,
      `Imp${rand},Five,${good[3]},,`,
    ].join('\r\n');
    await go(page, '/contacts/import');
    await visible(page.getByRole('heading', { level: 1, name: 'Import contacts' }), 'the import heading');
    await check(page, 'import');
    await page.getByLabel('CSV file').setInputFiles({ name: `contacts-${rand}.csv`, mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await visible(page.getByRole('button', { name: 'Import 6 contacts' }), 'the Import 6 contacts button');
    const map = (i, name) => page.getByLabel(`Column ${i} “${name}” maps to`);
    ok(await map(1, 'First name').inputValue() === 'firstName', 'First name is not guessed');
    ok(await map(3, 'Phone').inputValue() === 'number', 'Phone is not guessed as the number');
    ok(await map(5, 'Tags').inputValue() === 'tagNames', 'Tags is not guessed');
    await visible(page.getByRole('cell', { name: `Quote "Q" ${XSS_IMG}` }), 'the escaped quotes and hostile text in the preview');
    await check(page, 'import-preview');
    await page.getByRole('button', { name: 'Import 6 contacts' }).click();
    await visible(page.getByRole('heading', { name: '4 created, 2 failed' }), '"4 created, 2 failed"', T * 3);
    const failedRows = page.getByRole('region', { name: 'Failed rows and why' }).locator('tbody tr');
    ok(await failedRows.count() === 2, `${await failedRows.count()} failed rows listed, not 2`);
    const reasons = await failedRows.allInnerTexts();
    ok(/phone/i.test(reasons[0]) && reasons[0].includes(XSS_SCRIPT), `the first failed row does not say its number is wrong: ${reasons[0]}`);
    ok(/number is required/i.test(reasons[1]), `the second failed row does not say the number is missing: ${reasons[1]}`);
    const dl = page.getByRole('link', { name: 'Download failed rows (CSV)' });
    await visible(dl, 'the download link');
    ok((await dl.getAttribute('href')).startsWith('blob:') && (await dl.getAttribute('download')) === 'failed-rows.csv', 'the download link is not a blob: URL with download');
    const [download] = await Promise.all([page.waitForEvent('download', { timeout: T }), dl.click()]);
    const body = fs.readFileSync(await download.path(), 'utf8');
    ok(body.split('\r\n')[0] === 'First name,Last name,Phone,Email,Tags,error' && body.includes('not-a-phone'), `the failed-rows CSV is wrong: ${body.slice(0, 300)}`);
    await check(page, 'import-done');
    const got = (await apiOk(w, 'GET', `/contacts?search=${encodeURIComponent(good[1].slice(2))}`)).data;
    ok(got.length === 1 && ['Multi\r\nline, with comma', 'Multi\nline, with comma'].includes(got[0].lastName),
      `the quoted multi-line cell came through as ${JSON.stringify(got[0]?.lastName)}`);
    const tagged = (await apiOk(w, 'GET', `/contacts?search=${encodeURIComponent(good[0].slice(2))}`)).data[0];
    ok(tagged && tagged.lastName === `Quote "Q" ${XSS_IMG}` && tagged.tags.map((t) => t.name).sort().join() === 'Lead,VIP',
      `the first row came through as ${JSON.stringify(tagged)}`);
  });

  await step('contacts: create and delete a tag in settings', async () => {
    const name = `T${rand} ${XSS_IMG}`;
    await go(page, '/settings/tags');
    await visible(page.getByRole('heading', { level: 1, name: 'Tags' }), 'the Tags heading');
    await settled(page);
    await check(page, 'tags');
    // A name in use (regardless of case) is refused beside the name field.
    if (vip) {
      await page.getByLabel('Name').fill(vip.name.toLowerCase());
      await page.getByRole('button', { name: 'Create tag' }).click();
      await errorBeside(page, page.getByLabel('Name'), 'the tag name (a name in use)');
    }
    await page.getByLabel('Name').fill(name);
    await page.getByRole('button', { name: 'Create tag' }).click();
    const row = page.getByRole('row').filter({ hasText: name });
    await visible(row, 'the new tag in the list');
    ok(await page.locator('table img').count() === 0, 'the tag name made an element');
    await check(page, 'tags-created');
    await row.getByRole('button', { name: `Edit tag ${name}` }).click();
    const edit = page.locator('section').filter({ has: page.getByRole('heading', { name: `Edit the tag “${name}”` }) });
    await visible(edit, 'the edit form of the tag');
    const renamed = `${name} 2`;
    await edit.getByLabel('Name').fill(renamed);
    await edit.getByLabel('Colour').fill('#10b981');
    await edit.getByRole('button', { name: 'Save tag' }).click();
    const row2 = page.getByRole('row').filter({ hasText: renamed });
    await visible(row2, 'the renamed tag');
    const saved = (await apiOk(w, 'GET', '/tags')).data.find((t) => t.name === renamed);
    ok(saved && saved.color === '#10B981', `the API has ${JSON.stringify(saved)} after the edit`);
    await row2.getByRole('button', { name: `Delete tag ${renamed}` }).click();
    const dlg = await visible(page.getByRole('dialog'), 'the confirmation dialog');
    await dlg.getByRole('button', { name: 'Delete tag' }).click();
    await hidden(row2, 'the deleted tag');
    ok(!(await apiOk(w, 'GET', '/tags')).data.some((t) => t.name === renamed), 'the API still has the deleted tag');
  });

  await step('contacts: create and delete a custom field in settings', async () => {
    const label = `F${rand} ${XSS_SCRIPT}`;
    await go(page, '/settings/custom-fields');
    await visible(page.getByRole('heading', { level: 1, name: 'Custom fields' }), 'the Custom fields heading');
    await settled(page);
    await check(page, 'custom-fields');
    await page.getByLabel('Label').fill(label);
    await page.getByLabel('Name', { exact: true }).fill(`plan_${rand}`);
    await page.getByLabel('Type').selectOption('select');
    await page.getByRole('button', { name: 'Create field' }).click();
    // A choice field without choices: the API's error beside the Choices field.
    await errorBeside(page, page.getByLabel('Choices'), 'the choices (none given)');
    await check(page, 'custom-fields-error');
    await page.getByLabel('Choices').fill(`Basic, Pro, ${XSS_IMG}`);
    await page.getByRole('button', { name: 'Create field' }).click();
    const row = page.getByRole('row').filter({ hasText: label });
    await visible(row, 'the new field in the list');
    ok((await row.innerText()).includes(XSS_IMG), 'the hostile choice is not shown as text');
    await check(page, 'custom-fields-created');
    const fields = (await apiOk(w, 'GET', '/contacts/custom-fields')).data;
    const fd = fields.find((f) => f.name === `plan_${rand}`);
    ok(fd && fd.type === 'select' && fd.options.length === 3, `the API has ${JSON.stringify(fd)}`);
    await row.getByRole('button', { name: `Delete field ${label}` }).click();
    const dlg = await visible(page.getByRole('dialog'), 'the confirmation dialog');
    await dlg.getByRole('button', { name: 'Delete field' }).click();
    await hidden(row, 'the deleted field');
    ok(!(await apiOk(w, 'GET', '/contacts/custom-fields')).data.some((f) => f.id === fd.id), 'the API still has the deleted field');
  });

  await step('contacts: the import waits out a 429 (Retry-After) and sends the same chunk again', async () => {
    // The first bulk request is answered 429 as the bulk rate class would (10 a minute), so that
    // the wait is seen every run; the second goes to the API.
    let refused = 0;
    let sent = 0;
    await page.route('**/v1/contacts/bulk*', async (route) => {
      if (!refused) {
        refused += 1;
        return route.fulfill({
          status: 429, contentType: 'application/json', headers: { 'Retry-After': '3' },
          body: JSON.stringify({ error: 'Rate limit exceeded', code: 'RATE_LIMITED', retryAfter: 3 }),
        });
      }
      sent += 1;
      return route.continue();
    });
    try {
      const nums = [freshNumber(), freshNumber()];
      await go(page, '/contacts/import');
      await settled(page);
      await page.getByLabel('CSV file').setInputFiles({ name: 'retry.csv', mimeType: 'text/csv', buffer: Buffer.from(`number,first_name\n${nums[0]},Retry${rand}\n${nums[1]},Retry${rand}\n`) });
      await page.getByRole('button', { name: 'Import 2 contacts' }).click();
      await visible(page.getByRole('status').filter({ hasText: /waiting \d+ s/ }), 'the "waiting N s" status');
      await visible(page.getByRole('heading', { name: '2 created, 0 failed' }), '"2 created, 0 failed" after the wait', T + 5000);
      ok(refused === 1 && sent === 1, `the bulk requests: ${refused} refused, ${sent} sent (expected 1 and 1)`);
      ok(await page.locator('progress').evaluate((el) => el.value === el.max), 'the progress bar is not full');
      await check(page, 'import-after-429');
    } finally {
      await page.unroute('**/v1/contacts/bulk*');
    }
  });

  await step("contacts: a contact's calls link to their pages", async () => {
    const [calls, list] = await Promise.all([apiOk(w, 'GET', '/calls?limit=50'), apiOk(w, 'GET', '/contacts?limit=100&sortBy=createdAt&sortOrder=asc')]);
    let hit = null;
    for (const c of list.data) {
      const call = calls.data.find((x) => x.from === c.number || x.to === c.number);
      if (call) { hit = { c, call }; break; }
    }
    if (!hit) { console.log('# no seeded contact has a call: the calls table is not checked'); return; }
    await go(page, `/contacts/${hit.c.id}`);
    await settled(page);
    const link = page.getByRole('region', { name: 'Calls with this contact' }).locator(`a[href="/calls/${hit.call.id}"]`);
    await visible(link, `the link to the call ${hit.call.id}`);
    await check(page, 'contact-with-calls');
  });

  await step('contacts: delete the contact; no hostile string ran', async () => {
    await go(page, `/contacts/${contactId}`);
    await settled(page);
    await page.getByRole('button', { name: 'Delete contact' }).click();
    const dlg = await visible(page.getByRole('dialog'), 'the confirmation dialog');
    await dlg.getByRole('button', { name: 'Delete contact' }).click();
    await atPath(page, '/contacts');
    const res = await w.api('GET', `/contacts/${contactId}`);
    ok(res.status === 404, `GET the deleted contact answered ${res.status}`);
    if (await page.evaluate(() => window.__xss) !== undefined) fail('a hostile string ran as code (window.__xss is set)');
  });
}
