// The signed-in person's own security: their password and their sessions (each device they are
// signed in on, ended one by one or all but this one).
import { h, field, form, loader, table, badge, time, section, toast, confirmDialog, ACTIONS, replace } from './dom.js';
import { api, startSession } from './api.js';

export function security(view) {
  let reload;
  const sessions = loader(async (again) => {
    reload = again;
    const items = await api('GET', '/v1/auth/sessions');
    return table(['Device', 'Address', 'Signed in', 'Last active', ACTIONS],
      items.map((s) => sessionRow(s, () => reload())),
      { caption: 'Your sessions', empty: 'No other session.' });
  });
  const status = h('p', { role: 'status', class: 'muted' });
  const elsewhere = h('button', {
    type: 'button', class: 'btn secondary',
    onclick: async () => {
      const done = await confirmDialog({
        title: 'Sign out everywhere else?',
        body: 'Every other browser and device signed in as you is signed out at its next request. This one stays signed in.',
        confirm: 'Sign out everywhere else',
        action: async () => {
          const r = await api('POST', '/v1/auth/sessions/end-others');
          replace(status, r.ended === 1 ? '1 other session ended.' : `${r.ended} other sessions ended.`);
        },
      });
      if (done) reload();
    },
  }, 'Sign out everywhere else');

  const password = form({
    fields: [
      field({ name: 'currentPassword', label: 'Current password', type: 'password', autocomplete: 'current-password', required: true }),
      field({
        name: 'newPassword', label: 'New password', type: 'password', autocomplete: 'new-password',
        required: true, minlength: 10, maxlength: 256, hint: '10 to 256 characters, hard to guess: a few unrelated words work well.',
      }),
    ],
    submit: 'Change password',
    className: 'stack narrow',
    onSubmit: async (v, f) => {
      // A new session replaces this one (and every other ends): its answer carries the new CSRF token.
      startSession(await api('POST', '/v1/auth/password', v));
      f.reset();
      toast('Password changed; your other sessions ended');
      reload();
    },
  });

  view.append(
    h('p', { class: 'lead' }, 'Your password, and where you are signed in.'),
    section('Password', password),
    section('Where you are signed in', h('div', null, sessions, h('div', { class: 'form-actions after-table' }, elsewhere), status)),
  );
}

function sessionRow(s, reload) {
  return h('tr', null,
    h('th', { scope: 'row' }, s.device, s.current && [' ', badge('This browser', 'accent')]),
    h('td', null, s.ip || '—'),
    h('td', null, time(s.createdAt)),
    h('td', null, time(s.lastSeenAt)),
    h('td', { class: 'actions' }, !s.current && h('button', {
      type: 'button', class: 'btn danger-quiet small', 'aria-label': `Sign out ${s.device} (${s.ip})`,
      onclick: async () => {
        const done = await confirmDialog({
          title: `Sign out ${s.device}?`,
          body: 'That browser is signed out at its next request.',
          confirm: 'Sign out',
          action: () => api('DELETE', `/v1/auth/sessions/${encodeURIComponent(s.id)}`),
        });
        if (done) { toast(`${s.device} signed out`); reload(); }
      },
    }, 'Sign out')));
}
