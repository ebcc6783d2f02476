// @ts-check
// Usage charts: a bar per day as SVG (elements made with createElementNS; sizes are attributes,
// colours classes, so the CSP needs no inline style), each with a table of the same numbers for
// screen readers and for whoever wants the figures.
import { h, num, uid, svg } from './dom.js';

const shortDay = new Intl.DateTimeFormat(undefined, { day: 'numeric', month: 'short', timeZone: 'UTC' });
/** @typedef {{date: string, [field: string]: any}} Day a day of GET /v1/usage?interval=day */

/** @param {string} date YYYY-MM-DD */
const dayLabel = (date) => shortDay.format(new Date(`${date}T00:00:00Z`));

/**
 * "1 credit", "2 credits", "0 credits": `unit` is the plural, `one` the singular (default: the
 * unit without its final s; "min" stays "min").
 * @param {(n: number) => string} format @param {string} unit @param {string} [one]
 */
const counted = (format, unit, one = unit.replace(/s$/, '')) => (/** @type {number} */ n) => `${format(n)} ${n === 1 ? one : unit}`;

/**
 * A bar chart of days[i][field]: {title, field, unit, days: [{date, ...}]}. The total is in the
 * heading; each bar has a <title> (its tooltip). A chart of nothing says so where the scale
 * would be, instead of a scale up to 1.
 * @param {{title: string, field: string, unit: string, one?: string, days: Day[], format?: (n: number) => string}} spec
 */
export function barChart({ title, field, unit, one, days, format = num }) {
  const W = 300; const H = 120; const PAD = 16;
  const label = counted(format, unit, one);
  const values = days.map((d) => Number(d[field]) || 0);
  const top = Math.max(0, ...values);
  const max = Math.max(1, top);
  const step = W / Math.max(1, days.length);
  const barW = Math.max(1, step - 2);
  const id = uid('chart');
  const bars = days.map((d, i) => {
    const v = values[i];
    const bh = v ? Math.max(2, (v / max) * (H - PAD * 2)) : 0; // a day with anything shows
    return svg('rect', { x: (i * step + 1).toFixed(1), y: (H - PAD - bh).toFixed(1), width: barW.toFixed(1), height: bh.toFixed(1), class: 'bar' },
      svg('title', null, `${dayLabel(d.date)}: ${label(v)}`));
  });
  const total = values.reduce((a, b) => a + b, 0);
  const none = `No ${title.toLowerCase()} in these ${days.length} days`;
  const first = days[0]?.date; const last = days[days.length - 1]?.date;
  return h('figure', { class: 'chart', 'aria-labelledby': id },
    h('figcaption', { id }, h('span', { class: 'chart-title' }, title), ' ', h('span', { class: 'chart-total' }, label(total))),
    svg('svg', { viewBox: `0 0 ${W} ${H}`, class: top === 0 ? 'chart-svg chart-empty' : 'chart-svg', role: 'img',
      'aria-label': top === 0 ? none : `${title} per day, at most ${label(top)}` },
      svg('line', { x1: 0, x2: W, y1: H - PAD, y2: H - PAD, class: 'axis' }),
      svg('text', { x: 0, y: H - 3, class: 'tick' }, first ? dayLabel(first) : ''),
      svg('text', { x: W, y: H - 3, class: 'tick end' }, last ? dayLabel(last) : ''),
      top === 0
        ? svg('text', { x: W / 2, y: H / 2, class: 'tick middle empty-note' }, none)
        : svg('text', { x: 0, y: 11, class: 'tick' }, label(top)),
      bars));
}

