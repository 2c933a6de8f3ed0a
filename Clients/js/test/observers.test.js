// Observer chains against the real broker: priority order and ties, next/complete/stop,
// key replacement and eviction, removal, hop timeouts, gone hops, and the posts' results.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { BrokerError, complete, NEXT, STOP } from '../src/index.js';
import { deferred, delay, useBroker, within } from '../test-support/broker.js';

const bus = useBroker(['--hop-timeout', '500ms']);
const T = { timeout: 10_000 };

/** An observer handler that records its label, then answers with `answer`. */
const recorder =
  (log, label, answer = NEXT) =>
  () => {
    log.push(label);
    return answer;
  };

describe('chains', () => {
  test('lower priority runs first, across clients', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const log = [];
    const o20 = await a.addObserver('prio', recorder(log, 20), { priority: 20 });
    const o5 = await b.addObserver('prio', recorder(log, 5), { priority: 5 });
    const o10 = await a.addObserver('prio', recorder(log, 10), { priority: 10 });
    const oDefault = await b.addObserver('prio', recorder(log, 100));
    const oNegative = await a.addObserver('prio', recorder(log, -3), { priority: -3 });

    const result = await a.post('prio', { n: 1 });
    assert.deepEqual(log, [-3, 5, 10, 20, 100]);
    assert.equal(result.outcome, 'unhandled');
    assert.equal(result.by, null);
    assert.equal(result.value, null);
    assert.equal(result.retained, null);
    assert.equal(typeof result.event, 'number');
    assert.deepEqual(
      result.trace,
      [oNegative, o5, o10, o20, oDefault].map((observer) => ({ observer, reply: 'next' })),
    );
  });

  test('equal priorities run in subscription order', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const log = [];
    await b.addObserver('tie', recorder(log, 'first'), { priority: 7 });
    await a.addObserver('tie', recorder(log, 'second'), { priority: 7 });
    await b.addObserver('tie', recorder(log, 'third'), { priority: 7 });
    await a.addObserver('tie', recorder(log, 'early'), { priority: 6 });
    await a.post('tie');
    assert.deepEqual(log, ['early', 'first', 'second', 'third']);
  });

  test('the handler gets name, payload, event id and observer id', T, async () => {
    const a = await bus.client('a');
    const seen = [];
    const id = await a.addObserver(['shape', 'other'], (event) => {
      seen.push(event);
      return NEXT;
    });
    const payload = { list: [1, 'two', null], nested: { ok: true } };
    const withPayload = await a.post('shape', payload);
    const without = await a.post('shape');
    assert.deepEqual(seen, [
      { name: 'shape', payload, event: withPayload.event, observer: id },
      { name: 'shape', payload: null, event: without.event, observer: id },
    ]);
    assert.ok(without.event > withPayload.event);
  });

  test('complete ends the chain with its value', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const log = [];
    const first = await a.addObserver('done', recorder(log, 1), { priority: 1 });
    const second = await b.addObserver('done', recorder(log, 2, complete({ answer: 42 })), { priority: 2 });
    await a.addObserver('done', recorder(log, 3), { priority: 3 });

    const result = await a.post('done');
    assert.deepEqual(log, [1, 2]);
    assert.deepEqual(result, {
      event: result.event,
      outcome: 'completed',
      by: second,
      value: { answer: 42 },
      retained: null,
      trace: [
        { observer: first, reply: 'next' },
        { observer: second, reply: 'complete' },
      ],
    });
  });

  test('complete without a value gives null', T, async () => {
    const a = await bus.client('a');
    const id = await a.addObserver('bare', async () => complete());
    const result = await a.post('bare');
    assert.equal(result.outcome, 'completed');
    assert.equal(result.by, id);
    assert.equal(result.value, null);
  });

  test('stop ends the chain without a value', T, async () => {
    const a = await bus.client('a');
    const log = [];
    const stopper = await a.addObserver('halt', recorder(log, 'stop', STOP), { priority: 1 });
    await a.addObserver('halt', recorder(log, 'never'), { priority: 2 });
    const result = await a.post('halt', 'x');
    assert.deepEqual(log, ['stop']);
    assert.equal(result.outcome, 'stopped');
    assert.equal(result.by, stopper);
    assert.equal(result.value, null);
    assert.deepEqual(result.trace, [{ observer: stopper, reply: 'stop' }]);
  });

  test('a handler that throws, rejects or returns nothing answers next', T, async () => {
    const a = await bus.client('a');
    const errors = [];
    a.on('handlerError', (report) => errors.push(report.error.message));
    await a.addObserver(
      'faulty',
      () => {
        throw new Error('sync boom');
      },
      { priority: 1 },
    );
    await a.addObserver(
      'faulty',
      async () => {
        throw new Error('async boom');
      },
      { priority: 2 },
    );
    await a.addObserver('faulty', () => {}, { priority: 3 });
    const last = await a.addObserver('faulty', () => complete('reached'), { priority: 4 });
    const result = await a.post('faulty');
    assert.equal(result.outcome, 'completed');
    assert.equal(result.by, last);
    assert.deepEqual(
      result.trace.map((hop) => hop.reply),
      ['next', 'next', 'next', 'complete'],
    );
    await delay(10);
    assert.deepEqual(errors.sort(), ['async boom', 'sync boom']);
  });

  test('no observer: unhandled with an empty trace', T, async () => {
    const a = await bus.client('a');
    const result = await a.post('nobody-listens', [1]);
    assert.equal(result.outcome, 'unhandled');
    assert.deepEqual(result.trace, []);
  });

  test('a slow handler blocks neither its client nor the next hop after the hop timeout', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const release = deferred();
    const slow = await a.addObserver('slow', () => release.promise.then(() => STOP), { priority: 1 });
    const next = await b.addObserver('slow', () => complete('after timeout'), { priority: 2 });

    const posted = a.post('slow');
    // The client still talks while its handler is busy.
    await within(a.ping(), 2_000, 'ping during a slow hop');
    const result = await posted;
    release.resolve();
    assert.equal(result.outcome, 'completed');
    assert.equal(result.by, next);
    assert.deepEqual(result.trace, [
      { observer: slow, reply: 'timeout' },
      { observer: next, reply: 'complete' },
    ]);
  });

  test('an observer whose connection closes mid-hop is gone', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const reached = deferred();
    const leaving = await b.addObserver(
      'leave',
      () => {
        reached.resolve();
        return new Promise(() => {});
      },
      { priority: 1 },
    );
    const staying = await a.addObserver('leave', () => NEXT, { priority: 2 });
    const posted = a.post('leave');
    await within(reached.promise, 2_000, 'hop reached');
    await b.close();
    const result = await posted;
    assert.equal(result.outcome, 'unhandled');
    assert.deepEqual(result.trace, [
      { observer: leaving, reply: 'gone' },
      { observer: staying, reply: 'next' },
    ]);
  });
});

