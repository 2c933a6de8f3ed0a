// The session alone, without a socket or a broker: messages in, frames and effects out.
// Reply matching in any order, observer answers, stale generations, method returns,
// evictions and a lost connection, each checked on the exact frames and effects.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import { BrokerError, ConnectionLostError, MethodCallError, MissingPluginError } from '../src/errors.js';
import { decodeBody } from '../src/framing.js';
import { complete, HANDLER_ERROR_CODE, NEXT, PROTOCOL_VERSION, Session, STOP } from '../src/session.js';

/** The JSON text of a frame's body, so that member order is checked too. */
const text = (frame) => frame.subarray(4).toString('utf8');
/** The body of a frame, decoded. */
const body = (frame) => decodeBody(frame.subarray(4));

/** The frames of the 'write' effects among `effects`, decoded. */
const written = (effects) => effects.filter((e) => e.kind === 'write').map((e) => body(e.frame));

/** Starts a request with a fresh waiter; returns its id, frame and waiter. */
function start(session, request) {
  const waiter = { name: request.op };
  return { ...session.start(request, waiter), waiter };
}

/** A session greeted by the broker, with the given maxFrame. */
function greeted(maxFrame = 1_048_576) {
  const session = new Session();
  const { id } = start(session, session.hello('tester'));
  const result = { protocol: PROTOCOL_VERSION, server: 'notifbus/test', client: 'c1', maxFrame };
  session.receive({ op: 'reply', id, result });
  return session;
}

/** Subscribes `handler` and answers the subscribe with observer id `observer`. */
function subscribed(session, observer, handler, options = {}) {
  const { id } = start(session, session.subscribe(['e'], handler, { priority: 100, ...options }));
  const [effect] = session.receive({ op: 'reply', id, result: { observer } });
  assert.equal(effect.kind, 'resolve');
  assert.equal(effect.value, observer);
}

/** Registers `handler` for (channel, method) and answers the handle with handler id `handlerId`. */
function handling(session, channel, method, handler, handlerId, onEvicted) {
  const request = session.handle(channel, method, handler, onEvicted);
  const { id } = start(session, request);
  const [effect] = session.receive({ op: 'reply', id, result: { handler: handlerId, replaced: null } });
  assert.equal(effect.kind, 'resolve');
  return effect.value;
}

/** The 'event' effect for event `event` to `observer`. */
function deliver(session, event, observer, payload = { n: event }) {
  const effects = session.receive({ op: 'event', event, observer, name: 'e', payload });
  assert.equal(effects.length, 1);
  assert.equal(effects[0].kind, 'event');
  return effects[0];
}

