// @ts-check
// "Try it" on an agent's page: a chat with the agent as it is configured, its replies streamed
// from POST /v1/agents/{agentId}/test-chat. The conversation lives in the page only; each turn
// sends it whole. Everything shown (the person's words, the model's, the knowledge entries) is
// set as text, never as markup.
import { h, replace, section, alertBox, errorText, num } from './dom.js';
import { can, postEvents, ApiError } from './api.js';

/** @typedef {import('./api.js').Json} Json */
/** A message of the conversation as the API takes it. @typedef {{role: 'user' | 'agent', content: string}} Turn */

/** The person's messages a conversation may hold (the API's bound: 39 messages in all). */
const MOST_TURNS = 20;
/** The API's bound on one message, in characters. */
const MESSAGE_MAX = 2000;

/**
 * The "Try it" section of an agent's page.
 * @param {{id: string, agent: Json, signal: AbortSignal}} ctx
 */
export function trySection(ctx) {
  if (!can('write')) {
    return section('Try it', h('p', { class: 'muted' },
      'Viewers read agents but do not try them: each turn can spend a credit on a knowledge base search. A member or an admin of the team can.'));
  }
  /** @type {Turn[]} */
  let turns = [];
  /** @type {AbortController | null} */
  let running = null;
  const log = h('div', { class: 'try-log', role: 'log', 'aria-live': 'polite', 'aria-label': 'Conversation with the agent' });
  const input = /** @type {HTMLTextAreaElement} */ (h('textarea', {
    id: 'try-message', name: 'message', rows: 2, maxlength: MESSAGE_MAX, required: true,
    placeholder: 'Write as a customer would…', autocomplete: 'off',
  }));
  const send = /** @type {HTMLButtonElement} */ (h('button', { type: 'submit', class: 'btn primary' }, 'Send'));
  const restart = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Start over'));
  const status = h('p', { class: 'try-status muted', 'aria-live': 'polite' });

  /** @param {'user' | 'agent'} who @param {string} text */
  const bubble = (who, text) => {
    const el = h('div', { class: `try-msg try-${who}` },
      h('span', { class: 'try-who' }, who === 'user' ? 'You' : ctx.agent.name),
      h('p', { class: 'try-text' }, text));
    log.append(el);
    log.scrollTop = log.scrollHeight;
    return el;
  };

  const start = () => {
    running?.abort();
    running = null;
    turns = [];
    replace(log);
    const first = ctx.agent.firstMessage;
    if (first) bubble('agent', first);
    else log.append(h('p', { class: 'try-empty muted' }, 'The agent has no first message: the customer speaks first.'));
    status.textContent = ctx.agent.knowledgebase
      ? `Each message searches the knowledge base “${ctx.agent.knowledgebase.name}” first (1 credit), and the reply may use what it finds.`
      : 'The agent has no knowledge base: it answers from its instructions alone, at no credit cost.';
    input.disabled = false;
    send.disabled = false;
  };

  /** @param {string} text */
  const ask = async (text) => {
    turns.push({ role: 'user', content: text });
    bubble('user', text);
    const reply = bubble('agent', '');
    reply.classList.add('try-pending');
    const replyText = /** @type {HTMLElement} */ (reply.querySelector('.try-text'));
    replyText.textContent = 'Writing…';
    input.disabled = true;
    send.disabled = true;
    running = new AbortController();
    const mine = running;
    let written = '';
    try {
      await postEvents(`/v1/agents/${encodeURIComponent(ctx.id)}/test-chat`, { messages: turns }, (name, data) => {
        if (mine.signal.aborted) return;
        if (name === 'sources') reply.before(sourcesNote(data));
        if (name === 'delta') {
          written += data.text;
          replyText.textContent = written;
          log.scrollTop = log.scrollHeight;
        }
        if (name === 'done') written = data.reply;
      }, mine.signal);
      if (mine.signal.aborted) return;
      reply.classList.remove('try-pending');
      replyText.textContent = written || '(The agent wrote nothing.)';
      turns.push({ role: 'agent', content: written || '…' });
    } catch (err) {
      if (mine.signal.aborted) return;
      reply.remove();
      turns.pop();
      log.append(alertBox(errorText(/** @type {Error} */ (err)), { kind: err instanceof ApiError && err.status === 503 ? 'info' : 'error' }));
    } finally {
      if (!mine.signal.aborted) {
        running = null;
        const full = turns.filter((t) => t.role === 'user').length >= MOST_TURNS;
        input.disabled = full;
        send.disabled = full;
        if (full) log.append(h('p', { class: 'try-empty muted' }, `A conversation here holds ${MOST_TURNS} of your messages. Start over to go on.`));
        else input.focus();
      }
    }
  };

  const chat = h('form', {
    class: 'try-form',
    onsubmit: (/** @type {SubmitEvent} */ e) => {
      e.preventDefault();
      const text = input.value.trim();
      if (!text || running) return;
      input.value = '';
      void ask(text);
    },
  },
  h('label', { for: 'try-message', class: 'sr-only' }, 'Your message'),
  input,
  h('div', { class: 'try-actions' }, send, restart));
  input.addEventListener('keydown', (e) => {
    // Enter sends, Shift+Enter starts a new line, as in chat apps.
    if (e.key === 'Enter' && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      chat.requestSubmit();
    }
  });
  restart.addEventListener('click', start);
  ctx.signal.addEventListener('abort', () => running?.abort());
  start();
  return section('Try it',
    h('p', { class: 'try-lead muted' }, 'Talk to the agent as a customer would, with its current instructions, first message, model settings and knowledge base. Nothing here is saved as a chat.'),
    h('div', { class: 'try card' }, log, chat),
    status);
}

/**
 * What the turn's search found, above the reply that could use it.
 * @param {{results: Json[], creditsUsed: number}} data
 */
function sourcesNote(data) {
  const found = data.results.length;
  const cost = `${num(data.creditsUsed)} ${data.creditsUsed === 1 ? 'credit' : 'credits'}`;
  if (!found) return h('p', { class: 'try-sources muted' }, `Searched the knowledge base (${cost}): nothing matched.`);
  return h('details', { class: 'try-sources' },
    h('summary', null, `Searched the knowledge base (${cost}): ${found} ${found === 1 ? 'entry' : 'entries'} found`),
    h('ol', null, data.results.map((r) => h('li', null,
      h('span', { class: 'try-q' }, r.reference.question),
      h('span', { class: 'muted' }, ` · ${Math.round(r.similarity * 100)}% similar`)))));
}