describe('keys and removal', () => {
  test('a key taken elsewhere evicts its holder', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const evictedCallback = deferred();
    const evictedEvent = deferred();
    const log = [];
    const old = await a.addObserver('keyed', recorder(log, 'old'), {
      key: 'mail',
      onEvicted: evictedCallback.resolve,
    });
    a.once('evicted', evictedEvent.resolve);
    const replacement = await b.addObserver('keyed', recorder(log, 'new'), { key: 'mail', priority: 50 });

    assert.deepEqual(await within(evictedCallback.promise, 2_000, 'onEvicted'), { observer: old, by: replacement });
    assert.deepEqual(await within(evictedEvent.promise, 2_000, "'evicted'"), { observer: old, by: replacement });
    const result = await a.post('keyed');
    assert.deepEqual(log, ['new']);
    assert.deepEqual(result.trace, [{ observer: replacement, reply: 'next' }]);

    const status = await a.status();
    const holders = status.observers.filter((o) => o.key === 'mail');
    assert.deepEqual(holders, [{ observer: replacement, client: b.id, events: ['keyed'], priority: 50, key: 'mail' }]);
  });

  test('status follows its pages and returns them merged', T, async () => {
    const a = await bus.client('pages');
    // 24 observers of 64 names of 250 bytes make a status of about 400 KB: two pages.
    const ids = [];
    for (let i = 0; i < 24; i++) {
      const names = Array.from({ length: 64 }, (_, n) => `${i}-${n}-`.padEnd(250, 'x'));
      ids.push(await a.addObserver(names, () => NEXT));
    }
    const status = await a.status();
    assert.deepEqual(
      status.observers.filter((o) => o.client === a.id).map((o) => o.observer),
      ids,
    );
    assert.equal(status.next, null);
  });

  test('without a key, alike observers all stay', T, async () => {
    const a = await bus.client('a');
    const log = [];
    await a.addObserver('twins', recorder(log, 1));
    await a.addObserver('twins', recorder(log, 2));
    await a.post('twins');
    assert.deepEqual(log, [1, 2]);
  });

  test('removeObserver and removeObserverByUniqueKey, from any client', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const log = [];
    const plain = await a.addObserver('removable', recorder(log, 'plain'));
    const keyed = await a.addObserver('removable', recorder(log, 'keyed'), { key: 'removable-key' });
    assert.deepEqual(await b.removeObserver(plain), [plain]);
    assert.deepEqual(await b.removeObserverByUniqueKey('removable-key'), [keyed]);
    const result = await a.post('removable');
    assert.equal(result.outcome, 'unhandled');
    assert.deepEqual(log, []);

    await assert.rejects(
      a.removeObserver(plain),
      (error) => error instanceof BrokerError && error.code === 'not_found',
    );
    await assert.rejects(
      a.removeObserverByUniqueKey('removable-key'),
      (error) => error instanceof BrokerError && error.code === 'not_found',
    );
  });
});