describe('session requests', () => {
  test('hello is the first frame, with the protocol version and the name, and sets maxFrame', () => {
    const session = new Session();
    assert.equal(session.maxFrame, null);
    const { id, frame } = start(session, session.hello('tester'));
    assert.equal(id, 1);
    assert.equal(text(frame), '{"op":"hello","id":1,"protocol":1,"name":"tester"}');
    assert.equal(frame.readUInt32BE(0), frame.length - 4);
    const result = { protocol: 1, server: 'notifbus/test', client: 'c9', maxFrame: 64 };
    const [effect] = session.receive({ op: 'reply', id, result });
    assert.deepEqual(effect, { kind: 'resolve', waiter: { name: 'hello' }, value: result });
    assert.equal(session.maxFrame, 64);
    assert.equal(session.greeting.client, 'c9');
  });

  test('ids count up and the fields keep their wire order', () => {
    const session = greeted();
    assert.equal(text(start(session, session.ping()).frame), '{"op":"ping","id":2}');
    assert.equal(
      text(start(session, session.post('p', { a: 1 }, 'k1')).frame),
      '{"op":"post","id":3,"name":"p","once":"k1","payload":{"a":1}}',
    );
    assert.equal(text(start(session, session.post('p')).frame), '{"op":"post","id":4,"name":"p"}');
    assert.equal(text(start(session, session.take('s', 250)).frame), '{"op":"take","id":5,"slot":"s","wait":250}');
    assert.equal(
      text(
        start(
          session,
          session.subscribe(['a', 'b'], () => NEXT, { priority: 5, key: 'k' }),
        ).frame,
      ),
      '{"op":"subscribe","id":6,"events":["a","b"],"priority":5,"key":"k"}',
    );
    assert.equal(
      text(start(session, session.invoke('mail', 'open', [1])).frame),
      '{"op":"invoke","id":7,"channel":"mail","method":"open","arguments":[1]}',
    );
  });

  test('replies in any order settle the request they name, and only once', () => {
    const session = greeted();
    const a = start(session, session.ping());
    const b = start(session, session.peek('s'));
    const c = start(session, session.getCategories());
    assert.deepEqual(session.receive({ op: 'reply', id: c.id, result: { categories: [] } }), [
      { kind: 'resolve', waiter: c.waiter, value: { categories: [] } },
    ]);
    assert.deepEqual(session.receive({ op: 'reply', id: a.id, result: {} }), [
      { kind: 'resolve', waiter: a.waiter, value: {} },
    ]);
    assert.deepEqual(session.receive({ op: 'reply', id: b.id, result: 42 }), [
      { kind: 'resolve', waiter: b.waiter, value: 42 },
    ]);
    assert.deepEqual(session.receive({ op: 'reply', id: b.id, result: 43 }), []);
    assert.deepEqual(session.inFlight(), []);
  });

  test('a late reply to a cancelled request is dropped', () => {
    const session = greeted();
    const { id } = start(session, session.ping());
    session.cancel(id);
    assert.deepEqual(session.receive({ op: 'reply', id, result: {} }), []);
  });

  test('an error reply rejects with the request type, and marks a repeat', () => {
    const session = greeted();
    const put = start(session, session.put('s', 1, 'k'));
    const [rejected] = session.receive({
      op: 'reply',
      id: put.id,
      repeat: true,
      error: { code: 'once_conflict', message: 'other arguments' },
    });
    assert.equal(rejected.kind, 'reject');
    assert.equal(rejected.waiter, put.waiter);
    assert.ok(rejected.error instanceof BrokerError);
    assert.equal(rejected.error.code, 'once_conflict');
    assert.equal(rejected.error.repeat, true);

    const invoke = start(session, session.invoke('mail', 'open'));
    const [missing] = session.receive({ op: 'reply', id: invoke.id, error: { code: 'not_implemented', message: '' } });
    assert.ok(missing.error instanceof MissingPluginError);
    const other = start(session, session.invoke('mail', 'open'));
    const [failed] = session.receive({ op: 'reply', id: other.id, error: { code: 'denied', message: 'no' } });
    assert.ok(failed.error instanceof MethodCallError);
    assert.ok(!(failed.error instanceof MissingPluginError));
    assert.equal(failed.error.code, 'denied');
  });

  test('a repeated keyed post or put resolves marked repeat: true; other requests as they came', () => {
    const session = greeted();
    const post = start(session, session.post('p', null, 'k'));
    const [effect] = session.receive({
      op: 'reply',
      id: post.id,
      repeat: true,
      result: { event: 3, outcome: 'unhandled' },
    });
    assert.deepEqual(effect.value, { event: 3, outcome: 'unhandled', repeat: true });
    const take = start(session, session.take('s', undefined, 'k'));
    const [taken] = session.receive({ op: 'reply', id: take.id, repeat: true, result: { v: 1 } });
    assert.deepEqual(taken.value, { v: 1 });
  });

  test('a request larger than maxFrame is refused and leaves nothing pending', () => {
    const session = greeted(64);
    assert.throws(() => start(session, session.post('p', 'x'.repeat(100))), RangeError);
    assert.deepEqual(session.inFlight(), []);
    assert.equal(start(session, session.ping()).id, 3);
  });

  test('withdraw takes out the requests it selects, in order; their replies are dropped', () => {
    const session = greeted();
    const keyed1 = start(session, session.put('s', 1, 'a'));
    start(session, session.ping());
    const keyed2 = start(session, session.post('p', null, 'b'));
    const taken = session.withdraw((request) => request.keyed);
    assert.deepEqual(
      taken.map((e) => e.waiter),
      [keyed1.waiter, keyed2.waiter],
    );
    assert.deepEqual(
      session.inFlight().map((e) => e.request.op),
      ['ping'],
    );
    assert.deepEqual(session.receive({ op: 'reply', id: keyed1.id, result: {} }), []);
  });

  test('replies matched in a seeded random order settle every request with its own result', () => {
    const seed = Number(process.env.NOTIFBUS_SEED ?? 20_240_607);
    const random = mulberry32(seed);
    for (let round = 0; round < 50; round++) {
      const session = greeted();
      const count = 1 + Math.floor(random() * 20);
      const started = Array.from({ length: count }, (_, i) => start(session, session.peek(`s${i}`)));
      const order = shuffle(started, random);
      for (const { id, waiter } of order) {
        const effects = session.receive({ op: 'reply', id, result: waiter.name + id });
        assert.deepEqual(effects, [{ kind: 'resolve', waiter, value: `peek${id}` }], `seed ${seed}, round ${round}`);
      }
      assert.equal(session.inFlight().length, 0, `seed ${seed}, round ${round}`);
    }
  });
});

