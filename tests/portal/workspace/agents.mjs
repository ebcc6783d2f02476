// Browser steps of the agents pages: create in the UI (hostile strings), edit the fields and the
// instructions (versions, the character count and its limit), the runtime settings (errors
// beside their fields, kept after a reload), the history, the diff of an older version (text
// and settings), restore, a missing agent, delete in the UI.
import path from 'node:path';
import { T, SHOTS, step, visible, hidden, atPath, check, ok, fail, rand, track, newContext, password } from '../harness.mjs';

const XSS_IMG = '<img src=x onerror=window.__xss=1>';
const XSS_SCRIPT = '<script>window.__xss=1</script>';
const UUID = /^\/agents\/([0-9a-f-]{36})$/;

export default async function agents(w) {
  const page = track(w.page);
  const name = `Agent ${rand} ${XSS_IMG} ${XSS_SCRIPT}`;
  const description = `Front desk ${XSS_SCRIPT}`;
  const v1 = ['Greet the caller by name.', 'Ask for their name.', `Offer help with billing. ${XSS_IMG}`].join('\n');
  const v2 = ['Greet the caller by name.', 'Ask for their account number.', `Offer help with billing. ${XSS_IMG}`, XSS_SCRIPT].join('\n');
  const v3 = `${v2}\nClose politely.`;
  let id;

  const instructions = async () => {
    const r = await w.api('GET', `/agents/${id}/instructions`);
    ok(r.status === 200, `GET /v1/agents/${id}/instructions answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body.data;
  };
  // window.__xss lives in one document: checked before each step leaves it (page.goto).
  const noXss = async () => ok(await page.evaluate(() => window.__xss) === undefined, `a hostile string ran as markup on ${page.url()}`);
  const save = async (text) => {
    await page.getByLabel('System prompt').fill(text);
    await page.getByRole('button', { name: 'Save instructions' }).click();
  };

  const kbName = `Agent KB ${rand} ${XSS_IMG}`;
  await step('agents: create an agent in the UI (its name full of markup is shown as text)', async () => {
    const kb = await w.api('POST', '/knowledgebase', { name: kbName });
    ok(kb.status === 201, `POST /v1/knowledgebase answered ${kb.status}: ${JSON.stringify(kb.body)}`);
    await page.goto('/agents');
    await visible(page.getByRole('heading', { level: 1, name: 'Agents' }), 'the Agents heading');
    const create = page.locator('section').filter({ has: page.getByRole('heading', { name: 'Create an agent' }) });
    await visible(create.getByRole('button', { name: 'Create agent' }), 'the create form');
    await check(page, 'agents-list');
    // A blank name: the error is beside the field, nothing is sent.
    await create.getByRole('button', { name: 'Create agent' }).click();
    await visible(create.locator('.field-error:not([hidden])'), 'the error beside the blank name');
    // 10,000 characters pasted: kept whole (not cut to 255 without a word), the limit said
    // beside the field, nothing created (issue 40).
    const before = (await w.api('GET', '/agents?limit=1')).body.pagination?.totalCount;
    const nameBox = create.getByLabel('Name', { exact: true });
    await nameBox.fill('x'.repeat(10000));
    ok((await nameBox.inputValue()).length === 10000, 'the long name was cut in the field');
    const beside = create.locator('.field').filter({ has: page.getByLabel('Name', { exact: true }) }).locator('.field-error');
    await visible(beside.getByText('At most 255 characters'), 'the limit beside the name while typing');
    await create.getByRole('button', { name: 'Create agent' }).click();
    await visible(beside.getByText('At most 255 characters (this has 10,000).'), 'the limit beside the name after Create');
    await atPath(page, '/agents');
    const after = (await w.api('GET', '/agents?limit=1')).body.pagination?.totalCount;
    ok(before === after, `an agent was created with a 10,000-character name (${before} → ${after})`);
    await check(page, 'agents-name-too-long');
    await nameBox.fill(name);
    ok(await beside.isHidden(), 'the limit message stays after a name within it');
    await create.getByLabel('Type').selectOption('chat');
    await create.getByLabel('Knowledge base').selectOption({ label: kbName });
    await create.getByLabel('Description (optional)').fill(description);
    await create.getByLabel('Instructions (optional)').fill(v1);
    await visible(create.getByText(`${v1.length} / 100,000 characters`), 'the character count of the new instructions');
    await create.getByRole('button', { name: 'Create agent' }).click();
    await page.waitForURL((u) => UUID.test(u.pathname), { timeout: T });
    id = UUID.exec(new URL(page.url()).pathname)[1];
    await visible(page.getByRole('heading', { level: 1, name, exact: true }), 'the agent name as the page heading (as text)');
    const a = await w.api('GET', `/agents/${id}`);
    ok(a.status === 200 && a.body.data.name === name && a.body.data.type === 'chat' && a.body.data.description === description
      && a.body.data.knowledgebase?.name === kbName,
      `the API holds another agent: ${JSON.stringify(a.body)}`);
    ok((await instructions()).instructions === v1, 'the first instructions are not version 1');
    await noXss();
  });

  await step('agents: the agent page, editing its description, the character count', async () => {
    await visible(page.getByRole('heading', { name: 'Instructions' }), 'the Instructions section');
    await visible(page.getByText('Version 1', { exact: true }), 'the version badge');
    await visible(page.getByText(/^Prompt optimisation:/), 'the prompt-optimisation state');
    // The state is explained in plain words (issue 40: "Queued" said nothing).
    await visible(page.locator('.ag-opt-means').filter({ hasText: /^(Queued means|Running means|Up to date: new conversations use)/ }), 'what the state means');
    await page.getByText('What is prompt optimisation?').click();
    await visible(page.getByText(/prepares the prompt the agent actually uses/), 'what prompt optimisation is');
    await visible(page.getByText(/the next ones use the new version once it is up to date/), 'what happens next');
    await visible(page.getByText(`${v1.length} / 100,000 characters`), 'the character count');
    await visible(page.getByText(description, { exact: true }), 'the description (as text)');
    await visible(page.getByRole('link', { name: kbName, exact: true }), 'the linked knowledge base (as text)');
    await check(page, 'agent-detail');
    const edit = page.getByLabel('Description', { exact: true });
    await edit.fill(`${description} (edited)`);
    await page.getByLabel('Knowledge base').selectOption('');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await visible(page.getByText(`${description} (edited)`, { exact: true }), 'the edited description in the details');
    const a = await w.api('GET', `/agents/${id}`);
    ok(a.body.data.description === `${description} (edited)` && a.body.data.knowledgebase === null,
      `PUT did not change the description and unlink the knowledge base: ${JSON.stringify(a.body)}`);
    await noXss();
  });

  await step('agents: over 100,000 characters the count is an error and the page refuses to save', async () => {
    const box = page.getByLabel('System prompt');
    await box.fill('x'.repeat(100001));
    await visible(page.getByText('100,001 / 100,000 characters: 1 over the limit'), 'the count over the limit');
    ok(await box.getAttribute('aria-invalid') === 'true', 'the textarea is not marked invalid over the limit');
    await page.getByRole('button', { name: 'Save instructions' }).click();
    await visible(page.getByText(/Instructions must be at most 100,000 characters/), 'the error beside the instructions');
    await check(page, 'agent-over-limit');
    ok((await instructions()).version === 1, 'the page saved instructions over the limit');
    const r = await w.api('PUT', `/agents/${id}/instructions`, { instructions: 'y'.repeat(100001) });
    ok(r.status === 400, `the API accepted 100,001 characters: ${r.status}`);
    await noXss();
  });

  await step('agents: save the instructions twice (versions 2 and 3)', async () => {
    await save(v2);
    await visible(page.getByText('Version 2', { exact: true }), 'version 2 after the first save');
    await save(v3);
    await visible(page.getByText('Version 3', { exact: true }), 'version 3 after the second save');
    const ins = await instructions();
    ok(ins.version === 3 && ins.instructions === v3, `the API holds version ${ins.version}: ${JSON.stringify(ins.instructions)}`);
    await visible(page.getByRole('row', { name: /Version 2/ }), 'version 2 in the history');
    await visible(page.getByRole('row', { name: /Version 1/ }), 'version 1 in the history');
    await noXss();
  });

  await step('agents: the diff of version 1 against the current text marks added and removed lines', async () => {
    await page.getByRole('link', { name: 'Compare version 1 with the current version' }).click();
    await visible(page.getByRole('heading', { name: 'Version 1 compared with the current version' }), 'the comparison');
    ok(new URL(page.url()).searchParams.get('compare') === '1', `the comparison is not in the address: ${page.url()}`);
    const diff = page.locator('ol.ag-diff');
    const removed = diff.locator('li[data-diff="del"]', { hasText: 'Ask for their name.' });
    const added = diff.locator('li[data-diff="add"]', { hasText: 'Ask for their account number.' });
    await visible(removed, 'the removed line');
    await visible(added, 'the added line');
    ok((await removed.innerText()).includes('Removed:') || (await removed.locator('.sr-only').innerText()) === 'Removed:', 'the removed line has no text label');
    ok((await added.locator('.sr-only').innerText()) === 'Added:', 'the added line has no text label');
    await visible(diff.locator('li[data-diff="add"]', { hasText: XSS_SCRIPT }), 'the added markup line, as text');
    await visible(diff.locator('li[data-diff="add"]', { hasText: 'Close politely.' }), 'the second added line');
    await visible(diff.locator('li[data-diff="same"]', { hasText: 'Greet the caller by name.' }), 'an unchanged line');
    await check(page, 'agent-diff');
    // The address opens the comparison by itself.
    await noXss();
    await page.reload();
    await visible(page.getByRole('heading', { name: 'Version 1 compared with the current version' }), 'the comparison after a reload');
    await noXss();
  });

  await step('agents: restore version 1 (confirmed), the API holds its text', async () => {
    await page.getByRole('button', { name: 'Restore version 1' }).first().click();
    const dlg = page.getByRole('dialog');
    await visible(dlg.getByRole('heading', { name: 'Restore version 1?' }), 'the confirmation');
    await dlg.getByRole('button', { name: 'Restore' }).click();
    await hidden(dlg, 'the confirmation');
    await visible(page.getByText('Version 4', { exact: true }), 'version 4 after the restore');
    ok(!new URL(page.url()).searchParams.has('compare'), 'the comparison stayed in the address after the restore');
    const ins = await instructions();
    ok(ins.instructions === v1 && ins.version === 4, `after the restore the API holds version ${ins.version}: ${JSON.stringify(ins.instructions)}`);
    ok(await page.getByLabel('System prompt').inputValue() === v1, 'the editor does not show the restored text');
    await visible(page.getByRole('row', { name: /Version 3/ }), 'version 3 in the history');
    await noXss();
  });

  // Issue 41: the runtime settings, edited in the page, with the API's errors beside their fields.
  const settingsBox = () => page.locator('section').filter({ has: page.getByRole('heading', { name: 'Runtime settings', level: 2 }) });
  const tool = (n) => settingsBox().getByRole('group', { name: `Tool ${n}`, exact: true });
  const analysisField = (n) => settingsBox().getByRole('group', { name: `Field ${n}`, exact: true });
  const errorOf = async (control) => {
    const errId = (await control.getAttribute('aria-describedby')).split(' ').pop();
    return page.locator(`[id="${errId}"]`);
  };
  const agent = async () => {
    const r = await w.api('GET', `/agents/${id}`);
    ok(r.status === 200, `GET /v1/agents/${id} answered ${r.status}: ${JSON.stringify(r.body)}`);
    return r.body.data;
  };
  const firstMessage = `Hello, this is the front desk. ${XSS_IMG}`;
  const parameters = { type: 'object', properties: { day: { type: 'string', description: 'The day wanted' } }, required: ['day'] };
  let settingsVersion;

  await step('agents: runtime settings: JSON checked as typed, the API\'s errors beside their fields', async () => {
    const box = settingsBox();
    await visible(box.getByRole('button', { name: 'Save settings' }), 'the settings form');
    await box.getByLabel('First message (optional)').fill(firstMessage);
    await box.getByLabel('Language').fill('not a language!');
    await box.getByLabel('Voice provider').fill('elevenlabs');
    await box.getByLabel('Voice id').fill('rachel');
    await box.getByLabel('Speed').fill('1.25');
    await box.getByLabel('Model provider').fill('openai');
    await box.getByLabel('Model name').fill('gpt-4o-mini');
    await box.getByLabel('Temperature').fill('0.4');
    // A function tool whose parameters are not JSON: said beside them as typed, nothing is sent.
    await box.getByRole('button', { name: 'Add tool' }).click();
    await tool(1).getByLabel('Name').fill('book_slot');
    await tool(1).getByLabel('URL').fill('https://api.example.com/book');
    const params = tool(1).getByLabel('Parameters (JSON Schema)');
    await params.fill('{"type": "object",');
    await visible((await errorOf(params)).getByText(/^This is not valid JSON/), 'the JSON error beside the parameters');
    ok(await params.getAttribute('aria-invalid') === 'true', 'the parameters are not marked invalid');
    await box.getByRole('button', { name: 'Save settings' }).click();
    await visible((await errorOf(params)).getByText(/^This is not valid JSON/), 'the JSON error after Save');
    ok((await agent()).tools.length === 0, 'settings were sent with parameters that are not JSON');
    await params.fill(JSON.stringify(parameters, null, 2));
    ok(await (await errorOf(params)).isHidden(), 'the JSON error stays once the parameters are JSON');
    // A transfer (its number not E.164: the API's error) and an end-call tool.
    await box.getByRole('button', { name: 'Add tool' }).click();
    await tool(2).getByLabel('Type').selectOption('transfer_call');
    await tool(2).getByLabel('Number').fill('12345');
    await tool(2).getByLabel('Description (optional)').fill(`To a person ${XSS_SCRIPT}`);
    await box.getByRole('button', { name: 'Add tool' }).click();
    await tool(3).getByLabel('Type').selectOption('end_call');
    // What to extract after the call: a choice among two, and a yes or no.
    await box.getByRole('button', { name: 'Add field' }).click();
    await analysisField(1).getByLabel('Name').fill('topic');
    await analysisField(1).getByLabel('Type').selectOption('enum');
    await analysisField(1).getByLabel('Choices').fill('billing\nsupport');
    await box.getByRole('button', { name: 'Add field' }).click();
    await analysisField(2).getByLabel('Name').fill('callback_wanted');
    await analysisField(2).getByLabel('Type').selectOption('boolean');
    await analysisField(2).getByLabel('Description (optional)').fill('Whether the caller asked to be called back');
    await box.getByRole('button', { name: 'Save settings' }).click();
    const language = box.getByLabel('Language');
    await visible((await errorOf(language)).filter({ hasText: /./ }), 'the API\'s error beside the language');
    ok(await language.getAttribute('aria-invalid') === 'true', 'the language is not marked invalid');
    const number = tool(2).getByLabel('Number');
    await visible((await errorOf(number)).filter({ hasText: /./ }), 'the API\'s error beside the transfer number');
    await check(page, 'agent-settings-errors');
    const a = await agent();
    ok(a.language === null && a.tools.length === 0, `the refused settings were saved: ${JSON.stringify(a)}`);
    await noXss();
  });

  await step('agents: runtime settings saved, kept after a reload, a new version', async () => {
    const box = settingsBox();
    const before = (await instructions()).version;
    await box.getByLabel('Language').fill('en-US');
    await tool(2).getByLabel('Number').fill('+14155550132');
    await box.getByRole('button', { name: 'Save settings' }).click();
    await visible(page.getByRole('status').filter({ hasText: 'Settings saved as a new version' }), 'the saved message');
    const a = await agent();
    const want = {
      firstMessage, language: 'en-US',
      voice: { provider: 'elevenlabs', voiceId: 'rachel', speed: 1.25 },
      model: { provider: 'openai', name: 'gpt-4o-mini', temperature: 0.4 },
    };
    for (const [k, v] of Object.entries(want)) ok(JSON.stringify(a[k]) === JSON.stringify(v), `the API holds ${k} = ${JSON.stringify(a[k])}, not ${JSON.stringify(v)}`);
    ok(a.tools.length === 3 && a.tools[0].type === 'function' && a.tools[0].name === 'book_slot'
      && JSON.stringify(a.tools[0].parameters) === JSON.stringify(parameters) && a.tools[0].url === 'https://api.example.com/book'
      && a.tools[1].type === 'transfer_call' && a.tools[1].number === '+14155550132' && a.tools[1].description === `To a person ${XSS_SCRIPT}`
      && a.tools[2].type === 'end_call', `the API holds other tools: ${JSON.stringify(a.tools)}`);
    ok(a.postCallAnalysis.length === 2 && a.postCallAnalysis[0].type === 'enum'
      && JSON.stringify(a.postCallAnalysis[0].choices) === '["billing","support"]'
      && a.postCallAnalysis[1].name === 'callback_wanted' && a.postCallAnalysis[1].type === 'boolean',
    `the API holds other analysis fields: ${JSON.stringify(a.postCallAnalysis)}`);
    settingsVersion = (await instructions()).version;
    ok(settingsVersion === before + 1, `the settings change made version ${settingsVersion}, not ${before + 1}`);
    await visible(page.getByText(`Version ${settingsVersion}`, { exact: true }), 'the new version in the instructions status');
    await noXss();
    await page.reload();
    await visible(settingsBox().getByRole('button', { name: 'Save settings' }), 'the settings form after a reload');
    ok(await settingsBox().getByLabel('Language').inputValue() === 'en-US', 'the language is not kept after a reload');
    ok(await settingsBox().getByLabel('First message (optional)').inputValue() === firstMessage, 'the first message is not kept');
    ok(await settingsBox().getByLabel('Speed').inputValue() === '1.25', 'the speed is not kept');
    ok(await tool(2).getByLabel('Number').inputValue() === '+14155550132', 'the transfer number is not kept');
    ok(JSON.parse(await tool(1).getByLabel('Parameters (JSON Schema)').inputValue()).required[0] === 'day', 'the parameters are not kept');
    ok(await analysisField(1).getByLabel('Choices').inputValue() === 'billing\nsupport', 'the choices are not kept');
    ok(await tool(3).getByLabel('Type').inputValue() === 'end_call', 'the end-call tool is not kept');
    // Saving the same settings again sends nothing and makes no version.
    await settingsBox().getByRole('button', { name: 'Save settings' }).click();
    await visible(page.getByRole('status').filter({ hasText: 'The settings have not changed' }), 'the unchanged message');
    ok((await instructions()).version === settingsVersion, 'saving unchanged settings made a version');
    await check(page, 'agent-settings');
    await noXss();
  });

  await step('agents: the comparison shows the settings difference; restoring an older version brings its settings back', async () => {
    const older = settingsVersion - 1;
    await page.getByRole('link', { name: `Compare version ${older} with the current version` }).click();
    await visible(page.getByRole('heading', { name: `Version ${older} compared with the current version` }), 'the comparison');
    const diff = page.getByRole('list', { name: `Line differences of the runtime settings, version ${older} to current` });
    await visible(diff.locator('li[data-diff="add"]', { hasText: '"language": "en-US"' }), 'the language added in the settings diff');
    await visible(diff.locator('li[data-diff="del"]', { hasText: '"language": null' }), 'the language removed in the settings diff');
    await visible(diff.locator('li[data-diff="add"]', { hasText: XSS_SCRIPT }), 'the tool description, as text');
    const text = page.getByRole('list', { name: `Line differences of the instructions, version ${older} to current` });
    ok(await text.locator('li[data-diff="add"], li[data-diff="del"]').count() === 0, 'the instructions differ, yet only the settings changed');
    await check(page, 'agent-settings-diff');
    await page.getByRole('button', { name: `Restore version ${older}` }).first().click();
    const dlg = page.getByRole('dialog');
    await dlg.getByRole('button', { name: 'Restore' }).click();
    await hidden(dlg, 'the confirmation');
    await visible(page.getByText(`Version ${settingsVersion + 1}`, { exact: true }), 'the restored version');
    const a = await agent();
    ok(a.language === null && a.voice === null && a.tools.length === 0 && a.postCallAnalysis.length === 0,
      `after restoring version ${older} the API holds settings: ${JSON.stringify(a)}`);
    try {
      await page.waitForFunction(() => document.querySelector('input[name="language"]')?.value === '', null, { timeout: T });
    } catch { fail('the settings form does not show the restored (empty) language'); }
    await visible(settingsBox().getByText('No tools: the agent only talks.'), 'no tools after the restore');
    // The version with the settings is in the history, marked as a change of the settings
    // alone (its text is the one before it), and the one before it is not (issue 55).
    const settingsRow = page.locator(`tr[data-version="${settingsVersion}"]`);
    await visible(settingsRow.getByText('Settings only', { exact: true }), `"Settings only" on version ${settingsVersion}`);
    ok(await page.locator(`tr[data-version="1"]`).getByText('Settings only', { exact: true }).count() === 0, 'version 1 is marked as a settings change');
    // Restored again, they come back.
    await page.getByRole('button', { name: `Restore version ${settingsVersion}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Restore' }).click();
    await hidden(page.getByRole('dialog'), 'the confirmation');
    await visible(tool(3), 'the tools back after restoring the version that had them');
    ok((await agent()).language === 'en-US', 'restoring the settings version did not bring the language back');
    await noXss();
  });

  await step('agents: "Try it" chats with the agent: its first message, the search, the streamed reply as text, at 1280 and 390 px', async () => {
    const kb = await w.api('POST', '/knowledgebase', { name: `Try KB ${rand}` });
    ok(kb.status === 201, `POST /v1/knowledgebase answered ${kb.status}: ${JSON.stringify(kb.body)}`);
    // U+2028 is a line end to a JavaScript regular expression, and JSON leaves it unescaped:
    // the portal's reading of the events must not break on it.
    const answer = `Monday to Friday, 9 am to 5 pm.\u2028Park at level 2. ${XSS_IMG}`;
    const ref = await w.api('POST', `/knowledgebase/${kb.body.data.id}/references`, { question: 'When is the clinic open?', answer });
    ok(ref.status === 201, `POST a reference answered ${ref.status}: ${JSON.stringify(ref.body)}`);
    const created = await w.api('POST', '/agents', {
      name: `Ada ${rand}`, type: 'chat', knowledgebaseId: kb.body.data.id,
      instructions: 'Answer patients kindly.', firstMessage: `Hello, this is Ada ${XSS_SCRIPT}`,
    });
    ok(created.status === 201, `POST /v1/agents answered ${created.status}: ${JSON.stringify(created.body)}`);
    const tryId = created.body.data.id;
    const balance = async () => (await w.api('GET', '/me')).body.data.credits.balance;
    const before = await balance();
    await page.goto(`/agents/${tryId}`);
    const chat = page.locator('section').filter({ has: page.getByRole('heading', { name: 'Try it' }) });
    const log = chat.getByRole('log', { name: 'Conversation with the agent' });
    await visible(log.getByText(`Hello, this is Ada ${XSS_SCRIPT}`), 'the first message, as text');
    await chat.getByLabel('Your message').fill('When are you open?');
    await chat.getByRole('button', { name: 'Send' }).click();
    await visible(log.getByText(`From what I know: ${answer}`), 'the streamed reply with the retrieved answer, as text');
    await visible(log.getByText('Searched the knowledge base (1 credit): 1 entry found'), 'the sources note');
    await log.getByText('Searched the knowledge base (1 credit): 1 entry found').click();
    await visible(log.getByText('When is the clinic open?'), 'the entry the search found');
    ok(await balance() === before - 1, 'the turn\'s search did not cost one credit');
    await visible(chat.getByRole('button', { name: 'Send' }), 'Send, ready for the next message');
    await noXss();
    await check(page, 'agents-try');
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await chat.getByLabel('Your message').scrollIntoViewIfNeeded();
      await page.screenshot({ path: path.join(SHOTS, 'phone-agents-try.png') });
      const wide = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      ok(wide <= 0, `the page scrolls sideways by ${wide} px at 390 px with the chat`);
    } finally {
      await page.setViewportSize({ width: 1280, height: 820 });
    }
    await chat.getByRole('button', { name: 'Start over' }).click();
    await hidden(log.getByText(`From what I know: ${answer}`), 'the reply after Start over');
    await visible(log.getByText(`Hello, this is Ada ${XSS_SCRIPT}`), 'the first message again');
  });

  await step('agents: a viewer reads the agent and its history but is offered no change', async () => {
    const inv = await w.api('POST', '/members/invitations', { email: `agents-viewer-${rand}@portal-dev.example`, role: 'viewer' });
    ok(inv.status === 201, `POST /v1/members/invitations answered ${inv.status}: ${JSON.stringify(inv.body)}`);
    const ctx = await newContext(w.browser, 'agents-viewer');
    try {
      const vp = track(await ctx.newPage());
      const token = decodeURIComponent(new URL(inv.body.data.url).pathname.split('/').pop());
      const res = await vp.request.post('/v1/auth/accept-invite', { data: { token, password: password(), firstName: 'Vera', lastName: 'Viewer' } });
      ok(res.ok(), `accepting the viewer invitation answered ${res.status()}: ${await res.text()}`);
      await vp.goto('/agents');
      await visible(vp.getByRole('link', { name, exact: true }), 'the agent in the list');
      ok(await vp.getByRole('heading', { name: 'Create an agent' }).count() === 0, 'a viewer is offered the create form');
      ok(await vp.getByRole('button', { name: /^Delete agent/ }).count() === 0, 'a viewer is offered Delete');
      await vp.goto(`/agents/${id}`);
      const box = await visible(vp.getByLabel('System prompt'), 'the instructions, read-only');
      ok(await box.getAttribute('readonly') !== null, 'the viewer\'s instructions are editable');
      await visible(vp.getByRole('row', { name: /Version 3/ }), 'the history');
      // The settings, as text (no form).
      const facts = vp.locator('section').filter({ has: vp.getByRole('heading', { name: 'Runtime settings' }) });
      await visible(facts.getByText('book_slot', { exact: true }), 'the function tool in the viewer\'s settings');
      await visible(facts.getByText(`: To a person ${XSS_SCRIPT}`), 'the tool description, as text');
      ok(await facts.getByRole('textbox').count() === 0, 'a viewer is offered the settings fields');
      for (const b of ['Save instructions', 'Save changes', 'Save settings', 'Add tool', 'Delete agent', 'Restore version 1', 'Send']) {
        ok(await vp.getByRole('button', { name: b }).count() === 0, `a viewer is offered "${b}"`);
      }
      ok(await vp.evaluate(() => window.__xss) === undefined, 'a hostile string ran as markup for the viewer');

      // Issue 40, defect 2: where a writer gets a create form, a viewer got the word "false"; a
      // viewer was told to open an agent to edit it, and offered the agency's subteams.
      await vp.goto('/agents');
      await visible(vp.getByText(/Open one to read its instructions/), 'the viewer\'s lead on /agents');
      for (const path of ['/knowledge', '/contacts', '/settings/tags', '/settings/custom-fields']) {
        await vp.goto(path);
        await visible(vp.locator('main h1'), `the heading of ${path}`);
        await vp.waitForFunction(() => !document.querySelector('main [aria-busy="true"]'), null, { timeout: T });
        const text = await vp.locator('main').innerText();
        ok(!/\bfalse\b/.test(text), `${path} shows the word "false" to a viewer: ${text.slice(0, 300)}`);
      }
      ok(await vp.getByRole('link', { name: 'Subteams', exact: true }).count() === 0, 'a viewer is offered the Subteams page');
      ok(await vp.getByLabel('Acting on').count() === 0, 'a viewer is offered the "Acting on" switcher');
    } finally {
      track(page);
      await ctx.close();
    }
  });

  // Issue 40, defect 3: a malformed id was a "Validation error" with a "Try again" that could
  // never work, and a well-formed unknown one offered the same.
  await step('bad links: a malformed or unknown id is a page that does not exist, with a way back', async () => {
    await page.goto('/calls/does-not-exist');
    await visible(page.getByText(/There is nothing at this address/), 'the not-found text of a malformed call id');
    await visible(page.getByRole('link', { name: 'Back to Calls' }), 'the way back to the calls');
    ok(await page.getByRole('button', { name: 'Try again' }).count() === 0, 'a malformed id is offered "Try again"');
    await page.goto('/knowledge/nope');
    await visible(page.getByRole('link', { name: 'Back to Knowledge' }), 'the way back to the knowledge bases');
    await page.goto('/knowledge/00000000-0000-4000-8000-000000000000');
    await visible(page.getByRole('link', { name: 'Back', exact: true }), 'the way back from an unknown knowledge base');
    ok(await page.getByRole('button', { name: 'Try again' }).count() === 0, 'an unknown knowledge base is offered "Try again"');
    await check(page, 'knowledge-not-found');
  });

  await step('agents: an unknown agent id says so', async () => {
    await page.goto('/agents/00000000-0000-4000-8000-000000000000');
    await visible(page.getByRole('heading', { level: 1, name: 'Agent not found' }), 'the not-found heading');
    await visible(page.getByText(/There is no agent with the id/), 'the not-found message');
    await visible(page.getByRole('link', { name: 'Go to the agents' }), 'the way back');
    await check(page, 'agent-not-found');
    await noXss();
    await page.goto('/agents/not-an-id');
    await visible(page.getByRole('heading', { level: 1, name: 'Agent not found' }), 'the not-found heading for a malformed id');
    await noXss();
  });

  await step('agents: delete an agent in the UI (confirmed)', async () => {
    const doomed = `Doomed ${rand} ${XSS_IMG}`;
    const r = await w.api('POST', '/agents', { name: doomed, type: 'phone' });
    ok(r.status === 201, `POST /v1/agents answered ${r.status}: ${JSON.stringify(r.body)}`);
    const doomedId = r.body.data.id;
    await page.goto('/agents?type=phone');
    await atPath(page, '/agents');
    const link = page.getByRole('link', { name: doomed, exact: true });
    await visible(link, 'the new agent in the list filtered to phone agents (its name as text)');
    ok(await page.getByRole('link', { name, exact: true }).count() === 0, 'the chat agent is listed under the phone filter');
    await page.getByRole('button', { name: `Delete agent ${doomed}`, exact: true }).click();
    const dlg = page.getByRole('dialog');
    await visible(dlg.getByRole('heading', { name: `Delete the agent “${doomed}”?` }), 'the confirmation');
    await dlg.getByRole('button', { name: 'Delete agent' }).click();
    await hidden(dlg, 'the confirmation');
    await hidden(link, 'the deleted agent in the list');
    const gone = await w.api('GET', `/agents/${doomedId}`);
    ok(gone.status === 404, `GET of the deleted agent answered ${gone.status}`);
    await noXss();
  });
}