describe('notification profile on posts', () => {
  const notification = { identifier: 'n-1', content: { title: 'Hi', body: 'there' } };

  test('willPresent completes with presentation options', T, async () => {
    const a = await bus.client('a');
    await a.addObserver('willPresent', () => complete(['banner', 'sound']));
    const result = await a.post('willPresent', { notification });
    assert.equal(result.outcome, 'completed');
    assert.deepEqual(result.value, ['banner', 'sound']);
  });

  test('a wrong willPresent completion is invalid and the chain goes on', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const errorFrame = deferred();
    a.once('errorFrame', errorFrame.resolve);
    const wrong = await a.addObserver('willPresent', () => complete(['banner', 'shout']), { priority: 1 });
    const right = await b.addObserver('willPresent', () => complete([]), { priority: 2 });
    const result = await a.post('willPresent', { notification });
    assert.deepEqual(result.trace, [
      { observer: wrong, reply: 'invalid' },
      { observer: right, reply: 'complete' },
    ]);
    assert.deepEqual(result.value, []);
    const error = await within(errorFrame.promise, 2_000, 'error frame');
    assert.ok(error instanceof BrokerError);
    assert.equal(error.code, 'bad_request');
  });

  test('a malformed profile payload is invalid_payload and not queued', T, async () => {
    const a = await bus.client('a');
    const log = [];
    await a.addObserver('willPresent', recorder(log, 'ran'));
    await assert.rejects(
      a.post('willPresent', { notification: { content: {} } }),
      (error) => error instanceof BrokerError && error.code === 'invalid_payload',
    );
    await assert.rejects(
      a.post('didReceive', { notification }),
      (error) => error instanceof BrokerError && error.code === 'invalid_payload',
    );
    assert.deepEqual(log, []);
  });
});

describe('broker errors', () => {
  test('bad requests reject with BrokerError and leave the connection open', T, async () => {
    const a = await bus.client('a');
    const badRequest = (error) => error instanceof BrokerError && error.code === 'bad_request';
    await assert.rejects(
      a.addObserver([], () => NEXT),
      badRequest,
    );
    await assert.rejects(
      a.addObserver(['dup', 'dup'], () => NEXT),
      badRequest,
    );
    await assert.rejects(
      a.addObserver('x', () => NEXT, { priority: 2 ** 31 }),
      badRequest,
    );
    await assert.rejects(
      a.addObserver('x', () => NEXT, { priority: 1.5 }),
      badRequest,
    );
    await assert.rejects(
      a.addObserver('', () => NEXT),
      badRequest,
    );
    await assert.rejects(a.post('x'.repeat(257)), badRequest);
    await assert.rejects(a.post(''), badRequest);
    await a.ping();
  });
});