/** A small bar chart of one field per day, for a table cell: the bars and their tooltips only. */
/** @param {{label: string, field: string, unit: string, one?: string, days: Day[], format?: (n: number) => string}} spec */
export function sparkBars({ label, field, unit, one, days, format = num }) {
  const W = 120; const H = 28;
  const amount = counted(format, unit, one);
  const values = days.map((d) => Number(d[field]) || 0);
  const max = Math.max(1, ...values);
  const step = W / Math.max(1, days.length);
  return svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart-svg spark', role: 'img', 'aria-label': label },
    days.map((d, i) => {
      const bh = values[i] ? Math.max(1, (values[i] / max) * H) : 0;
      return svg('rect', { x: (i * step).toFixed(1), y: (H - bh).toFixed(1), width: Math.max(1, step - 1).toFixed(1), height: bh.toFixed(1), class: 'bar' },
        svg('title', null, `${dayLabel(d.date)}: ${amount(values[i])}`));
    }));
}

/** The same days as a table (in a <details>, closed by default). */
/** @param {Day[]} days */
export function usageTable(days) {
  return h('details', { class: 'chart-table' },
    h('summary', null, 'Show the figures as a table'),
    h('div', { class: 'table-wrap', tabindex: '0', role: 'region', 'aria-label': 'Usage per day' },
      h('table', { class: 'dense' },
        h('thead', null, h('tr', null, ['Day', 'Searches', 'Credits used', 'Calls', 'Call minutes', 'Chats'].map((t) => h('th', { scope: 'col' }, t)))),
        h('tbody', null, days.map((d) => h('tr', null,
          h('th', { scope: 'row' }, d.date),
          h('td', { class: 'num' }, num(d.searches)),
          h('td', { class: 'num' }, num(d.creditsUsed)),
          h('td', { class: 'num' }, num(d.calls)),
          h('td', { class: 'num' }, num(d.callMinutes)),
          h('td', { class: 'num' }, num(d.chats))))))));
}

/** Totals of a list of days. @param {Day[]} days */
export function totals(days) {
  const t = { searches: 0, creditsUsed: 0, calls: 0, callMinutes: 0, chats: 0 };
  for (const d of days) for (const k of /** @type {Array<keyof typeof t>} */ (Object.keys(t))) t[k] += Number(d[k]) || 0;
  t.callMinutes = Math.round(t.callMinutes * 10) / 10;
  return t;
}

const percent = new Intl.NumberFormat(undefined, { style: 'percent', maximumFractionDigits: 0 });
/** "40%" of part in whole, "—" of nothing. @param {number} part @param {number} whole */
export const share = (part, whole) => (whole > 0 ? percent.format(part / whole) : '—');

/**
 * Parts of a whole (calls by sentiment, by how they ended) as a table that is also the chart:
 * each row its name, its count, its share, and a bar of that share (hidden from screen readers,
 * which have the figures).
 * @param {{caption: string, head: string, unit?: string, items: Array<{key: string, label: string, value: number}>}} spec
 */
export function shareTable({ caption, head, unit = 'Calls', items }) {
  const total = items.reduce((a, x) => a + (Number(x.value) || 0), 0);
  const top = Math.max(1, ...items.map((x) => Number(x.value) || 0));
  return h('div', { class: 'table-wrap share-table', tabindex: '0', role: 'region', 'aria-label': caption },
    h('table', { class: 'dense' },
      h('caption', { class: 'sr-only' }, caption),
      h('thead', null, h('tr', null, [head, unit, 'Share'].map((t) => h('th', { scope: 'col' }, t)),
        h('th', { scope: 'col' }, h('span', { class: 'sr-only' }, 'Bar')))),
      h('tbody', null, items.map((x) => h('tr', { 'data-key': x.key },
        h('th', { scope: 'row' }, x.label),
        h('td', { class: 'num' }, num(x.value)),
        h('td', { class: 'num' }, share(x.value, total)),
        h('td', { class: 'share-cell' }, svg('svg', { viewBox: '0 0 100 10', preserveAspectRatio: 'none', class: 'chart-svg share-bar', 'aria-hidden': 'true' },
          svg('rect', { x: 0, y: 0, width: ((Number(x.value) || 0) / top * 100).toFixed(1), height: 10, class: 'bar' }))))))));
}
