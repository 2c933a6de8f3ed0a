// Retained slots, notification categories, launch retention and status against the
// real broker.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { BrokerError } from '../src/index.js';
import { delay, useBroker, within } from '../test-support/broker.js';

const bus = useBroker();
const T = { timeout: 10_000 };

const hasCode = (code) => (error) => error instanceof BrokerError && error.code === code;

describe('slots', () => {
  test('put, peek and take once', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    assert.deepEqual(await a.put('basic', { emailId: 'e-1' }), { replaced: false, delivered: false });
    assert.deepEqual(await a.put('basic', { emailId: 'e-2' }), { replaced: true, delivered: false });
    assert.deepEqual(await b.peek('basic'), { emailId: 'e-2' });
    assert.deepEqual(await b.take('basic'), { emailId: 'e-2' });
    assert.equal(await b.take('basic'), null);
    assert.equal(await a.peek('basic'), null);
  });

  test('put null empties the slot', T, async () => {
    const a = await bus.client('a');
    await a.put('emptied', [1, 2]);
    assert.deepEqual(await a.put('emptied', null), { replaced: true, delivered: false });
    assert.equal(await a.peek('emptied'), null);
    await assert.rejects(a.put('emptied'), TypeError);
  });

  test('slots outlive the connection that filled them', T, async () => {
    const a = await bus.client('a');
    await a.put('durable', 'kept');
    await a.close();
    const b = await bus.client('b');
    assert.equal(await b.take('durable'), 'kept');
    assert.ok(!(await b.status()).slots.includes('durable'));
  });

  test('a waiting take gets the next put', T, async () => {
    const [taker, putter] = [await bus.client('taker'), await bus.client('putter')];
    const taken = taker.take('waited', { wait: 5_000 });
    await delay(100);
    // The taker's connection is free while its take waits.
    await within(taker.ping(), 1_000, 'ping while take waits');
    assert.deepEqual(await putter.put('waited', { late: true }), { replaced: false, delivered: true });
    assert.deepEqual(await within(taken, 1_000, 'take served'), { late: true });
    assert.equal(await putter.peek('waited'), null);
  });

  test('waiting takers are served oldest first, and put null wakes none', T, async () => {
    const [first, second, putter] = [await bus.client('1'), await bus.client('2'), await bus.client('p')];
    const one = first.take('queue', { wait: 5_000 });
    await delay(50);
    const two = second.take('queue', { wait: 5_000 });
    await delay(50);
    assert.deepEqual(await putter.put('queue', null), { replaced: false, delivered: false });
    assert.deepEqual(await putter.put('queue', 'A'), { replaced: false, delivered: true });
    assert.deepEqual(await putter.put('queue', 'B'), { replaced: false, delivered: true });
    assert.equal(await within(one, 1_000, 'first taker'), 'A');
    assert.equal(await within(two, 1_000, 'second taker'), 'B');
  });

  test('a waiting take times out with null', T, async () => {
    // Null when the wait ends, and the take waits no more: the next put finds no taker and
    // stays in the slot. (When the wait ends is the broker core's to hold, on a fake clock.)
    const a = await bus.client('a');
    assert.equal(await a.take('never-filled', { wait: 300 }), null);
    assert.deepEqual(await a.put('never-filled', 'kept'), { replaced: false, delivered: false });
    assert.equal(await a.peek('never-filled'), 'kept');
  });

  test('a wait longer than the client timeout is still served', T, async () => {
    const [a, b] = [await bus.client('a', { timeout: 500 }), await bus.client('b')];
    const taken = a.take('long-wait', { wait: 1_500 });
    await delay(900);
    await b.put('long-wait', 'worth it');
    assert.equal(await taken, 'worth it');
  });

  test('bad slot requests are bad_request', T, async () => {
    const a = await bus.client('a');
    await assert.rejects(a.take('s', { wait: 600_001 }), hasCode('bad_request'));
    await assert.rejects(a.take('s', { wait: -1 }), hasCode('bad_request'));
    await assert.rejects(a.peek(''), hasCode('bad_request'));
  });
});

const categories = [
  {
    identifier: 'INVITE',
    options: [],
    actions: [
      { identifier: 'ACCEPT', title: 'Accept', options: ['foreground'] },
      { identifier: 'DECLINE', title: 'Decline', options: ['destructive'] },
    ],
  },
  {
    identifier: 'MESSAGE',
    options: ['customDismissAction', 'hiddenPreviewsShowTitle'],
    actions: [
      {
        identifier: 'REPLY',
        title: 'Reply',
        options: [],
        textInput: { buttonTitle: 'Send', placeholder: 'Message' },
      },
    ],
  },
];

