// Checkout demo: the UI pattern for idempotency keys.
//
// A checkout is one logical operation made of two requests: create the order
// (key A), then pay it (key B). Both keys are made when the user clicks, and
// only then. They are saved in sessionStorage together with the operation's
// input before the first request leaves, so that:
//
//   - a retry after a network error, a 5xx, a 409 "in progress" or a 202
//     sends the same key and the same body;
//   - a second click while the first is in flight does nothing new;
//   - a reload (or a crash of the tab) resumes the saved operation with the
//     same keys instead of starting over.
//
// The saved operation is removed once the checkout reached a final answer;
// "Start a new checkout" is the only way to get fresh keys.
//
// A 202 says the provider's outcome is unknown. Resending at once would
// only ask the provider again; the page instead watches the key's record
// (GET /v1/idempotency-keys/{key}) until the reconciler or a webhook has
// stored the outcome, or UNKNOWN_WAIT_MS has passed, and then sends the same
// request again: it gets the stored answer, replayed, or resumes the
// operation. lifecycle.js draws all of it beside the form.
(function () {
  'use strict';

  const STORAGE_KEY = 'idemkeys.demo.checkout';
  // Attempts per request before the page stops and lets the user retry, still
  // with the same keys.
  const MAX_ATTEMPTS = 10;
  const BASE_DELAY_MS = 250;
  const MAX_DELAY_MS = 4000;
  // How long the page watches an unknown outcome before it asks again; a
  // little more than the reconciler's default interval (5 s).
  const UNKNOWN_WAIT_MS = 8000;
  const ORDER_BODY = {
    customer_id: 'cus_demo',
    currency: 'BRL',
    items: [{ sku: 'SKU-1', name: 'Coffee', quantity: 2, unit_amount: 1250 }],
    metadata: { source: 'demo' },
  };

  const $ = (id) => document.getElementById(id);
  const form = $('checkout');
  const payButton = $('pay');
  const newButton = $('new-checkout');
  const againButton = $('send-again');

  // In-memory guards of this page load; sessionStorage is what survives it.
  let running = false; // a request of the saved operation is in flight
  let finished = false; // the last checkout got its final answer
  let last = null; // the finished checkout's payment request, for "send again"

  function load() {
    try {
      return JSON.parse(sessionStorage.getItem(STORAGE_KEY));
    } catch {
      return null;
    }
  }
  function save(op) {
    sessionStorage.setItem(STORAGE_KEY, JSON.stringify(op));
  }
  function forget() {
    sessionStorage.removeItem(STORAGE_KEY);
  }

  // newOperation is called from a click only: the one place keys are made.
  function newOperation() {
    return {
      apiKey: $('api-key').value.trim(),
      paymentMethod: $('payment-method').value,
      orderKey: crypto.randomUUID(),
      paymentKey: crypto.randomUUID(),
      orderBody: ORDER_BODY,
      step: 'order', // 'order', then 'payment'
      order: null, // the created order, once known
    };
  }

  function setPhase(phase, text) {
    document.body.dataset.phase = phase;
    $('status').textContent = text;
  }

  // log adds a line to the request log; a replayed answer gets a mark.
  function log(text, replayed) {
    const li = document.createElement('li');
    li.textContent = new Date().toISOString().slice(11, 23) + ' ' + text;
    if (replayed) {
      const mark = document.createElement('mark');
      mark.className = 'replayed';
      mark.dataset.replayed = 'true';
      mark.textContent = 'replayed';
      li.append(' ', mark);
    }
    $('log').appendChild(li);
  }

  // show puts the operation's input and keys on the page and locks the
  // inputs: they belong to the keys now.
  function show(op) {
    $('api-key').value = op.apiKey;
    $('payment-method').value = op.paymentMethod;
    $('inputs').disabled = true;
    $('order-key').textContent = op.orderKey;
    $('payment-key').textContent = op.paymentKey;
    $('keys').hidden = false;
    if (op.order) showOrder(op.order);
  }

  function showOrder(order) {
    $('result').hidden = false;
    $('order-id').textContent = order.id;
    $('order-status').textContent = order.status;
  }

  function showPayment(id, status) {
    $('result').hidden = false;
    $('payment-id').textContent = id;
    $('payment-status').textContent = status;
  }

  function problemText(r) {
    const d = r.data || {};
    return (d.title || 'HTTP ' + r.status) + (d.detail ? ': ' + d.detail : '') + (d.code ? ' (' + d.code + ')' : '');
  }

  // retryable says whether the same request, with the same key, may get a
  // better answer later. Business outcomes (402, 409 order_already_paid,
  // 4xx) are final: the server stored them and would only replay them.
  function retryable(r) {
    if (r.status === 202 || r.status === 429 || r.status >= 500) return true;
    return r.status === 409 && r.data && r.data.code === 'idempotency_request_in_progress';
  }

  // delay honours Retry-After; otherwise exponential backoff with jitter.
  function delay(attempt, res) {
    const after = res && Number(res.headers.get('Retry-After'));
    if (after > 0) return after * 1000;
    const cap = Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** (attempt - 1));
    return cap / 2 + Math.random() * (cap / 2);
  }

  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

  class Stalled extends Error {}

  // send posts body under key until the answer is final, and returns it as
  // {status, data}. Every attempt carries the same key and the same body.
  async function send(op, label, path, key, body) {
    for (let attempt = 1; ; attempt++) {
      let res = null;
      let r = null;
      Lifecycle.request(label, key);
      const stopWatching = Lifecycle.watch(op.apiKey, key);
      try {
        res = await fetch(path, {
          method: 'POST',
          headers: {
            Authorization: 'Bearer ' + op.apiKey,
            'Idempotency-Key': key,
            'Content-Type': 'application/json',
          },
          body: JSON.stringify(body),
        });
        r = { status: res.status, data: await res.json().catch(() => null) };
        const replayed = res.headers.get('Idempotent-Replayed') === 'true';
        const code = r.data && r.data.code ? r.data.code : '';
        await stopWatching(res.status);
        Lifecycle.answer(key, res.status, replayed, code);
        log(label + ' #' + attempt + ' → ' + res.status + (code ? ' ' + code : ''), replayed);
      } catch (err) {
        await stopWatching(0);
        log(label + ' #' + attempt + ' → network error: ' + err.message);
      }
      if (r && !retryable(r)) return r;
      if (attempt >= MAX_ATTEMPTS) {
        throw new Stalled(label + ' is not finished after ' + attempt + ' attempts');
      }
      if (r && r.status === 202) {
        setPhase('waiting', label + ': the outcome is unknown; watching the key until it is known…');
        await Lifecycle.outcome(op.apiKey, key, UNKNOWN_WAIT_MS);
        continue;
      }
      const ms = delay(attempt, res);
      setPhase('waiting', label + ': ' + (r ? 'HTTP ' + r.status : 'network error') +
        ', retrying in ' + (ms / 1000).toFixed(1) + ' s with the same key…');
      await sleep(ms);
    }
  }

  // run drives a saved operation to its end, from whichever step it is at.
  async function run(op) {
    running = true;
    payButton.disabled = true;
    show(op);
    try {
      if (op.step === 'order') {
        setPhase('creating-order', 'Creating the order…');
        const r = await send(op, 'POST /v1/orders', '/v1/orders', op.orderKey, op.orderBody);
        if (r.status !== 201) return finish('failed', 'The order was not created. ' + problemText(r));
        op.order = r.data;
        op.step = 'payment';
        save(op);
        showOrder(op.order);
      }

      setPhase('paying', 'Paying the order…');
      const path = '/v1/orders/' + encodeURIComponent(op.order.id) + '/payments';
      const r = await send(op, 'POST ' + path, path, op.paymentKey, { payment_method: op.paymentMethod });
      last = { op: op, path: path };
      if (r.status === 201) {
        showPayment(r.data.id, r.data.status);
        await refreshOrder(op);
        return finish('done', 'Paid: payment ' + r.data.status + '.');
      }
      if (r.status === 402 && r.data) {
        showPayment(r.data.payment_id || '', 'failed');
        return finish('failed', 'The card was declined (' + (r.data.decline_code || r.data.code) + ').');
      }
      return finish('failed', 'The payment did not go through. ' + problemText(r));
    } catch (err) {
      // Out of attempts (or a bug): the operation stays saved, and the next
      // click retries it with its keys.
      running = false;
      payButton.disabled = false;
      payButton.textContent = 'Retry with the same keys';
      setPhase('stalled', (err instanceof Stalled ? err.message : 'Error: ' + err.message) +
        '. Press the button to try again with the same keys.');
    }
  }

  // refreshOrder reads the order again to show that it is paid now. A GET
  // needs no key; if it fails the page keeps the order it has.
  async function refreshOrder(op) {
    try {
      const res = await fetch('/v1/orders/' + encodeURIComponent(op.order.id), {
        headers: { Authorization: 'Bearer ' + op.apiKey },
      });
      if (res.ok) showOrder(await res.json());
    } catch {
      // Shown as it was created.
    }
  }

  function finish(phase, text) {
    forget();
    running = false;
    finished = true;
    payButton.hidden = true;
    newButton.hidden = false;
    againButton.hidden = !last;
    setPhase(phase, text);
  }

  // "Send the payment again" repeats the finished checkout's payment, the
  // same request under the same key, as a client does that never got the
  // answer: the API replays the stored answer and charges nothing.
  againButton.addEventListener('click', async () => {
    if (running || !last) return;
    running = true;
    againButton.disabled = true;
    const r = await send(last.op, 'POST ' + last.path + ' again', last.path, last.op.paymentKey,
      { payment_method: last.op.paymentMethod });
    running = false;
    againButton.disabled = false;
    setPhase(document.body.dataset.phase, 'Sent again under the same key: ' + r.status + '.');
  });

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (running || finished) {
      // A double click, or a click on a finished checkout: nothing new.
      log('Click ignored: this checkout is ' + (running ? 'already in flight' : 'finished') + '.');
      return;
    }
    let op = load();
    if (!op) {
      op = newOperation();
      save(op); // saved before the first request leaves
    }
    run(op);
  });

  newButton.addEventListener('click', () => {
    if (running) return;
    forget();
    finished = false;
    last = null;
    againButton.hidden = true;
    Lifecycle.clear();
    $('inputs').disabled = false;
    $('keys').hidden = true;
    $('result').hidden = true;
    $('log').textContent = '';
    payButton.hidden = false;
    payButton.disabled = false;
    payButton.textContent = 'Create order and pay';
    newButton.hidden = true;
    setPhase('idle', 'Ready.');
  });

  const saved = load();
  if (saved) {
    log('Resuming the saved checkout with its keys.');
    run(saved);
  }
})();
