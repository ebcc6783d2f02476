// @ts-check
// /analytics: the team's calls over a range of days (GET /v1/analytics/calls), as the runtimes
// reported them: success rate, sentiment, how calls ended, minutes and cost, per day and per
// agent. Every chart has its figures in a table too.
//
// Per agent: the API answers one series per request (`agentId`), so the page asks once for the
// team and once for each of the first MAX_AGENTS agents (by name), in parallel; a team with more
// agents is told so, and any agent can be chosen in the filter.
import { h, append, field, form, loader, table, num, navigate, section, hrefWith, enc, tile, alertBox, showFormError, errorText } from './dom.js';
import { api, actingTeam, ApiError } from './api.js';
import { barChart, sparkBars, shareTable, share } from './charts.js';
import { SENTIMENTS, REASONS, fillAgents } from './pages-calls.js';

/** @typedef {import('./dom.js').PageContext} PageContext */
/** @typedef {import('./api.js').Json} Json */
/** @typedef {{date: string, calls: number, minutes: number, successful: number, unsuccessful: number, sentiment: Record<string, number>, disconnectionReasons: Record<string, number>, cost: number}} Day */

const MAX_AGENTS = 20;
const DAYS = 30; // the API's default range: today and the 29 days before it
const minutes = new Intl.NumberFormat(undefined, { maximumFractionDigits: 1 });
/** @param {unknown} n */
const min = (n) => (typeof n === 'number' ? minutes.format(n) : '—');

/** YYYY-MM-DD of a day `back` days before today (UTC, as the API counts days). @param {number} back */
const dayBefore = (back) => new Date(Date.now() - back * 864e5).toISOString().slice(0, 10);

/**
 * The sums of a series of days.
 * @param {Day[]} days
 */
export function sum(days) {
  const t = {
    calls: 0, minutes: 0, successful: 0, unsuccessful: 0, cost: 0,
    sentiment: Object.fromEntries(Object.keys(SENTIMENTS).map((k) => [k, 0])),
    disconnectionReasons: Object.fromEntries(Object.keys(REASONS).map((k) => [k, 0])),
  };
  for (const d of days) {
    for (const k of /** @type {const} */ (['calls', 'minutes', 'successful', 'unsuccessful', 'cost'])) t[k] += Number(d[k]) || 0;
    for (const k of Object.keys(t.sentiment)) t.sentiment[k] += Number(d.sentiment?.[k]) || 0;
    for (const k of Object.keys(t.disconnectionReasons)) t.disconnectionReasons[k] += Number(d.disconnectionReasons?.[k]) || 0;
  }
  t.minutes = Math.round(t.minutes * 10) / 10;
  return t;
}

/** "75%" of the calls with an outcome that were successful. @param {{successful: number, unsuccessful: number}} t */
const successRate = (t) => share(t.successful, t.successful + t.unsuccessful);

/** @param {PageContext} ctx */
export function analytics({ view, query }) {
  const from = query.get('from') || dayBefore(DAYS - 1);
  const to = query.get('to') || dayBefore(0);
  const agentId = query.get('agentId') || '';
  const filters = form({
    className: 'inline an-filters',
    fields: [
      field({ name: 'from', label: 'From', type: 'date', value: from, hint: 'The first day (UTC)' }),
      field({ name: 'to', label: 'To', type: 'date', value: to, hint: 'The last day; at most 366 days' }),
      field({ name: 'agentId', label: 'Agent', type: 'select', options: [['', 'All agents']] }),
    ],
    submit: 'Show',
    secondary: (query.get('from') || query.get('to') || agentId) && h('a', { class: 'btn secondary', href: '/analytics' }, 'Last 30 days, all agents'),
    onSubmit: async (v) => navigate(hrefWith({ from: v.from, to: v.to, agentId: v.agentId }, '/analytics')),
  });
  filters.setAttribute('aria-label', 'Range and agent');
  filters.setAttribute('role', 'search');
  fillAgents(filters, agentId);

  const range = new URLSearchParams({ interval: 'day' });
  if (query.get('from')) range.set('from', from);
  if (query.get('to')) range.set('to', to);
  /** @param {string} agent an agent's id, or '' for the team */
  const path = (agent) => `/v1/analytics/calls?${range}${agent ? `&agentId=${enc(agent)}` : ''}`;

  const team = loader(async () => {
    let days;
    try {
      days = /** @type {Day[]} */ (await api('GET', path(agentId))) || [];
    } catch (err) {
      if (!(err instanceof ApiError) || err.status !== 400) throw err;
      if (err.details?.length) showFormError(filters, err);
      return alertBox(`This range cannot be shown${err.details?.length ? ': correct the marked fields' : ` (${errorText(err)})`}.`);
    }
    return overview(days);
  }, 'Loading analytics…');

  append(view, [
    h('p', { class: 'lead' }, 'How the calls of ', h('strong', null, actingTeam().name),
      ' went, as the runtimes reported them: outcome, sentiment, how they ended, minutes and cost.'),
    filters,
    team,
    agentId
      ? section('Per agent', h('p', { class: 'muted' }, 'One agent is chosen above: choose “All agents” to compare them.'))
      : section('Per agent', perAgent(path)),
  ]);
}