describe('session observers', () => {
  test('an event runs its observer, and NEXT, STOP and complete become their frames', () => {
    const session = greeted();
    const handler = () => NEXT;
    subscribed(session, 'o1', handler);
    const delivery = deliver(session, 7, 'o1');
    assert.equal(delivery.handler, handler);
    assert.deepEqual(delivery.event, { name: 'e', payload: { n: 7 }, event: 7, observer: 'o1' });
    assert.deepEqual(written(session.answer(delivery, NEXT)), [{ op: 'next', event: 7 }]);
    assert.deepEqual(written(session.answer(delivery, STOP)), [{ op: 'stop', event: 7 }]);
    const [done] = session.answer(delivery, complete({ ok: true }));
    assert.equal(text(done.frame), '{"op":"complete","event":7,"value":{"ok":true}}');
    assert.deepEqual(written(session.answer(delivery, complete())), [{ op: 'complete', event: 7 }]);
    assert.deepEqual(written(session.answer(delivery, undefined)), [{ op: 'next', event: 7 }]);
  });

  test('a missing payload reaches the observer as null', () => {
    const session = greeted();
    subscribed(session, 'o1', () => NEXT);
    const [delivery] = session.receive({ op: 'event', event: 1, observer: 'o1', name: 'e' });
    assert.equal(delivery.event.payload, null);
  });

  test('an event for an observer this client does not hold is passed on', () => {
    const session = greeted();
    const delivery = deliver(session, 3, 'o404');
    assert.equal(delivery.handler(delivery.event), NEXT);
    assert.deepEqual(written(session.answer(delivery, NEXT)), [{ op: 'next', event: 3 }]);
  });

  test('a wrong answer, a throw or a value too large is reported and answered next', () => {
    const session = greeted(64);
    subscribed(session, 'o1', () => NEXT);
    const delivery = deliver(session, 4, 'o1');

    const wrong = session.answer(delivery, 'yes');
    assert.deepEqual(
      wrong.map((e) => e.kind),
      ['handlerError', 'write'],
    );
    assert.ok(wrong[0].report.error instanceof TypeError);
    assert.equal(wrong[0].report.observer, 'o1');
    assert.equal(wrong[0].report.event, 4);
    assert.deepEqual(written(wrong), [{ op: 'next', event: 4 }]);

    const boom = new Error('boom');
    const thrown = session.answerFailure(delivery, boom);
    assert.deepEqual(thrown[0], { kind: 'handlerError', report: { error: boom, observer: 'o1', event: 4 } });
    assert.deepEqual(written(thrown), [{ op: 'next', event: 4 }]);

    const large = session.answer(delivery, complete('x'.repeat(100)));
    assert.equal(large[0].kind, 'handlerError');
    assert.ok(large[0].report.error instanceof RangeError);
    assert.deepEqual(written(large), [{ op: 'next', event: 4 }]);
  });

  test('an answer of an older connection is dropped after resubscribing', () => {
    const session = greeted();
    const handler = () => STOP;
    subscribed(session, 'o1', handler);
    const old = deliver(session, 5, 'o1');
    session.beginConnection();
    session.forgetRegistrations();
    assert.equal(session.greeting, null);
    const { id } = start(session, session.request('subscribe', { events: ['e'], priority: 100, resume: true }));
    session.receive({ op: 'reply', id, result: { observer: 'o2' } });
    session.registerObserver('o2', handler);
    assert.deepEqual(session.answer(old, STOP), []);
    assert.deepEqual(
      session.answerFailure(old, new Error('late')).map((e) => e.kind),
      ['handlerError'],
    );
    const fresh = deliver(session, 6, 'o2');
    assert.equal(fresh.handler, handler);
    assert.deepEqual(written(session.answer(fresh, STOP)), [{ op: 'stop', event: 6 }]);
  });

  test('unsubscribe forgets the removed observers', () => {
    const session = greeted();
    subscribed(session, 'o1', () => STOP);
    subscribed(session, 'o2', () => STOP);
    const { id } = start(session, session.unsubscribe({ key: 'k' }));
    const [effect] = session.receive({ op: 'reply', id, result: { removed: ['o1'] } });
    assert.deepEqual(effect.value, ['o1']);
    assert.deepEqual([...session.liveIds()], ['o2']);
    assert.equal(deliver(session, 9, 'o1').handler(), NEXT);
  });

  test('an evicted observer is dropped and reported once, with its callback', () => {
    const session = greeted();
    const onEvicted = () => {};
    subscribed(session, 'o1', () => NEXT, { key: 'k', onEvicted });
    assert.deepEqual(session.receive({ op: 'evicted', observer: 'o1', by: 'o8' }), [
      { kind: 'evicted', callback: onEvicted, eviction: { observer: 'o1', by: 'o8' } },
    ]);
    assert.deepEqual(session.receive({ op: 'evicted', observer: 'o1', by: 'o8' }), []);
    assert.deepEqual([...session.liveIds()], []);
  });
});

