// The lifecycle drawing beside the checkout: a sequence picture of the
// client (this page), the API, the key's record and the provider, drawn as
// it happens. What the page knows comes from two places only, as for any
// client: the answers it gets, and the key-introspection route
// (GET /v1/idempotency-keys/{key}), which it reads while a request is in
// flight and while it waits on an unknown outcome. Each step is a list item
// with data-step (request, reserved, stored, point, provider-call,
// provider-answer, unknown, reconciled, answer, replayed); a replayed answer
// also carries data-replayed and a visible mark.
window.Lifecycle = (function () {
  'use strict';

  const LANES = ['client', 'api', 'record', 'provider'];
  const POLL_MS = 100;
  const list = () => document.getElementById('lifecycle');

  // What the page last saw of each key's record, to draw only changes.
  const seen = {};

  function step(name, from, to, text, attrs) {
    const li = document.createElement('li');
    li.className = 'step';
    li.dataset.step = name;
    li.dataset.from = from;
    li.dataset.to = to;
    const a = LANES.indexOf(from);
    const b = LANES.indexOf(to);
    li.style.gridColumn = Math.min(a, b) + 1 + ' / ' + (Math.max(a, b) + 2);
    li.style.setProperty('--span', Math.abs(a - b) + 1);
    if (b < a) li.classList.add('leftward');
    if (a === b) li.classList.add('self');
    const label = document.createElement('span');
    label.className = 'label';
    label.textContent = text;
    li.appendChild(label);
    for (const [k, v] of Object.entries(attrs || {})) li.dataset[k] = v;
    if (li.dataset.replayed) {
      const mark = document.createElement('mark');
      mark.className = 'replayed';
      mark.textContent = 'replayed';
      li.append(' ', mark);
    }
    list().appendChild(li);
    return li;
  }

  const short = (key) => '…' + key.slice(-6);

  // observe draws what changed in the record since it was last seen.
  function observe(key, rec) {
    const before = seen[key] || { state: null, point: null };
    if (!rec) return;
    if (before.state === null && rec.state === 'executing') {
      step('reserved', 'api', 'record', 'reserved ' + short(key) + ': executing, locked until ' +
        (rec.locked_until || '').slice(11, 19));
    }
    if (rec.recovery_point !== before.point && rec.recovery_point && rec.recovery_point !== 'started') {
      const [point, resource] = rec.recovery_point.split(':');
      step('point', 'record', 'record', 'recovery point ' + rec.recovery_point, { point: point });
      if (point.endsWith('_calling')) {
        // The intent is committed under the record's fence: only now may
        // the call go out.
        step('provider-call', 'api', 'provider', 'intent recorded; call under provider key ' + resource);
      } else if (point.endsWith('_unknown') && !before.unknownDrawn) {
        step('unknown', 'provider', 'api', 'no answer: the outcome is unknown');
        before.unknownDrawn = true;
      }
    }
    if (rec.state === 'completed' && before.state !== 'completed') {
      if (before.waitingOnUnknown) {
        step('reconciled', 'provider', 'record', 'reconciled: the outcome learned from the provider, ' +
          (rec.response ? rec.response.status : '') + ' stored');
      } else {
        step('stored', 'api', 'record', 'answer stored: completed' +
          (rec.response ? ', ' + rec.response.status : ''));
      }
    }
    seen[key] = { ...before, state: rec.state, point: rec.recovery_point };
  }

  async function read(apiKey, key) {
    try {
      const res = await fetch('/v1/idempotency-keys/' + encodeURIComponent(key), {
        headers: { Authorization: 'Bearer ' + apiKey },
      });
      return res.ok ? await res.json() : null;
    } catch {
      return null;
    }
  }

  // watch reads the key's record until stop(status) is called, drawing
  // changes; stop reads it once more, unless the answer was a 202: what
  // happens to the record after that is the reconciler's doing, which
  // outcome draws.
  function watch(apiKey, key) {
    let on = true;
    let busy = Promise.resolve();
    const tick = async () => {
      while (on) {
        busy = read(apiKey, key).then((rec) => observe(key, rec));
        await busy;
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    };
    tick();
    return async (status) => {
      on = false;
      await busy;
      if (status === 202) {
        (seen[key] || (seen[key] = { state: null, point: null })).waitingOnUnknown = true;
        return;
      }
      observe(key, await read(apiKey, key));
    };
  }

  return {
    // request draws a POST leaving the page under key.
    request(label, key) {
      const s = seen[key] || (seen[key] = { state: null, point: null });
      s.waitingOnUnknown = false; // what follows is this request's doing
      // Ids shortened, so that the arrow's label fits its lanes.
      step('request', 'client', 'api', label.replace(/(ord|pay)_\w+/g, '$1_…') + ' · key ' + short(key));
    },
    // answer draws the API's answer; a replay is marked as one.
    answer(key, status, replayed, code) {
      const s = seen[key] || (seen[key] = { state: null, point: null });
      if (status === 202 && !s.unknownDrawn) {
        step('unknown', 'provider', 'api', 'no answer: the outcome is unknown');
        s.unknownDrawn = true;
      }
      s.waitingOnUnknown = status === 202;
      const text = status + (code ? ' ' + code : '');
      if (replayed) step('replayed', 'api', 'client', text + ', the stored answer', { replayed: 'true' });
      else step('answer', 'api', 'client', text);
    },
    watch,
    // outcome reads the key's record, drawing changes, until it is
    // completed (true) or ms have passed (false).
    async outcome(apiKey, key, ms) {
      const deadline = Date.now() + ms;
      while (Date.now() < deadline) {
        const rec = await read(apiKey, key);
        observe(key, rec);
        if (rec && rec.state === 'completed') return true;
        await new Promise((r) => setTimeout(r, 4 * POLL_MS));
      }
      return false;
    },
    // clear starts a new picture: a new checkout.
    clear() {
      list().textContent = '';
      for (const k of Object.keys(seen)) delete seen[k];
    },
  };
})();
