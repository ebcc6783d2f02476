// Every page on a phone (390×844) and on a laptop (1280×800), issue 40 defects 1 and 4: no page
// scrolls sideways, the navigation is a menu button on the phone, forms are one column there,
// wide tables scroll inside their own box (the calls, chats and audit log fit theirs whole, a
// card a row on the phone), and the agent history keeps Restore in view.
// A full-page screenshot of each page at each size goes to SCREENSHOT_DIR (phone-*.png,
// desktop-*.png).
import path from 'node:path';
import { SHOTS, T, ok, fail, step, visible, settled, atPath, nav } from '../harness.mjs';

const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 800 };

/** The pages to look at: every list, and one of each detail the team has. */
async function pages(w) {
  const first = async (p) => {
    const res = await w.api('GET', p);
    ok(res.status === 200, `GET /v1${p} answered ${res.status}`);
    return res.body.data?.[0]?.id;
  };
  const list = [
    ['overview', '/'], ['agents', '/agents'], ['knowledge', '/knowledge'], ['calls', '/calls'], ['chats', '/chats'], ['analytics', '/analytics'],
    ['contacts', '/contacts'], ['import', '/contacts/import'], ['boards', '/boards'], ['tags', '/settings/tags'],
    ['custom-fields', '/settings/custom-fields'], ['webhooks', '/webhooks'], ['keys', '/keys'], ['members', '/members'],
    ['subteams', '/subteams'], ['audit-log', '/audit-log'], ['security', '/settings/security'],
    ['profile', '/settings/profile'], ['not-found', '/nothing-here'],
  ];
  const details = [
    ['agent', '/agents', '/agents'], ['knowledge-base', '/knowledgebase', '/knowledge'], ['call', '/calls', '/calls'],
    ['chat', '/chats', '/chats'], ['contact', '/contacts', '/contacts'], ['board', '/boards', '/boards'],
    ['webhook', '/webhooks', '/webhooks'],
  ];
  for (const [name, api, page] of details) {
    const id = await first(api);
    if (id) list.push([name, `${page}/${id}`]);
  }
  return list;
}

/**
 * How wide the page is, and what makes it wider than the window: the elements which, hidden one
 * at a time, bring the width back (outermost first). Text that does not wrap widens a page
 * without any element's box crossing the edge, so boxes alone would not find it.
 */
function overflow(page) {
  return page.evaluate(() => {
    const root = document.documentElement;
    const out = [];
    const walk = (el, depth) => {
      for (const child of el.children) {
        if (!(child instanceof HTMLElement) || depth > 12 || out.length >= 8) continue;
        const before = child.style.display;
        child.style.display = 'none';
        const narrower = root.scrollWidth <= window.innerWidth;
        child.style.display = before;
        if (!narrower) continue;
        const cls = typeof child.className === 'string' && child.className ? `.${child.className.trim().split(/\s+/).join('.')}` : '';
        out.push(`${child.tagName.toLowerCase()}${cls} "${(child.textContent || '').trim().slice(0, 30)}"`);
        walk(child, depth + 1);
      }
    };
    if (root.scrollWidth > window.innerWidth) walk(document.body, 0);
    return { scrollWidth: root.scrollWidth, innerWidth: window.innerWidth, out: out.slice(-3) };
  });
}

async function show(page, url) {
  await page.goto(url);
  await visible(page.getByRole('heading', { level: 1 }), `the heading of ${url}`);
  await settled(page);
  await page.evaluate(() => document.fonts && document.fonts.ready);
}

/**
 * Pages whose tables show whole, without scrolling in their box, on a laptop and (as a card a
 * row) on a phone (issue 55, defect 2: the calls table was 1,139 px in 994).
 */
const WHOLE_TABLES = ['calls', 'chats', 'audit-log'];

/** The tables of the page that are wider than their box: "<caption>: <width> px in <box>". */
function tablesCut(page) {
  return page.evaluate(() => [...document.querySelectorAll('main .table-wrap')]
    .filter((box) => box.scrollWidth > box.clientWidth + 1)
    .map((box) => `${box.getAttribute('aria-label')}: ${box.scrollWidth} px in ${box.clientWidth}`));
}

/** Shows each page at `size`, screenshots it as `<prefix>-<name>.png`, fails on any wider than the window. */
async function everyPage(page, list, size, prefix) {
  await page.setViewportSize(size);
  const wide = [];
  for (const [name, url] of list) {
    await show(page, url);
    const m = await overflow(page);
    if (m.scrollWidth > m.innerWidth) wide.push(`${url}: ${m.scrollWidth} px wide in ${m.innerWidth}: ${m.out.join(', ')}`);
    if (WHOLE_TABLES.includes(name)) {
      const cut = await tablesCut(page);
      if (cut.length) wide.push(`${url}: a table scrolls in its box: ${cut.join(', ')}`);
    }
    // The top 6,000 px: a chat of hundreds of messages would make a picture too big for the
    // browser's memory (a full-page shot of it crashed the page on a loaded machine).
    const height = await page.evaluate(() => document.documentElement.scrollHeight);
    await page.screenshot({ path: path.join(SHOTS, `${prefix}-${name}.png`), fullPage: true, clip: { x: 0, y: 0, width: size.width, height: Math.min(height, 6000) } });
    // What a phone's screen shows first (the README's picture of the calls page).
    if (name === 'calls') await page.screenshot({ path: path.join(SHOTS, `${prefix}-calls-screen.png`) });
  }
  ok(!wide.length, `pages wider than ${size.width} px:\n  ${wide.join('\n  ')}`);
}