describe('session method calls', () => {
  test('a call runs its handler and the result goes back as a return', () => {
    const session = greeted();
    const handler = (call) => call.arguments;
    assert.equal(handling(session, 'mail', 'open', handler, 'h1'), 'h1');
    assert.equal(session.handlerId('mail', 'open'), 'h1');
    const [delivery] = session.receive({
      op: 'call',
      call: 11,
      handler: 'h1',
      channel: 'mail',
      method: 'open',
      from: 'c2',
      arguments: { id: 3 },
    });
    assert.equal(delivery.kind, 'call');
    assert.equal(delivery.handler, handler);
    assert.deepEqual(delivery.call, { method: 'open', arguments: { id: 3 }, channel: 'mail', from: 'c2', call: 11 });
    const [returned] = session.methodReturn(delivery, { opened: true });
    assert.equal(text(returned.frame), '{"op":"return","call":11,"result":{"opened":true}}');
    assert.deepEqual(written(session.methodReturn(delivery, undefined)), [{ op: 'return', call: 11, result: null }]);
  });

  test('a MethodCallError returns its code and details unreported; another throw returns "error", reported', () => {
    const session = greeted();
    handling(session, 'mail', null, () => null, 'h1');
    const [delivery] = session.receive({
      op: 'call',
      call: 12,
      handler: 'h1',
      channel: 'mail',
      method: 'x',
      from: 'c2',
    });
    assert.equal(delivery.call.arguments, null);
    const refused = session.methodFailure(delivery, new MethodCallError('denied', 'no', { why: 1 }));
    assert.deepEqual(
      refused.map((e) => e.kind),
      ['write'],
    );
    assert.equal(
      text(refused[0].frame),
      '{"op":"return","call":12,"error":{"code":"denied","message":"no","details":{"why":1}}}',
    );
    const boom = new Error('boom');
    const failed = session.methodFailure(delivery, boom);
    assert.deepEqual(failed[0], { kind: 'handlerError', report: { error: boom, handler: 'h1', call: 12 } });
    assert.deepEqual(written(failed), [
      { op: 'return', call: 12, error: { code: HANDLER_ERROR_CODE, message: 'boom' } },
    ]);
  });

  test('a call for a handler this client does not hold returns not_implemented', () => {
    const session = greeted();
    const [delivery] = session.receive({ op: 'call', call: 13, handler: 'h9', channel: 'c', method: 'm', from: 'c2' });
    let error;
    try {
      delivery.handler(delivery.call);
    } catch (thrown) {
      error = thrown;
    }
    assert.ok(error instanceof MissingPluginError);
    const effects = session.methodFailure(delivery, error);
    assert.deepEqual(
      effects.map((e) => e.kind),
      ['write'],
    );
    assert.equal(body(effects[0].frame).error.code, 'not_implemented');
  });

  test('replacing its own handler is no eviction to report; a failed replacement makes it one again', () => {
    const session = greeted();
    const onEvicted = () => {};
    handling(session, 'mail', 'open', () => 1, 'h1', onEvicted);
    const replacing = session.handle('mail', 'open', () => 2, onEvicted);
    const { id } = start(session, replacing);
    assert.deepEqual(session.receive({ op: 'evicted', handler: 'h1', by: 'h2' }), []);
    session.receive({ op: 'reply', id, result: { handler: 'h2', replaced: 'h1' } });
    assert.equal(session.handlerId('mail', 'open'), 'h2');

    const failing = session.handle('mail', 'open', () => 3, onEvicted);
    failing.undo();
    assert.deepEqual(session.receive({ op: 'evicted', handler: 'h2', by: 'h7' }), [
      { kind: 'evicted', callback: onEvicted, eviction: { handler: 'h2', by: 'h7' } },
    ]);
    assert.equal(session.handlerId('mail', 'open'), undefined);
  });
});

