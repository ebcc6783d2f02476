// Browser steps of the boards pages: /boards (list, create, delete) and /boards/{id} (the kanban
// board: drag and drop, the keyboard "Move to" list, the stages editor and its 409).
import { T, step, visible, hidden, atPath, check, ok, fail, rand, track, newContext, password, nav } from '../harness.mjs';

const IMG = '<img src=x onerror=window.__xss=1>';
const SCRIPT = '<script>window.__xss=1</script>';

/** Polls fn() until it returns a truthy value, at most T ms. */
async function until(fn, what) {
  const end = Date.now() + T;
  let last;
  while (Date.now() < end) {
    last = await fn();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 200)); // the next poll of the API
  }
  return fail(`timed out after ${T} ms waiting for ${what}`);
}

const phone = () => `+1415${2 + Math.floor(Math.random() * 8)}${String(Math.floor(Math.random() * 1e6)).padStart(6, '0')}`;

export default async function boards(w) {
  const page = track(w.page);
  const boardName = `Pipeline ${rand} ${IMG}`;
  const stageNames = [`New ${rand}`, `Talking ${rand} ${SCRIPT}`.slice(0, 50), `Closed ${rand}`];
  let board;
  let stages;
  const contacts = [];
  const col = (i) => page.locator(`.kanban-col[data-stage="${stages[i].id}"]`);
  const cardOf = (c) => page.locator(`.kanban-card[data-contact="${c.id}"]`);
  const stageOf = async (c) => {
    const r = await w.api('GET', `/contacts/${c.id}`);
    ok(r.status === 200, `GET /contacts/${c.id} answered ${r.status}`);
    return r.body.data.crmStage?.id;
  };
  const countOf = async (i) => (await col(i).locator('.col-count').textContent()).trim();

  await step('boards: a board with 3 stages and 3 contacts in the first, made through the API', async () => {
    const r = await w.api('POST', '/boards', { name: boardName, stages: stageNames.map((name) => ({ name })) });
    ok(r.status === 201, `POST /boards answered ${r.status}: ${JSON.stringify(r.body)}`);
    board = r.body.data;
    stages = board.stages;
    ok(stages.length === 3, 'the board should have 3 stages');
    const people = [
      { firstName: IMG, lastName: SCRIPT, tagNames: [`vip-${rand}`] },
      { firstName: 'Ada', lastName: `Drag ${rand}` },
      { firstName: 'Bob', lastName: `Stay ${rand}` },
    ];
    for (const p of people) {
      let res;
      for (let tries = 0; tries < 3; tries += 1) { // a random number may already exist
        res = await w.api('POST', '/contacts', { ...p, number: phone(), boardIds: [board.id] });
        if (res.status !== 409) break;
      }
      ok(res.status === 201, `POST /contacts answered ${res.status}: ${JSON.stringify(res.body)}`);
      contacts.push(res.body.data);
    }
  });

  await step('boards: the list links to the board; names are text', async () => {
    await page.goto('/boards');
    const link = await visible(page.getByRole('link', { name: boardName, exact: true }), 'the link to the new board');
    await check(page, 'boards');
    await link.click();
    await atPath(page, `/boards/${board.id}`);
    await visible(page.getByRole('heading', { level: 1, name: boardName }), 'the board name as the page heading');
    for (let i = 0; i < 3; i += 1) await visible(col(i), `the column ${stageNames[i]}`);
    for (const c of contacts) await visible(cardOf(c), `the card of ${c.firstName}`);
    await visible(cardOf(contacts[0]).getByRole('link', { name: `${IMG} ${SCRIPT}` }), 'the hostile contact name, as text');
    await visible(col(1).getByText(stageNames[1], { exact: true }), 'the hostile stage name, as text');
    await until(async () => await countOf(0) === '3' && await countOf(1) === '0', 'the counts 3 and 0');
    await check(page, 'board');
  });

  await step('boards: columns load in pages ("Load more"); a refused move puts the card back', async () => {
    await page.goto(`/boards/${board.id}?limit=2`);
    await until(async () => await col(0).locator('.kanban-card').count() === 2, 'the first page of 2 cards');
    const more = await visible(col(0).getByRole('button', { name: 'Load more (1 more)' }), 'the Load more button');
    await more.click();
    await until(async () => await col(0).locator('.kanban-card').count() === 3, 'the 3 cards after Load more');
    await hidden(col(0).getByRole('button', { name: /Load more/ }), 'the Load more button once all are shown');
    // the API refuses the move (a simulated 500): the card goes back and the error shows
    const fake = (route) => (route.request().method() === 'PUT'
      ? route.fulfill({ status: 500, contentType: 'application/json', body: JSON.stringify({ error: 'Simulated failure', code: 'INTERNAL_ERROR' }) })
      : route.continue());
    await page.route('**/v1/contacts/*', fake);
    try {
      await cardOf(contacts[2]).dragTo(col(1), { sourcePosition: { x: 6, y: 6 }, targetPosition: { x: 40, y: 40 } });
      await visible(page.getByRole('alert').filter({ hasText: 'Could not move' }).filter({ hasText: 'Simulated failure' }), 'the error of the refused move');
      await visible(col(0).locator(`.kanban-card[data-contact="${contacts[2].id}"]:not(.moving)`), 'the card back in the first column');
      await until(async () => await countOf(0) === '3' && await countOf(1) === '0', 'the counts back to 3 and 0');
    } finally {
      await page.unroute('**/v1/contacts/*', fake);
    }
    ok((await stageOf(contacts[2])) === stages[0].id, 'the refused move should have left the contact in the first stage');
  });

  await step('boards: dragging a card to the second column moves the contact', async () => {
    const c = contacts[1];
    await cardOf(c).dragTo(col(1), { sourcePosition: { x: 6, y: 6 }, targetPosition: { x: 40, y: 40 } });
    await visible(col(1).locator(`.kanban-card[data-contact="${c.id}"]:not(.moving)`), 'the dragged card in the second column');
    await until(async () => await countOf(0) === '2' && await countOf(1) === '1', 'the counts 2 and 1 after the drag');
    await until(async () => (await stageOf(c)) === stages[1].id, 'the API to place the dragged contact in the second stage');
  });

  await step('boards: the keyboard "Move to" list moves a card to the third column', async () => {
    const c = contacts[0];
    const select = cardOf(c).getByLabel(/Move .* to another stage/);
    await select.focus();
    await select.selectOption({ label: stageNames[2] });
    await visible(col(2).locator(`.kanban-card[data-contact="${c.id}"]:not(.moving)`), 'the moved card in the third column');
    await until(async () => await countOf(0) === '1' && await countOf(2) === '1', 'the counts 1 and 1 after the move');
    await until(async () => (await stageOf(c)) === stages[2].id, 'the API to place the moved contact in the third stage');
    ok(await page.evaluate(() => document.activeElement?.classList.contains('card-move')), 'the focus should stay on the moved card\'s list');
  });

  await step('boards: removing a stage that holds contacts shows the 409 in words', async () => {
    await page.getByRole('button', { name: `Remove ${stageNames[0]}`, exact: true }).click();
    await page.getByRole('button', { name: 'Save board' }).click();
    await visible(page.locator('.stage-editor .form-alert').getByText(`The stage “${stageNames[0]}” still holds 1 contact`), 'the 409 message naming the stage');
    await check(page, 'board-409');
    await page.getByRole('button', { name: 'Undo changes' }).click();
    await visible(page.getByRole('button', { name: `Remove ${stageNames[0]}`, exact: true }), 'the removed stage back after Undo');
    const r = await w.api('GET', `/boards/${board.id}`);
    ok(r.body.data.stages.length === 3, 'the refused change should have left 3 stages');
  });

  await step('boards: add a stage, rename one, reorder, and save', async () => {
    await page.getByRole('button', { name: 'Add a stage' }).click();
    const fresh = page.getByLabel('Stage 4', { exact: true });
    await visible(fresh, 'the new stage field');
    await fresh.fill(`Later ${rand} ${IMG}`);
    await page.getByLabel('Stage 2', { exact: true }).fill(`Talking ${rand} renamed`);
    await page.getByRole('button', { name: `Move Closed ${rand} down`, exact: true }).click();
    await page.getByRole('button', { name: 'Save board' }).click();
    await visible(page.locator('.kanban-col', { hasText: `Later ${rand} ${IMG}` }), 'the new column');
    const r = await w.api('GET', `/boards/${board.id}`);
    const names = r.body.data.stages.map((s) => s.name);
    ok(JSON.stringify(names) === JSON.stringify([stageNames[0], `Talking ${rand} renamed`, `Later ${rand} ${IMG}`, stageNames[2]]),
      `the stages are now ${JSON.stringify(names)}`);
    ok(r.body.data.stages[1].id === stages[1].id, 'the renamed stage should keep its id (and its contacts)');
    await visible(col(1).locator(`.kanban-card[data-contact="${contacts[1].id}"]`), 'the dragged card still in the renamed stage');
    await check(page, 'board-edited');
  });

  await step('boards: a viewer sees the board but is offered no move, edit, create or delete', async () => {
    const inv = await w.api('POST', '/members/invitations', { email: `viewer-${rand}-${Date.now()}@portal-dev.example`, role: 'viewer' });
    ok(inv.status === 201, `POST /members/invitations answered ${inv.status}: ${JSON.stringify(inv.body)}`);
    const ctx = await newContext(w.browser, 'viewer');
    let userId;
    try {
      const vp = track(await ctx.newPage());
      const res = await vp.request.post('/v1/auth/accept-invite', { data: { token: inv.body.data.url.split('/').pop(), password: password(), firstName: 'Vera', lastName: `Viewer ${rand}` } });
      ok(res.ok(), `accepting the viewer's invitation answered ${res.status()}`);
      userId = (await res.json()).data.user.id;
      await vp.goto(`/boards/${board.id}`);
      await visible(vp.locator(`.kanban-card[data-contact="${contacts[1].id}"]`), 'a card for the viewer');
      ok(await vp.locator('.kanban-card[draggable="true"], .card-move').count() === 0, 'a viewer is offered a drag or a "Move to" list');
      ok(await vp.getByRole('heading', { name: 'Edit the board' }).count() === 0, 'a viewer is offered the stages editor');
      await check(vp, 'board-viewer');
      await vp.goto('/boards');
      await visible(vp.getByRole('link', { name: boardName, exact: true }), 'the board in the viewer\'s list');
      ok(await vp.getByRole('button', { name: /Create board|Delete/ }).count() === 0, 'a viewer is offered to create or delete a board');
      ok(await nav(vp).getByRole('link', { name: 'Webhooks' }).count() === 0, 'a viewer is offered the Webhooks page');
    } finally {
      await ctx.close();
      track(page);
      if (userId) await w.api('DELETE', `/members/${userId}`);
    }
  });

  await step('boards: create a board in the list, then delete both with confirmation', async () => {
    await page.goto('/boards');
    const name = `Made in UI ${rand} ${SCRIPT}`;
    await page.getByLabel('Board name').fill(name);
    await page.getByLabel('Stages').fill(`One ${rand}, Two ${IMG}`);
    await page.getByRole('button', { name: 'Create board' }).click();
    await visible(page.getByRole('link', { name, exact: true }), 'the board created in the UI');
    const list = (await w.api('GET', '/boards')).body.data;
    const made = list.find((b) => b.name === name);
    ok(made && made.stages.map((s) => s.name).join('|') === `One ${rand}|Two ${IMG}`, 'the new board should have the 2 stages typed');
    // an empty stage list is refused beside its field
    await page.getByLabel('Board name').fill(`Empty ${rand}`);
    await page.getByLabel('Stages').fill(' , ');
    await page.getByRole('button', { name: 'Create board' }).click();
    await visible(page.locator('.field-error:not([hidden])'), 'the error beside the stages field');
    for (const n of [name, boardName]) {
      await page.getByRole('button', { name: `Delete board ${n}`, exact: true }).click();
      const dlg = page.getByRole('dialog');
      await visible(dlg, 'the confirmation dialog');
      await dlg.getByRole('button', { name: 'Delete board' }).click();
      await hidden(page.getByRole('link', { name: n, exact: true }), `the deleted board ${n}`);
    }
    const after = (await w.api('GET', '/boards')).body.data;
    ok(!after.some((b) => b.id === board.id || b.id === made.id), 'the deleted boards are still listed by the API');
    await check(page, 'boards-after');
    for (const c of contacts) await w.api('DELETE', `/contacts/${c.id}`);
    ok(await page.evaluate(() => window.__xss) === undefined, 'a hostile string ran as script');
  });
}