/** The range's figures: tiles, charts per day, the parts, and the days as a table. @param {Day[]} days */
function overview(days) {
  const t = sum(days);
  const known = t.successful + t.unsuccessful;
  return [
    h('div', { class: 'tiles an-tiles' },
      tile('Calls', num(t.calls), `${num(days.length)} days, ${days[0]?.date ?? ''} to ${days[days.length - 1]?.date ?? ''}`),
      tile('Success rate', successRate(t), known ? `${num(t.successful)} of ${num(known)} calls with an outcome` : 'No call has an outcome yet'),
      tile('Minutes', min(t.minutes), 'Call minutes in the range'),
      tile('Cost', num(t.cost), t.cost === 1 ? 'credit' : 'credits')),
    section('Per day',
      h('div', { class: 'charts' },
        barChart({ title: 'Calls', field: 'calls', unit: 'calls', days }),
        barChart({ title: 'Successful calls', field: 'successful', unit: 'calls', days }),
        barChart({ title: 'Minutes', field: 'minutes', unit: 'min', one: 'min', days, format: min }),
        barChart({ title: 'Cost', field: 'cost', unit: 'credits', days })),
      dayTable(days)),
    h('div', { class: 'an-parts' },
      section('Sentiment', shareTable({
        caption: 'Calls by sentiment', head: 'Sentiment',
        items: Object.entries(SENTIMENTS).map(([key, label]) => ({ key, label, value: t.sentiment[key] })),
      })),
      section('How calls ended', shareTable({
        caption: 'Calls by how they ended', head: 'Ended',
        items: Object.entries(REASONS).map(([key, label]) => ({ key, label, value: t.disconnectionReasons[key] })),
      }))),
  ];
}

/** The days as a table (folded: the charts above show them). @param {Day[]} days */
function dayTable(days) {
  const heads = ['Day', 'Calls', 'Minutes', 'Successful', 'Not successful', 'Success rate',
    ...Object.values(SENTIMENTS).map((l) => (l === 'Unknown' ? 'Sentiment unknown' : l)), 'Cost (credits)'];
  return h('details', { class: 'chart-table an-days' },
    h('summary', null, 'Show the figures per day as a table'),
    table(heads, days.map((d) => h('tr', { 'data-date': d.date },
      h('th', { scope: 'row', class: 'nowrap' }, d.date),
      h('td', { class: 'num' }, num(d.calls)),
      h('td', { class: 'num' }, min(d.minutes)),
      h('td', { class: 'num' }, num(d.successful)),
      h('td', { class: 'num' }, num(d.unsuccessful)),
      h('td', { class: 'num' }, successRate(d)),
      Object.keys(SENTIMENTS).map((k) => h('td', { class: 'num' }, num(d.sentiment?.[k] ?? 0))),
      h('td', { class: 'num' }, num(d.cost)))), { caption: 'Calls per day', dense: true, empty: 'No days in this range.' }));
}