describe('session connection state', () => {
  test('a lost connection fails every pending request with a ConnectionLostError', () => {
    const session = greeted();
    const requests = [
      start(session, session.ping()),
      start(session, session.invoke('mail', 'open')),
      start(
        session,
        session.subscribe(['e'], () => NEXT, { priority: 1 }),
      ),
    ];
    session.closeCause = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    const effects = session.failPending('the connection to the broker was lost');
    assert.deepEqual(
      effects.map((e) => [e.kind, e.waiter]),
      requests.map((r) => ['reject', r.waiter]),
    );
    for (const { error } of effects) {
      assert.ok(error instanceof ConnectionLostError);
      assert.equal(error.message, 'the connection to the broker was lost: ECONNRESET: read ECONNRESET');
      assert.equal(error.cause, session.closeCause);
    }
    assert.notEqual(effects[0].error, effects[1].error);
    assert.deepEqual(session.inFlight(), []);
    assert.equal(session.closed, false);
  });

  test('once closed, requests fail at start and answers are not written', () => {
    const session = greeted();
    subscribed(session, 'o1', () => NEXT);
    const delivery = deliver(session, 1, 'o1');
    session.markClosed('the client was closed');
    session.markClosed('the connection to the broker was lost');
    assert.equal(session.closed, true);
    assert.throws(
      () => start(session, session.ping()),
      (error) => {
        assert.ok(error instanceof ConnectionLostError);
        assert.equal(error.message, 'the client was closed');
        return true;
      },
    );
    assert.deepEqual(session.answer(delivery, NEXT), []);
    assert.deepEqual(session.failPending(), []);
  });

  test('an error frame of a closing code becomes the cause of the loss', () => {
    const session = new Session();
    const hello = start(session, session.hello());
    const effects = session.receive({ op: 'reply', id: null, error: { code: 'too_many_clients', message: 'full' } });
    assert.equal(effects.length, 1);
    assert.equal(effects[0].kind, 'emit');
    assert.equal(effects[0].name, 'errorFrame');
    assert.equal(effects[0].value.code, 'too_many_clients');
    assert.ok(session.closeCause instanceof BrokerError);
    const [failed] = session.failPending('the connection to the broker was lost');
    assert.equal(failed.waiter, hello.waiter);
    assert.equal(failed.error.cause.code, 'too_many_clients');
  });

  test('seen frames are emitted as they are; unknown ops are ignored', () => {
    const session = greeted();
    const seen = { op: 'seen', dir: 'in', client: 'c3', frame: { op: 'ping', id: 1 } };
    assert.deepEqual(session.receive(seen), [{ kind: 'emit', name: 'seen', value: seen }]);
    assert.deepEqual(session.receive({ op: 'fromTheFuture' }), []);
  });

  test('monitor marks the session monitoring once the broker agreed', () => {
    const session = greeted();
    const { id } = start(session, session.monitor());
    assert.equal(session.monitoring, false);
    session.receive({ op: 'reply', id, result: {} });
    assert.equal(session.monitoring, true);
  });

  test('session.js does no I/O: no sockets, timers, emitters or process', () => {
    const source = readFileSync(new URL('../src/session.js', import.meta.url), 'utf8');
    const code = source.replace(/\/\/.*$|\/\*[\s\S]*?\*\//gm, '');
    assert.deepEqual(code.match(/from '[^']+'/g), [
      "from './errors.js'",
      "from './errorTable.js'",
      "from './framing.js'",
    ]);
    for (const word of ['setTimeout', 'setImmediate', 'process', 'EventEmitter', 'Date.now', 'Math.random']) {
      assert.ok(!code.includes(word), `session.js uses ${word}`);
    }
  });
});

/** A small seeded generator (mulberry32), so that a failing order can be played again. */
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A shuffled copy of `items` (Fisher-Yates). */
function shuffle(items, random) {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy;
}