const notification = (categoryIdentifier) => ({
  identifier: 'n-1',
  source: 'remote',
  content: { title: 'Lunch?', categoryIdentifier, userInfo: { emailId: 'e-9' } },
});

describe('notification categories', { concurrency: false }, () => {
  test('set and get return exactly the accepted array', T, async () => {
    const a = await bus.client('a');
    assert.equal(await a.setNotificationCategories(categories), 2);
    assert.deepEqual(await a.notificationCategories(), categories);
  });

  test('an invalid set is rejected and the set in force stays', T, async () => {
    const a = await bus.client('a');
    await a.setNotificationCategories(categories);
    const invalid = [
      [{ identifier: 'X', actions: [{ identifier: 'A', title: 'A', options: ['loud'] }] }],
      [{ identifier: 'X', options: ['sometimes'], actions: [] }],
      [{ identifier: 'X' }],
      [
        { identifier: 'X', actions: [] },
        { identifier: 'X', actions: [] },
      ],
      [
        {
          identifier: 'X',
          actions: [
            { identifier: 'A', title: 'A' },
            { identifier: 'A', title: 'B' },
          ],
        },
      ],
      [{ identifier: 'X', actions: [], colour: 'red' }],
    ];
    for (const set of invalid) {
      await assert.rejects(a.setNotificationCategories(set), hasCode('bad_request'), JSON.stringify(set));
    }
    assert.deepEqual(await a.notificationCategories(), categories);
  });

  test('didReceive actions are checked against the categories', T, async () => {
    const a = await bus.client('a');
    await a.setNotificationCategories(categories);
    await a.addObserver('didReceive', () => undefined);
    const post = (fields) => a.post('didReceive', { notification: notification('MESSAGE'), ...fields });
    assert.equal((await post({ actionIdentifier: 'REPLY', userText: 'yes' })).outcome, 'unhandled');
    await assert.rejects(post({ actionIdentifier: 'REPLY' }), hasCode('invalid_action'));
    await assert.rejects(post({ actionIdentifier: 'ACCEPT' }), hasCode('invalid_action'));
    await assert.rejects(
      post({ actionIdentifier: 'com.apple.UNNotificationDefaultActionIdentifier', userText: 'no' }),
      hasCode('invalid_action'),
    );
    await post({ actionIdentifier: 'com.apple.UNNotificationDismissActionIdentifier' });
  });

  test('an unhandled launching didReceive is retained in the launch slot', T, async () => {
    const a = await bus.client('a');
    await a.setNotificationCategories(categories);
    await a.take('launch');
    const payload = {
      actionIdentifier: 'com.apple.UNNotificationDefaultActionIdentifier',
      notification: notification('INVITE'),
    };
    const result = await a.post('didReceive', payload);
    assert.equal(result.outcome, 'unhandled');
    assert.equal(result.retained, 'launch');
    const decline = await a.post('didReceive', { ...payload, actionIdentifier: 'DECLINE' });
    assert.equal(decline.retained, null);

    const app = await bus.client('app');
    assert.deepEqual(await app.take('launch'), payload);
    assert.equal(await app.take('launch'), null);
  });
});

describe('status and monitor', () => {
  test('a monitor sees the frames of other connections', T, async () => {
    const [watcher, other] = [await bus.client('watcher'), await bus.client('other')];
    const seen = [];
    watcher.on('seen', (frame) => seen.push(frame));
    await watcher.monitor();
    await other.peek('watched');
    await watcher.ping();
    const peek = seen.find((s) => s.dir === 'in' && s.frame.op === 'peek');
    assert.deepEqual(peek, { op: 'seen', dir: 'in', client: other.id, frame: peek.frame });
    assert.equal(peek.frame.slot, 'watched');
    assert.ok(seen.some((s) => s.dir === 'out' && s.client === other.id && s.frame.id === peek.frame.id));
    assert.ok(seen.every((s) => s.client !== watcher.id));
  });

  test('lists this client and the slots', T, async () => {
    const a = await bus.client('status-probe');
    await a.put('visible', 1);
    const status = await a.status();
    assert.match(status.server, /^notifbus\//);
    assert.equal(typeof status.uptimeMs, 'number');
    const me = status.clients.find((c) => c.client === a.id);
    assert.deepEqual(me, {
      client: a.id,
      name: 'status-probe',
      pid: process.pid,
      uid: process.getuid(),
      queued: 0,
      unresponsive: false,
    });
    assert.ok(status.slots.includes('visible'));
    assert.deepEqual(status.slots, [...status.slots].sort());
    assert.equal(typeof status.counters.posted, 'number');
    await a.put('visible', null);
  });
});