export default async function layout(w) {
  const { page } = w;
  const list = await pages(w);

  await step('on a phone (390×844) no page scrolls sideways, and each is screenshotted', async () => {
    await everyPage(page, list, PHONE, 'phone');
  });

  await step('on a phone the navigation is behind a menu button, and the forms are one column', async () => {
    await show(page, '/agents');
    const menu = page.getByRole('button', { name: 'Menu' });
    await visible(menu, 'the Menu button in the header');
    ok(await menu.getAttribute('aria-expanded') === 'false', 'the Menu button does not say it is closed (aria-expanded)');
    ok(!await nav(page).getByRole('link', { name: 'Contacts' }).isVisible(), 'the navigation shows before the menu is opened');
    await menu.click();
    ok(await menu.getAttribute('aria-expanded') === 'true', 'the opened Menu button does not say so (aria-expanded)');
    await page.screenshot({ path: path.join(SHOTS, 'phone-menu-open.png'), fullPage: false });
    await nav(page).getByRole('link', { name: 'Contacts' }).click();
    await atPath(page, '/contacts');
    ok(!await nav(page).getByRole('link', { name: 'Agents' }).isVisible(), 'the menu stays open after choosing a page');
    // Each form's fields sit one under the other: no two fields share a line.
    for (const url of ['/agents', '/contacts', '/knowledge', '/calls']) {
      await show(page, url);
      const side = await page.evaluate(() => {
        for (const form of document.querySelectorAll('main form')) {
          const boxes = [...form.querySelectorAll('.field')].filter((f) => f.getBoundingClientRect().width > 0)
            .map((f) => f.getBoundingClientRect());
          for (let i = 1; i < boxes.length; i++) {
            if (Math.abs(boxes[i].top - boxes[i - 1].top) < 2) return form.getAttribute('aria-label') || form.className;
          }
        }
        return null;
      });
      ok(!side, `${url}: the form "${side}" puts two fields side by side on a phone`);
    }
    // The create form on /agents does not lie over the first agent's link (defect 1).
    await show(page, '/agents');
    const link = page.locator('main table tbody a').first();
    if (await link.count()) {
      await link.click({ trial: true, timeout: T }).catch((e) => fail(`the first agent's link cannot be clicked on a phone: ${e.message.split('\n')[0]}`));
    }
  });

  await step('on a laptop (1280×800) no page scrolls sideways, and each is screenshotted', async () => {
    await everyPage(page, list, DESKTOP, 'desktop');
    ok(!await page.getByRole('button', { name: 'Menu' }).isVisible(), 'the Menu button shows on a laptop');
  });

  await step('a focused text field has a solid ring in the accent colour (issue 55)', async () => {
    await show(page, '/contacts');
    const search = page.getByRole('search', { name: 'Filter contacts' }).getByLabel('Search', { exact: true });
    await search.focus();
    await page.keyboard.press('End'); // keyboard focus: :focus-visible
    const ring = await search.evaluate((el) => getComputedStyle(el).boxShadow);
    // The accent, #3a47a8, unblended: rgb(58, 71, 168) without an alpha below 1.
    ok(/rgb\(58, 71, 168\) 0px 0px 0px 1px/.test(ring), `the focused field's ring is faint or missing: ${ring}`);
  });

  await step('the agent history keeps Restore inside its box at 1280×800 (defect 4)', async () => {
    // An agent whose history has versions with long first lines, as a real one would.
    const made = await w.api('POST', '/agents', { name: `History layout ${Date.now()}`, type: 'phone' });
    ok(made.status === 201, `POST /v1/agents answered ${made.status}`);
    const id = made.body.data.id;
    for (const n of [1, 2, 3]) {
      const text = `You are the receptionist of a busy dental clinic, version ${n}: greet every caller warmly and book them in.\n`.repeat(3);
      const put = await w.api('PUT', `/agents/${id}/instructions`, { instructions: text });
      ok(put.status === 200, `PUT /v1/agents/{id}/instructions answered ${put.status}`);
    }
    await show(page, `/agents/${id}`);
    const restore = page.getByRole('button', { name: /^Restore version/ });
    await visible(restore, 'a Restore button in the history');
    await page.screenshot({ path: path.join(SHOTS, 'desktop-agent-history.png'), fullPage: true });
    const fits = await restore.first().evaluate((b) => {
      const box = b.closest('.table-wrap') || b.closest('section') || document.body;
      const r = b.getBoundingClientRect();
      const o = box.getBoundingClientRect();
      return r.right <= o.right + 1 && r.left >= o.left - 1 && box.scrollWidth <= box.clientWidth;
    });
    ok(fits, 'the history table is wider than its box at 1280×800: Restore is out of sight');
  });
}
