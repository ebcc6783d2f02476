// @ts-check
// The Switchboard portal: a small client-side router over the pages of pages-*.js.
// The gateway answers index.html for every page path, so location.pathname picks the page.
import { h, replace, navigate, onNavigate, alertBox, badge, fullName, toast, cap, noAccess } from './dom.js';
import { state, loadSession, signOut, scope, setScope, can, loadSubteams, safeNext, actingTeam, ApiError } from './api.js';
import * as auth from './pages-auth.js';
import * as team from './pages-team.js';
import * as agents from './pages-agents.js';
import * as knowledge from './pages-knowledge.js';
import * as calls from './pages-calls.js';
import * as analytics from './pages-analytics.js';
import * as contacts from './pages-contacts.js';
import * as contactImport from './pages-import.js';
import * as contactSettings from './pages-contact-settings.js';
import * as boards from './pages-boards.js';
import * as webhooks from './pages-webhooks.js';
import * as security from './pages-security.js';
import * as profile from './pages-profile.js';
// Asks the person to confirm it is them when a change to their factors or sessions needs it.
import './reauth.js';

/** @typedef {import('./api.js').Session} Session */
/** @typedef {import('./api.js').TeamRef} TeamRef */

/**
 * allow: the permission (api.js `can`) a page needs; nav: shown in the side navigation.
 * @typedef {object} Page
 * @property {string} title
 * @property {string} [nav]
 * @property {Parameters<typeof can>[0]} [allow]
 * @property {boolean} [public] shown signed out
 * @property {boolean} [guestOnly] a signed-in person goes on to `next`
 * @property {boolean} [showDenied] the page itself says what the role cannot do
 * @property {(ctx: import('./dom.js').PageContext) => void} page
 */
/**
 * A page at an address: `path` is a path, or a pattern whose groups are the page's params.
 * @typedef {Page & {path: string | RegExp}} Route
 */
/**
 * The address of one resource of a list: `/<list>/<uuid>`. Any other id matches no route and is
 * answered as a page that does not exist, not as an error to try again.
 * @param {string} list
 */
function idPath(list) {
  return new RegExp(`^\\/${list}\\/([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`);
}

/** @type {Route[]} */
const ROUTES = [
  { path: '/sign-in', title: 'Sign in', public: true, guestOnly: true, page: auth.signIn },
  { path: '/sign-up', title: 'Create a team', public: true, guestOnly: true, page: auth.signUp },
  { path: '/sign-in/sso', title: 'Single sign-on', public: true, guestOnly: true, page: auth.ssoSignIn },
  { path: '/forgot', title: 'Reset your password', public: true, guestOnly: true, page: auth.forgot },
  { path: '/sso/callback', title: 'Signing in', public: true, page: auth.ssoCallback },
  { path: /^\/invite\/([^/]+)$/, title: 'Accept your invitation', public: true, page: auth.invite },
  { path: /^\/reset\/([^/]+)$/, title: 'Choose a new password', public: true, page: auth.reset },
  { path: /^\/confirm-email\/([^/]+)$/, title: 'Confirm your e-mail address', public: true, page: profile.confirmEmail },
  { path: '/', title: 'Overview', nav: 'Overview', page: team.overview },
  { path: '/agents', title: 'Agents', nav: 'Agents', page: agents.list },
  // The agent page says itself that an agent is not found, malformed ids included.
  { path: /^\/agents\/([^/]+)$/, title: 'Agent', page: agents.detail },
  { path: '/knowledge', title: 'Knowledge', nav: 'Knowledge', page: knowledge.list },
  { path: idPath('knowledge'), title: 'Knowledge base', page: knowledge.detail },
  { path: '/calls', title: 'Calls', nav: 'Calls', page: calls.callList },
  { path: idPath('calls'), title: 'Call', page: calls.callDetail },
  { path: '/chats', title: 'Chats', nav: 'Chats', page: calls.chatList },
  { path: idPath('chats'), title: 'Chat', page: calls.chatDetail },
  { path: '/analytics', title: 'Analytics', nav: 'Analytics', page: analytics.analytics },
  { path: '/contacts', title: 'Contacts', nav: 'Contacts', page: contacts.list },
  { path: '/contacts/import', title: 'Import contacts', allow: 'write', page: contactImport.importPage },
  { path: idPath('contacts'), title: 'Contact', page: contacts.detail },
  { path: '/boards', title: 'Boards', nav: 'Boards', page: boards.list },
  { path: idPath('boards'), title: 'Board', page: boards.detail },
  { path: '/settings/tags', title: 'Tags', nav: 'Tags', page: contactSettings.tags },
  { path: '/settings/custom-fields', title: 'Custom fields', nav: 'Custom fields', page: contactSettings.customFields },
  { path: '/webhooks', title: 'Webhooks', nav: 'Webhooks', allow: 'webhooks', page: webhooks.list },
  { path: idPath('webhooks'), title: 'Webhook', allow: 'webhooks', page: webhooks.detail },
  { path: '/keys', title: 'API keys', nav: 'API keys', allow: 'keys', page: team.keys },
  { path: '/members', title: 'Members', nav: 'Members', allow: 'members', page: team.members },
  { path: '/subteams', title: 'Subteams', nav: 'Subteams', allow: 'subteams', page: team.subteams, showDenied: true },
  { path: '/audit-log', title: 'Audit log', nav: 'Audit log', allow: 'audit', page: team.auditLog },
  { path: '/settings/profile', title: 'Profile', nav: 'Profile', page: profile.profile },
  { path: '/settings/security', title: 'Security', nav: 'Security', page: security.security },
];
/** @type {Page} */
const NOT_FOUND = { title: 'Page not found', page: notFound };