/**
 * Each day of `team` less the same day of every series of `parts` (counts, minutes, cost,
 * outcomes), never below 0.
 * @param {Day[]} team @param {Day[][]} parts
 * @returns {Day[]}
 */
function remainder(team, parts) {
  return team.map((day, i) => {
    /** @param {(d: Day) => unknown} pick */
    const less = (pick) => Math.max(0, (Number(pick(day)) || 0) - parts.reduce((n, p) => n + (Number(p[i] && pick(p[i])) || 0), 0));
    return {
      ...day,
      calls: less((d) => d.calls),
      minutes: Math.round(less((d) => d.minutes) * 10) / 10,
      successful: less((d) => d.successful),
      unsuccessful: less((d) => d.unsuccessful),
      cost: less((d) => d.cost),
      sentiment: Object.fromEntries(Object.keys(SENTIMENTS).map((k) => [k, less((d) => d.sentiment?.[k])])),
      disconnectionReasons: Object.fromEntries(Object.keys(REASONS).map((k) => [k, less((d) => d.disconnectionReasons?.[k])])),
    };
  });
}

/** A row per agent (the first MAX_AGENTS by name), each from its own request. @param {(agent: string) => string} path */
function perAgent(path) {
  return loader(async () => {
    const agents = (/** @type {Json[] | null} */ (await api('GET', '/v1/agents')) || []).slice()
      .sort((a, b) => String(a.name).localeCompare(String(b.name)));
    const shown = agents.slice(0, MAX_AGENTS);
    const [team, ...series] = await Promise.all([path(''), ...shown.map((a) => path(a.id))]
      .map((p) => api('GET', p).catch(() => null)));
    /** @param {string} name @param {Day[]} days @param {Node} head */
    const figures = (name, days, head) => {
      const t = sum(days);
      return [head,
        h('td', { class: 'num' }, num(t.calls)),
        h('td', { class: 'num' }, min(t.minutes)),
        h('td', { class: 'num' }, successRate(t)),
        h('td', { class: 'num' }, share(t.sentiment.positive, t.calls)),
        h('td', { class: 'num' }, share(t.sentiment.negative, t.calls)),
        h('td', { class: 'num' }, num(t.cost)),
        h('td', null, sparkBars({ label: `${name}: calls per day`, field: 'calls', unit: 'calls', days }))];
    };
    const rows = shown.map((a, i) => {
      const days = series[i];
      if (!days) {
        return h('tr', null, h('th', { scope: 'row' }, h('a', { href: `/agents/${enc(a.id)}` }, a.name)),
          h('td', { colspan: 8, class: 'muted' }, 'Could not be loaded.'));
      }
      return h('tr', { 'data-agent': a.id }, figures(a.name, days,
        h('th', { scope: 'row' }, h('a', { href: hrefWith({ agentId: a.id }, `/analytics${location.search}`), title: `Only ${a.name}` }, a.name))));
    });
    const more = agents.length > shown.length;
    // The calls of no agent (or of one deleted since, or beyond the first MAX_AGENTS): the team's
    // less the rows above, so that the rows add up to the team's total (issue 55).
    if (team && series.every(Boolean)) {
      const rest = remainder(/** @type {Day[]} */ (team), /** @type {Day[][]} */ (series));
      if (sum(rest).calls > 0) {
        const name = more ? 'Other agents, or no agent' : 'No agent';
        rows.push(h('tr', { 'data-agent': '' }, figures(name, rest, h('th', { scope: 'row', title: 'Calls no agent took (or one deleted since)' }, name))));
      }
    }
    const note = h('p', { class: 'hint an-note' }, more
      ? `The first ${num(MAX_AGENTS)} of ${num(agents.length)} agents, by name: choose another in the filter above.`
      : 'Choose an agent’s name to see its figures alone.');
    return h('div', { class: 'an-per-agent' },
      table(['Agent', 'Calls', 'Minutes', 'Success rate', 'Positive', 'Negative', 'Cost (credits)', 'Calls per day'], rows,
        { caption: 'Calls per agent', dense: true, empty: 'No agents yet.' }),
      rows.length ? note : null);
  }, 'Loading the agents…');
}
