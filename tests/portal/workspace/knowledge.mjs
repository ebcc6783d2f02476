// Browser steps of the knowledge pages: create a knowledge base in the UI (hostile strings), add a
// Q&A reference, filter it through the address, find it with the search box (similarity, the
// balance goes down by the cost), upload a text document through the file input until it is
// ready, edit and delete the reference, add a webpage served by a local node:http server and see
// its status change without a reload, its refresh refused while running (409) and within 24 hours
// (429, in words), delete the knowledge base.
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { T, step, visible, hidden, atPath, check, ok, rand, track } from '../harness.mjs';

const XSS_IMG = '<img src=x onerror=window.__xss=1>';
const XSS_SCRIPT = '<script>window.__xss=1</script>';
const UUID = /^\/knowledge\/([0-9a-f-]{36})$/;

/** A local page to scrape: answers after `delay` ms, so that its pending state can be seen. */
async function pageServer(phrase) {
  const server = http.createServer((req, res) => {
    if (!req.url.startsWith('/faq')) { res.writeHead(404).end(); return; }
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(`<!doctype html><html><head><title>FAQ</title></head><body><h1>FAQ</h1>
<h2>Where is the ${phrase} lighthouse?</h2><p>The ${phrase} lighthouse is on the north pier.</p></body></html>`);
    }, 3000);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/faq`, close: () => new Promise((r) => { server.closeAllConnections?.(); server.close(() => r()); }) };
}

export default async function knowledge(w) {
  const page = track(w.page);
  const kbName = `KB ${rand} ${XSS_IMG}`;
  const phrase = `saffron quokka ${rand}`;
  const question = `What does the ${phrase} eat? ${XSS_IMG}`;
  const answer = `The ${phrase} eats marigold leaves. ${XSS_SCRIPT}`;
  const answer2 = `The ${phrase} eats clover now. ${XSS_IMG}`;
  const noXss = async () => ok(await page.evaluate(() => window.__xss) === undefined, `a hostile string ran as markup on ${page.url()}`);
  const balance = async () => Number((await page.locator('.kb-balance-value').textContent()).replace(/[^\d-]/g, ''));
  let id;

  await step('knowledge: create a knowledge base in the UI; its name is text', async () => {
    await page.goto('/knowledge');
    await visible(page.getByRole('heading', { level: 1, name: 'Knowledge' }), 'the Knowledge heading');
    await page.getByLabel('Name', { exact: true }).fill(kbName);
    await page.getByLabel('Description (optional)').fill(`Made by the browser steps ${XSS_SCRIPT}`);
    await page.getByRole('button', { name: 'Create knowledge base' }).click();
    await page.waitForURL((u) => UUID.test(u.pathname), { timeout: T });
    id = UUID.exec(new URL(page.url()).pathname)[1];
    await visible(page.getByRole('heading', { level: 1, name: kbName }), 'the knowledge base name as the heading, as text');
    await visible(page.getByText(`Made by the browser steps ${XSS_SCRIPT}`), 'the description, as text');
    const r = await w.api('GET', `/knowledgebase/${id}`);
    ok(r.status === 200 && r.body.data.name === kbName, `GET /v1/knowledgebase/${id} answered ${r.status}: ${JSON.stringify(r.body).slice(0, 300)}`);
    await noXss();
  });

  await step('knowledge: the list links the new knowledge base with its counts', async () => {
    await page.goto('/knowledge');
    const link = await visible(page.getByRole('link', { name: kbName, exact: true }), 'the knowledge base in the list');
    const row = page.getByRole('row').filter({ has: link });
    ok((await row.innerText()).includes('Not linked'), `the row does not say it is not linked to an agent: ${await row.innerText()}`);
    await check(page, 'knowledge-list');
    await noXss();
    await link.click();
    await atPath(page, `/knowledge/${id}`);
    await visible(page.getByRole('heading', { level: 1, name: kbName }), 'the knowledge base page');
  });

  await step('knowledge: add a Q&A reference; hostile strings are text', async () => {
    await page.getByLabel('Question', { exact: true }).fill(question);
    await page.getByLabel('Answer', { exact: true }).fill(answer);
    await page.getByRole('button', { name: 'Add reference' }).click();
    await visible(page.getByRole('rowheader', { name: question }), 'the new reference, its question as text');
    await visible(page.getByRole('cell', { name: answer }), 'its answer as text');
    await noXss();
  });

  await step('knowledge: the reference filter lives in the address', async () => {
    await page.getByLabel('Filter references').fill('no-such-words-here');
    await page.getByRole('button', { name: 'Filter', exact: true }).click();
    await page.waitForURL((u) => u.searchParams.get('q') === 'no-such-words-here', { timeout: T });
    await visible(page.getByText('No reference matches “no-such-words-here”.'), 'the empty filtered list');
    await page.goto(`/knowledge/${id}?q=${encodeURIComponent(phrase)}`);
    await visible(page.getByRole('rowheader', { name: question }), 'the reference found by the filter of a shared address');
    ok(await page.getByLabel('Filter references').inputValue() === phrase, 'the filter box does not show the filter of the address');
    await page.getByRole('link', { name: 'Clear filter' }).click();
    await page.waitForURL((u) => !u.searchParams.has('q'), { timeout: T });
  });

  await step('knowledge: change the description in the edit dialog', async () => {
    await page.getByRole('button', { name: 'Edit name and description' }).click();
    const dlg = await visible(page.getByRole('dialog', { name: 'Edit the knowledge base' }), 'the edit dialog');
    ok(await dlg.getByLabel('Name').inputValue() === kbName, 'the dialog does not hold the name');
    await dlg.getByLabel('Name').fill('   ');
    await dlg.getByRole('button', { name: 'Save' }).click();
    await visible(dlg.locator('.field-error').filter({ hasText: /./ }), 'the blank name refused beside its field');
    await dlg.getByLabel('Name').fill(kbName);
    await dlg.getByLabel('Description').fill(`Changed ${XSS_IMG}`);
    await dlg.getByRole('button', { name: 'Save' }).click();
    await hidden(page.getByRole('dialog'), 'the edit dialog');
    await visible(page.getByText(`Changed ${XSS_IMG}`, { exact: true }), 'the new description, as text');
    const r = await w.api('GET', `/knowledgebase/${id}`);
    ok(r.body.data.description === `Changed ${XSS_IMG}`, `the API has the description ${JSON.stringify(r.body.data.description)}`);
    await noXss();
  });

  await step('knowledge: search finds the reference, shows its similarity, and the balance goes down by the cost', async () => {
    await page.waitForFunction(() => /\d/.test(document.querySelector('.kb-balance-value')?.textContent || ''), null, { timeout: T });
    const before = await balance();
    const meBefore = (await w.api('GET', '/me')).body.data.credits.balance;
    ok(before === meBefore, `the balance shown (${before}) is not GET /v1/me's (${meBefore})`);
    await page.getByLabel('Search for').fill(`what does the ${phrase} eat`);
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const hit = await visible(page.locator('.kb-hit').filter({ hasText: question }), 'the reference among the results');
    const text = await hit.innerText();
    // Issue 55: the order is shown as a rank, and the measure is the similarity (which
    // compares across questions), never the rank-made relevance as a percentage.
    ok(/Rank\s+#\d+/.test(text), `the result shows no rank: ${text}`);
    ok(/Similarity\s+\d+(\.\d)?%/.test(text), `the result shows no similarity: ${text}`);
    ok(!/Relevance/.test(text), `the result shows the fused relevance as a measure: ${text}`);
    const ranks = await page.locator('.kb-hit .kb-rel strong').allInnerTexts();
    ok(ranks.join(' ') === ranks.map((_, i) => `#${i + 1}`).join(' '), `the ranks shown are not 1, 2, 3…: ${ranks.join(' ')}`);
    await visible(page.getByText(/this search cost 1 credit/), 'the cost of the search');
    await page.waitForFunction((b) => Number((document.querySelector('.kb-balance-value')?.textContent || '').replace(/[^\d-]/g, '')) === b - 1,
      before, { timeout: T }).catch(() => {});
    const after = await balance();
    ok(after === before - 1, `the balance shown went from ${before} to ${after}, not down by 1`);
    await check(page, 'knowledge-search');
    await noXss();
  });

  // Issue 40: "Insurance 19.5 %" was listed above "Payment options 44.4 %". A part number is found
  // by its words while its meaning is like its neighbours', so it comes first with a lower
  // similarity. Issue 55: what explains the order is the rank shown first (#1, #2…), not a
  // percentage made of ranks; the similarity beside it is the measure that compares.
  await step('knowledge: the ranks shown follow the list of results, each with its similarity', async () => {
    const corpus = [
      ['Which parts make up the countertop purifier?', 'The housing is FX-2210-QB, the carbon cartridge FX-4471-ZQ, the sediment pre-filter FX-9034-LM and the seal FX-5518-TR.'],
      ['What do spare components cost?', 'Spare components cost between 5 and 40 euros each.'],
      ['Can I order a single cartridge?', 'Cartridges are sold in packs of three only.'],
      ['Do you ship abroad?', 'We ship to every country in the European Union within five days.'],
    ];
    const added = [];
    for (const [q, a] of corpus) {
      const r = await w.api('POST', `/knowledgebase/${id}/references`, { question: q, answer: a });
      ok(r.status === 201, `adding a reference answered ${r.status}: ${JSON.stringify(r.body)}`);
      added.push(r.body.data.id);
    }
    try {
      await page.getByLabel('Search for').fill('How much is FX-4471-ZQ?');
      await page.getByLabel('Minimum similarity (0 to 1)').fill('0');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await visible(page.locator('.kb-meta').filter({ hasText: 'FX-4471-ZQ' }), 'the results of the part-number search');
      const first = page.locator('.kb-hit').first();
      await visible(first.filter({ hasText: corpus[0][0] }), 'the entry holding the part number first');
      const ranks = await page.locator('.kb-hit .kb-rel strong').allInnerTexts();
      ok(ranks.length >= corpus.length && ranks.every((r, i) => r === `#${i + 1}`), `the ranks shown are not #1, #2… down the list: ${JSON.stringify(ranks)}`);
      const similarities = await page.locator('.kb-hit .kb-sim strong').allInnerTexts();
      ok(similarities.length === ranks.length && similarities.every((t) => /^\d+(\.\d)?%$/.test(t)), `each result shows its similarity: ${JSON.stringify(similarities)}`);
      await check(page, 'knowledge-search-order');
    } finally {
      for (const ref of added) await w.api('DELETE', `/knowledgebase/${id}/references/${ref}`);
      await page.getByLabel('Minimum similarity (0 to 1)').fill('0.1');
    }
  });

  await step('knowledge: upload a text document through the file input; its status turns ready', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kb-doc-'));
    const file = path.join(dir, `faq-${rand}.txt`);
    fs.writeFileSync(file, `Q: How tall is the ${phrase}?\nA: About forty centimetres. ${XSS_IMG}\n`);
    try {
      await page.getByLabel(/Choose a file to upload/).setInputFiles(file);
      const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: `faq-${rand}.txt` }) });
      await visible(row, 'the uploaded document in the list');
      await visible(row.getByText('Ready', { exact: true }), 'the document ready', 3 * T);
      const recent = page.locator('.kb-recent');
      await visible(recent.getByText(`About forty centimetres. ${XSS_IMG}`, { exact: false }), 'the extracted text of the uploaded document');
      await check(page, 'knowledge-document');
      // The same by dropping a file on the drop zone.
      const dropped = `dropped-${rand}.md`;
      const dt = await page.evaluateHandle((name) => {
        const d = new DataTransfer();
        d.items.add(new File(['# Dropped\n\nDropped on the zone.\n'], name, { type: 'text/markdown' }));
        return d;
      }, dropped);
      await page.locator('.kb-drop').dispatchEvent('drop', { dataTransfer: dt });
      const row2 = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: dropped }) });
      await visible(row2.getByText('Ready', { exact: true }), 'the dropped document ready', 3 * T);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await noXss();
  });

  await step('knowledge: import references from a CSV file; a bad row is listed, the others are added as text', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kb-csv-'));
    const file = path.join(dir, `faq-${rand}.csv`);
    const csvQuestion = `Where does the ${phrase} sleep? ${XSS_IMG}`;
    fs.writeFileSync(file, `answer,question\r\n"In a burrow, ""mostly"". ${XSS_SCRIPT}","${csvQuestion}"\r\nNo question here,\r\nOn Sundays,When does the ${phrase} rest?\r\n`);
    try {
      await page.getByText('Import references from a CSV file').click();
      await page.getByLabel(/Choose a CSV file of questions and answers/).setInputFiles(file);
      await visible(page.getByText('2 references added, 1 failed.'), 'the import summary');
      const failed = page.getByRole('table', { name: 'Rows not imported' });
      await visible(failed.getByRole('cell', { name: '3', exact: true }), 'the failed row by its line in the file');
      await visible(page.getByRole('rowheader', { name: csvQuestion }).or(page.getByRole('cell', { name: csvQuestion })).first(), 'an imported reference in the list');
      await check(page, 'knowledge-csv-import');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    await noXss();
  });

  await step('knowledge: edit the reference, then delete it', async () => {
    await page.getByRole('button', { name: `Edit reference: ${question}` }).click();
    const dlg = await visible(page.getByRole('dialog', { name: 'Edit the reference' }), 'the edit dialog');
    ok(await dlg.getByLabel('Answer').inputValue() === answer, 'the edit dialog does not hold the answer');
    await dlg.getByLabel('Answer').fill(answer2);
    await dlg.getByRole('button', { name: 'Save' }).click();
    await hidden(page.getByRole('dialog'), 'the edit dialog');
    await visible(page.getByRole('cell', { name: answer2 }), 'the changed answer');
    const r = await w.api('GET', `/knowledgebase/${id}`);
    ok(r.body.data.references.some((x) => x.answer === answer2), 'the API does not have the changed answer');
    await page.getByRole('button', { name: `Delete reference: ${question}` }).click();
    const confirm = await visible(page.getByRole('dialog', { name: 'Delete this reference?' }), 'the delete confirmation');
    await confirm.getByRole('button', { name: 'Delete' }).click();
    await hidden(page.getByRole('rowheader', { name: question }), 'the deleted reference');
    const r2 = await w.api('GET', `/knowledgebase/${id}`);
    ok(!r2.body.data.references.some((x) => x.question === question), `the reference is still there: ${JSON.stringify(r2.body.data.references)}`);
    ok(r2.body.data.references.length === 2, 'the two imported references stay');
    await noXss();
  });

  const server = await pageServer(phrase);
  try {
    const pageName = `FAQ page ${rand} ${XSS_IMG}`;
    await step('knowledge: add a webpage; its status changes from pending to ready without a reload; a refresh while it runs is 409', async () => {
      await page.evaluate(() => { window.__kbSamePage = true; });
      await page.getByLabel('Address (URL)').fill(server.url);
      await page.getByLabel('Name (optional)').fill(pageName);
      await page.getByRole('button', { name: 'Add webpage' }).click();
      const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: new RegExp(`^FAQ page ${rand}`) }) });
      await visible(row.getByText('Pending…'), 'the webpage pending');
      ok((await row.innerText()).includes(pageName), 'the webpage name is not shown as text');
      await row.getByRole('button', { name: `Refresh ${pageName}` }).click();
      await visible(row.getByText('This page is already being refreshed.'), 'the 409 (already running) beside the webpage');
      await visible(row.getByText('Ready', { exact: true }), 'the webpage ready, without a reload', 3 * T);
      ok(await page.evaluate(() => window.__kbSamePage) === true, 'the page was reloaded');
      ok((await row.innerText()).match(/\bReady\b[\s\S]*\b1\b/), `the webpage row has no entry count: ${await row.innerText()}`);
      await noXss();
    });

    await step('knowledge: refresh the webpage; then a second refresh is refused for 24 hours, said in words', async () => {
      const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: new RegExp(`^FAQ page ${rand}`) }) });
      await row.getByRole('button', { name: `Refresh ${pageName}` }).click();
      await visible(row.getByText('Refreshing…'), 'the webpage refreshing');
      await visible(row.getByText('Ready', { exact: true }), 'the webpage ready again', 3 * T);
      await row.getByRole('button', { name: `Refresh ${pageName}` }).click();
      const msg = await visible(row.getByText(/You can refresh this page again in/), 'the 429 said in words');
      const text = await msg.innerText();
      ok(/again in (23|24) hours \(at \d\d:\d\d on \d{1,2} [A-Z][a-z]{2}\)/.test(text), `the 429 is not said as "in N hours (at HH:MM on D Mon)": ${text}`);
      await row.getByRole('button', { name: `Content of ${pageName}` }).click();
      const dlg = await visible(page.getByRole('dialog', { name: `Content of ${pageName}` }), 'the content dialog');
      await visible(dlg.getByText(`Where is the ${phrase} lighthouse?`), 'the entry extracted from the page');
      await check(page, 'knowledge-webpage-content');
      await dlg.getByRole('button', { name: 'Close' }).click();
      await hidden(page.getByRole('dialog'), 'the content dialog');
      await check(page, 'knowledge-detail');
      await noXss();
    });
  } finally {
    await server.close();
  }

  await step('knowledge: on a subteam without credits, the upload goes to the subteam and a search says 402', async () => {
    const sub = await w.api('POST', '/agency/subteams', {
      teamName: `KB no credits ${rand}`, email: `kb-${rand}@portal-dev.example`, firstName: 'Kay', lastName: 'Bee', totalMonthlyCredits: 0,
    });
    ok(sub.status === 201, `POST /v1/agency/subteams answered ${sub.status}: ${JSON.stringify(sub.body).slice(0, 300)}`);
    const subId = sub.body.data.id;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kb-doc-'));
    try {
      const kb = await w.api('POST', `/knowledgebase?teamId=${subId}`, { name: `Subteam KB ${rand}` });
      ok(kb.status === 201, `POST /v1/knowledgebase?teamId= answered ${kb.status}`);
      const subKb = kb.body.data.id;
      await page.goto('/knowledge');
      await page.getByLabel('Acting on').selectOption(subId);
      await visible(page.locator('.scope-banner').filter({ hasText: `KB no credits ${rand}` }), 'the subteam banner');
      await visible(page.getByRole('link', { name: `Subteam KB ${rand}` }), "the subteam's knowledge base in the list");
      await page.getByRole('link', { name: `Subteam KB ${rand}` }).click();
      await atPath(page, `/knowledge/${subKb}`);
      const file = path.join(dir, `notes-${rand}.md`);
      fs.writeFileSync(file, `# Notes\n\nThe subteam keeps its own notes. ${XSS_SCRIPT}\n`);
      await page.getByLabel(/Choose a file to upload/).setInputFiles(file);
      const row = page.getByRole('row').filter({ has: page.getByRole('rowheader', { name: `notes-${rand}.md` }) });
      await visible(row.getByText('Ready', { exact: true }), 'the uploaded document ready in the subteam', 3 * T);
      const docs = (await w.api('GET', `/knowledgebase/${subKb}?teamId=${subId}`)).body.data.documents;
      ok(docs.length === 1 && docs[0].name === `notes-${rand}.md`, `the subteam's knowledge base holds ${JSON.stringify(docs)}`);
      await page.waitForFunction(() => /\d/.test(document.querySelector('.kb-balance-value')?.textContent || ''), null, { timeout: T });
      ok(await balance() === 0, `the balance shown on the subteam is ${await balance()}, not 0`);
      await page.getByLabel('Search for').fill('notes');
      await page.getByRole('button', { name: 'Search', exact: true }).click();
      await visible(page.getByRole('alert').filter({ hasText: 'no credits left' }), 'the 402 (no credits) shown by the search box');
      await check(page, 'knowledge-subteam-402');
      await noXss();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
      await page.evaluate(() => sessionStorage.removeItem('switchboard.scope')).catch(() => {});
      await w.api('DELETE', `/agency/subteams/${subId}`);
    }
  });

  await step('knowledge: delete the knowledge base from the list', async () => {
    await page.goto('/knowledge');
    await page.getByRole('button', { name: `Delete knowledge base ${kbName}` }).click();
    const dlg = await visible(page.getByRole('dialog'), 'the delete confirmation');
    await dlg.getByRole('button', { name: 'Delete' }).click();
    await hidden(page.getByRole('link', { name: kbName, exact: true }), 'the deleted knowledge base');
    const r = await w.api('GET', `/knowledgebase/${id}`);
    ok(r.status === 404, `GET /v1/knowledgebase/${id} after the delete answered ${r.status}`);
    await noXss();
  });
}