/**
 * @param {string} path
 * @returns {{route: Route | null, params: string[]}}
 */
function match(path) {
  for (const route of ROUTES) {
    if (typeof route.path === 'string' ? route.path === path : route.path.test(path)) {
      const m = typeof route.path === 'string' ? [] : (route.path.exec(path) ?? []).slice(1).map(decodeURIComponent);
      return { route, params: m };
    }
  }
  return { route: null, params: [] };
}

/** The element index.html gives the portal. */
const appRoot = () => /** @type {HTMLElement} */ (document.getElementById('app'));

const brand = () => h('a', { class: 'brand', href: '/' },
  h('img', { src: '/assets/logo.svg', alt: '', width: 28, height: 28 }), h('span', null, 'Switchboard'));

// Aborted when another page is shown: pages stop their polling and late answers with it.
let leaving = new AbortController();

/** Shows the page of the address. @param {{focus?: boolean}} [how] focus: on the page's title */
function render({ focus = false } = {}) {
  leaving.abort();
  leaving = new AbortController();
  const signal = leaving.signal;
  const path = location.pathname.replace(/\/+$/, '') || '/';
  const query = new URLSearchParams(location.search);
  const { route, params } = match(path);
  const s = state.session;
  document.querySelectorAll('dialog').forEach((d) => d.remove());

  if (route?.public || (!route && !s)) {
    if (route?.guestOnly && s) return navigate(safeNext(query.get('next')), { replace: true });
    return publicShell(route || NOT_FOUND, { params, query, signal }, focus);
  }
  if (!s) {
    const here = path + location.search;
    return navigate(here === '/' ? '/sign-in' : `/sign-in?next=${encodeURIComponent(here)}`, { replace: true });
  }
  // A team that requires a second factor lets a person without one only set one up.
  if (s.secondFactorNeeded && path !== '/settings/security') return navigate('/settings/security', { replace: true });
  if (query.has('teamId')) {
    teamFromAddress(query).finally(() => render({ focus }));
    return undefined;
  }
  return appShell(route || NOT_FOUND, { params, query, signal }, focus);
}

/**
 * A link that names a team with `?teamId=` (the calls export's links to a client subteam's
 * calls) opens in that team: the agency's own, or one of its subteams; any other id is
 * ignored. The parameter leaves the address, so that the team chosen afterwards holds.
 * @param {URLSearchParams} query
 */
async function teamFromAddress(query) {
  const wanted = query.get('teamId');
  const rest = new URLSearchParams(query);
  rest.delete('teamId');
  const q = rest.toString();
  history.replaceState(history.state, '', `${location.pathname}${q ? `?${q}` : ''}${location.hash}`);
  const own = state.session?.team;
  if (!own || !wanted) return;
  if (wanted === own.id) { setScope(own); return; }
  const subteams = await loadSubteams().catch(() => []);
  const team = subteams.find((t) => t.id === wanted);
  if (team) setScope(team);
}

/**
 * Every page is `page(ctx)`, ctx being {view, params, query, signal}: the element to fill, the
 * path's captures, the address's query, and the signal aborted when the page is left.
 */
/**
 * @param {Page} route
 * @param {Omit<import('./dom.js').PageContext, 'view'>} ctx
 * @param {boolean} focus
 */
function publicShell(route, { params, query, signal }, focus) {
  const view = h('div', { class: 'view' });
  const title = h('h1', { tabindex: '-1' }, route.title);
  replace(appRoot(),
    h('header', { class: 'public-top' }, brand()),
    h('main', { id: 'main', class: 'public-main', tabindex: '-1' }, h('div', { class: 'auth-card' }, title, view)));
  document.title = `${route.title} · Switchboard`;
  route.page({ view, params, query, signal });
  if (focus) title.focus();
}

/**
 * The page of a signed-in person (render() shows it only with a session).
 * @param {Page} route
 * @param {Omit<import('./dom.js').PageContext, 'view'>} ctx
 * @param {boolean} focus
 */
function appShell(route, { params, query, signal }, focus) {
  const s = /** @type {Session} */ (state.session);
  const view = h('div', { class: 'view' });
  const title = h('h1', { tabindex: '-1' }, route.title);
  const sc = scope();
  replace(appRoot(),
    h('a', { class: 'skip', href: '#main' }, 'Skip to content'),
    h('header', { class: 'topbar' },
      brand(),
      menuButton(),
      h('div', { class: 'topbar-menu', id: 'topbar-menu' },
        teamSwitcher(),
        h('div', { class: 'user' },
          h('a', { class: 'user-name', href: '/settings/profile', title: 'Your profile' }, fullName(s.user)),
          badge(cap(s.role)),
          h('button', { type: 'button', class: 'btn secondary small', onclick: doSignOut }, 'Sign out')))),
    h('div', { class: 'layout' },
      h('nav', { class: 'sidebar', id: 'sidebar', 'aria-label': 'Main' },
        h('ul', null, ROUTES.filter((r) => r.nav && (!r.allow || can(r.allow))).map((r) => h('li', null,
          h('a', { href: r.path, 'aria-current': navCurrent(r, route) }, r.nav))))),
      h('main', { id: 'main', tabindex: '-1' },
        sc && h('div', { class: 'scope-banner' },
          h('p', null, 'You are acting on the subteam ', h('strong', null, sc.name), ` of ${s.team.name}: this page shows and changes it.`),
          h('button', { type: 'button', class: 'btn secondary small', onclick: () => team.switchTeam(s.team) },
            `Back to ${s.team.name}`)),
        title,
        view)));
  document.title = `${route.title} · Switchboard`;
  const ctx = { view, params, query, signal };
  if (route.allow && !can(route.allow) && !route.showDenied) noAccess(ctx, actingTeam().name);
  else route.page(ctx);
  showWhenLoaded(view, signal);
  if (focus) title.focus();
}

/** How long a page's content may stay hidden while its first answers arrive. */
const SETTLE_MS = 1200;

/**
 * A page's sections load in several answers; drawn one by one, each would push down what is
 * below it (Lighthouse measured a layout shift of 0.58 on /settings/security). The view stays
 * hidden until none of its loaders is busy, at most SETTLE_MS, and then shows at once. Loaders
 * made by a loader's content are busy from the start, so they hold the view too.
 * @param {HTMLElement} view
 * @param {AbortSignal} signal
 */
function showWhenLoaded(view, signal) {
  // Forms and buttons are busy while they send, not while the page loads.
  const busy = () => view.querySelector('[aria-busy="true"]:not(form, button)');
  if (!busy()) return;
  view.classList.add('settling');
  const show = () => {
    observer.disconnect();
    clearTimeout(timer);
    view.classList.remove('settling');
  };
  const observer = new MutationObserver(() => { if (!busy()) show(); });
  observer.observe(view, { subtree: true, childList: true, attributes: true, attributeFilter: ['aria-busy'] });
  const timer = setTimeout(show, SETTLE_MS);
  signal.addEventListener('abort', show, { once: true });
}

/**
 * On a phone the navigation, the team switcher and the account sit behind this button (the
 * styles show them open on wider screens). Every page change draws a new shell, closed.
 */
function menuButton() {
  const button = h('button', {
    type: 'button', class: 'btn secondary small menu-toggle', 'aria-expanded': 'false', 'aria-controls': 'sidebar topbar-menu',
  }, h('span', { class: 'menu-icon', 'aria-hidden': 'true' }), 'Menu');
  const app = appRoot();
  const toggle = (/** @type {boolean} */ open) => {
    button.setAttribute('aria-expanded', String(open));
    app.classList.toggle('menu-open', open);
  };
  app.classList.remove('menu-open');
  button.addEventListener('click', () => toggle(button.getAttribute('aria-expanded') !== 'true'));
  app.onkeydown = (ev) => {
    if (ev.key === 'Escape' && app.classList.contains('menu-open')) {
      toggle(false);
      button.focus();
    }
  };
  return button;
}

// The section a page belongs to is marked too: /calls/{id} under Calls.
/** @param {Route} r @param {Page} route */
function navCurrent(r, route) {
  if (r === route) return 'page';
  const here = location.pathname;
  return r.path !== '/' && here.startsWith(`${r.path}/`) ? 'location' : null;
}

/** @type {((list: TeamRef[]) => void) | null} */
let fillSwitcher = null; // the switcher on the page, refilled when a subteam is created
document.addEventListener('subteams-changed', () => fillSwitcher?.(state.subteams || []));

/** The team chip, or for an agency the switcher of the team acted on (in appShell: signed in). */
function teamSwitcher() {
  const s = /** @type {Session} */ (state.session);
  fillSwitcher = null;
  if (!can('subteams')) {
    return h('p', { class: 'team-chip' }, h('span', { class: 'muted' }, 'Team '), h('strong', null, s.team.name));
  }
  const sc = scope();
  const select = h('select', { id: 'team-switch', class: ['compact', sc && 'on-subteam'] });
  /** @param {TeamRef[]} list */
  const fill = (list) => {
    const teams = [...list];
    if (sc && !teams.some((t) => t.id === sc.id)) teams.unshift(sc);
    replace(select,
      h('option', { value: s.team.id }, `${s.team.name} (agency)`),
      teams.length > 0 && h('optgroup', { label: 'Subteams' }, teams.map((t) => h('option', { value: t.id }, t.name))));
    select.value = sc ? sc.id : s.team.id;
  };
  fill(state.subteams || []);
  const refresh = () => loadSubteams().then(fill).catch(() => { /* keep what we have */ });
  refresh();
  fillSwitcher = fill;
  select.addEventListener('change', () => {
    const id = select.value;
    const picked = id === s.team.id ? s.team : (state.subteams || []).find((t) => t.id === id) || sc;
    if (picked) team.switchTeam(picked);
  });
  return h('div', { class: 'team-switch' }, h('label', { for: 'team-switch' }, 'Acting on'), select);
}

/** @param {MouseEvent} ev */
async function doSignOut(ev) {
  const btn = /** @type {HTMLButtonElement} */ (ev.currentTarget);
  btn.disabled = true;
  try {
    await signOut();
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 401) {
      toast(`Could not sign out: ${err instanceof Error ? err.message : err}`);
      btn.disabled = false;
      return;
    }
    state.session = null;
  }
  navigate('/sign-in');
}

/** @param {import('./dom.js').PageContext} ctx */
function notFound({ view }) {
  // The list the address is under, when it is one: /calls/<a wrong id> leads back to /calls.
  const list = state.session && ROUTES.find((r) => typeof r.path === 'string' && r.path !== '/' && r.nav
    && location.pathname.startsWith(`${r.path}/`));
  const back = list ? h('a', { href: list.path }, `Back to ${list.title}`)
    : h('a', { href: state.session ? '/' : '/sign-in' }, state.session ? 'Go to the overview' : 'Sign in');
  view.append(h('p', null, 'There is nothing at this address: the link is wrong, or what it showed was deleted.'),
    h('p', null, back));
}

// Links inside the app change the page without reloading it.
/** @param {MouseEvent} ev */
function onClick(ev) {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const target = /** @type {Element} */ (ev.target);
  const a = /** @type {HTMLAnchorElement | null} */ (target.closest && target.closest('a[href]'));
  if (!a || a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || /^\/(v1|mcp|assets|healthz)(\/|$)/.test(url.pathname)) return;
  if (url.hash && url.pathname === location.pathname && url.search === location.search) return;
  ev.preventDefault();
  if (url.pathname + url.search !== location.pathname + location.search) navigate(url.pathname + url.search);
}

async function boot() {
  try {
    await loadSession();
  } catch (err) {
    const retry = h('button', { type: 'button', class: 'btn primary', onclick: boot }, 'Try again');
    replace(appRoot(),
      h('header', { class: 'public-top' }, brand()),
      h('main', { id: 'main', class: 'public-main' }, h('div', { class: 'auth-card' },
        h('h1', null, 'Switchboard is not reachable'),
        alertBox(err instanceof Error ? err.message : String(err), { action: retry }))));
    document.title = 'Not reachable · Switchboard';
    return;
  }
  render();
}

onNavigate(render);
window.addEventListener('popstate', () => render({ focus: true }));
document.addEventListener('click', onClick);
boot();
