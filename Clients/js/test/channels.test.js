// Method channels against the real broker: invoking both ways, routing, not_implemented,
// errors passed through with their details, replacement, concurrency and timeouts.

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { HANDLER_ERROR_CODE, MethodCallError, MissingPluginError } from '../src/index.js';
import { deferred, useBroker, within } from '../test-support/broker.js';

const bus = useBroker(['--call-timeout', '1s']);
const T = { timeout: 10_000 };

const hasCode = (code) => (error) => {
  assert.ok(error instanceof MethodCallError, `expected a MethodCallError, got ${error}`);
  assert.equal(error.code, code);
  return true;
};

describe('invoking', () => {
  test('each client can handle and invoke', T, async () => {
    const [app, plugin] = [await bus.client('app'), await bus.client('plugin')];
    const calls = [];
    await plugin.methodChannel('battery').setMethodCallHandler(
      (call) => {
        calls.push(call);
        return { level: 80, asked: call.arguments };
      },
      { method: 'getLevel' },
    );
    await app.methodChannel('ui').setMethodCallHandler(async (call) => `${call.method} shown`);

    assert.deepEqual(await app.methodChannel('battery').invokeMethod('getLevel', { unit: '%' }), {
      level: 80,
      asked: { unit: '%' },
    });
    assert.equal(await plugin.methodChannel('ui').invokeMethod('toast'), 'toast shown');

    assert.equal(calls.length, 1);
    const [call] = calls;
    assert.equal(call.method, 'getLevel');
    assert.equal(call.channel, 'battery');
    assert.equal(call.from, app.id);
    assert.equal(typeof call.call, 'number');
  });

  test('absent arguments arrive as null; results of any JSON type come back', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    await b.methodChannel('echo').setMethodCallHandler((call) => call.arguments);
    const channel = a.methodChannel('echo');
    assert.equal(await channel.invokeMethod('m'), null);
    for (const value of [null, 0, -1.5, 'text', true, [], [1, [2]], { a: { b: null } }]) {
      assert.deepEqual(await channel.invokeMethod('m', value), value);
    }
  });

  test('a handler returning nothing gives null', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    await b.methodChannel('void').setMethodCallHandler(() => {});
    assert.equal(await a.methodChannel('void').invokeMethod('m', 1), null);
  });

  test('the method handler wins over the whole-channel handler', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const channel = b.methodChannel('routes');
    await channel.setMethodCallHandler(() => 'whole channel');
    await channel.setMethodCallHandler(() => 'exact', { method: 'special' });
    assert.equal(await a.methodChannel('routes').invokeMethod('special'), 'exact');
    assert.equal(await a.methodChannel('routes').invokeMethod('ordinary'), 'whole channel');
  });

  test('calls are not serialized', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const release = deferred();
    await b.methodChannel('overlap').setMethodCallHandler(async (call) => {
      if (call.method === 'slow') await release.promise;
      return call.method;
    });
    const channel = a.methodChannel('overlap');
    let slowSettled = false;
    const slow = channel.invokeMethod('slow').finally(() => {
      slowSettled = true;
    });
    // The fast call is answered while the slow one still waits for its release (serialized,
    // it would come only after the slow one's call timeout).
    assert.equal(await channel.invokeMethod('fast'), 'fast');
    assert.equal(slowSettled, false, 'the fast call was answered only after the slow one ended');
    release.resolve();
    assert.equal(await slow, 'slow');
  });
});

describe('errors', () => {
  test('no handler: MissingPluginError with not_implemented', T, async () => {
    const a = await bus.client('a');
    await assert.rejects(a.methodChannel('nobody').invokeMethod('m'), (error) => {
      assert.ok(error instanceof MissingPluginError);
      return hasCode('not_implemented')(error);
    });
  });

  test('a handler error passes through with its details', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const reported = [];
    b.on('handlerError', (report) => reported.push(report.error.message));
    await b.methodChannel('failing').setMethodCallHandler((call) => {
      switch (call.method) {
        case 'withDetails':
          throw new MethodCallError('E_MAIL', 'no such mail', { id: 'e-1', tries: [1, 2] });
        case 'nullDetails':
          throw new MethodCallError('E_NULL', 'null details', null);
        case 'noDetails':
          throw new MethodCallError('E_NONE', 'no details');
        case 'missing':
          throw new MissingPluginError('not here');
        default:
          throw new TypeError('plain failure');
      }
    });
    const channel = a.methodChannel('failing');

    await assert.rejects(channel.invokeMethod('withDetails'), (error) => {
      hasCode('E_MAIL')(error);
      assert.equal(error.message, 'no such mail');
      assert.deepEqual(error.details, { id: 'e-1', tries: [1, 2] });
      return true;
    });
    await assert.rejects(channel.invokeMethod('nullDetails'), (error) => {
      hasCode('E_NULL')(error);
      assert.equal(error.details, null);
      return true;
    });
    await assert.rejects(channel.invokeMethod('noDetails'), (error) => {
      hasCode('E_NONE')(error);
      assert.equal(error.message, 'no details');
      assert.equal(error.details, undefined);
      return true;
    });
    await assert.rejects(channel.invokeMethod('missing'), (error) => {
      assert.ok(error instanceof MissingPluginError);
      assert.equal(error.message, 'not here');
      return true;
    });
    await assert.rejects(channel.invokeMethod('other'), (error) => {
      hasCode(HANDLER_ERROR_CODE)(error);
      assert.equal(error.message, 'plain failure');
      return true;
    });
    // Only the throw that was not a MethodCallError is reported as a handler fault.
    assert.deepEqual(reported, ['plain failure']);
  });

  test('a handler that never returns times out', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    await b.methodChannel('stuck').setMethodCallHandler(() => new Promise(() => {}));
    // The broker's call timeout ('timeout'), not the client's own ('request_timeout').
    await assert.rejects(a.methodChannel('stuck').invokeMethod('m'), hasCode('timeout'));
  });
});

describe('a handler that leaves', () => {
  // A call timeout far beyond the test's: only the handler's leaving can end the call.
  const patient = useBroker(['--call-timeout', '60s']);

  test('a handler whose connection closes gives handler_gone', T, async () => {
    const [a, b] = [await patient.client('a'), await patient.client('b')];
    const reached = deferred();
    await b.methodChannel('leaving').setMethodCallHandler(() => {
      reached.resolve();
      return new Promise(() => {});
    });
    const outcome = assert.rejects(a.methodChannel('leaving').invokeMethod('m'), hasCode('handler_gone'));
    await within(reached.promise, 8_000, 'call delivered');
    await b.close();
    await outcome;
  });
});

describe('registration', () => {
  test('the latest handler wins and the old holder is told', T, async () => {
    const [a, b, c] = [await bus.client('a'), await bus.client('b'), await bus.client('c')];
    const evicted = deferred();
    const first = await a.methodChannel('shared').setMethodCallHandler(() => 'a', {
      method: 'who',
      onEvicted: evicted.resolve,
    });
    const second = await b.methodChannel('shared').setMethodCallHandler(() => 'b', { method: 'who' });
    assert.notEqual(first, second);
    assert.deepEqual(await within(evicted.promise, 2_000, 'onEvicted'), { handler: first, by: second });
    assert.equal(await c.methodChannel('shared').invokeMethod('who'), 'b');
  });

  test('replacing its own handler does not report an eviction', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const evictions = [];
    a.on('evicted', (eviction) => evictions.push(eviction));
    const channel = a.methodChannel('mine');
    await channel.setMethodCallHandler(() => 1, { onEvicted: (e) => evictions.push(e) });
    await channel.setMethodCallHandler(() => 2);
    assert.equal(await b.methodChannel('mine').invokeMethod('m'), 2);
    await a.ping();
    assert.deepEqual(evictions, []);
    const status = await a.status();
    assert.equal(status.handlers.filter((h) => h.channel === 'mine').length, 1);
  });

  test('a null handler removes it', T, async () => {
    const [a, b] = [await bus.client('a'), await bus.client('b')];
    const channel = b.methodChannel('temporary');
    const id = await channel.setMethodCallHandler(() => 'here', { method: 'm' });
    assert.match(id, /^h/);
    assert.equal(await a.methodChannel('temporary').invokeMethod('m'), 'here');
    assert.equal(await channel.setMethodCallHandler(null, { method: 'm' }), null);
    await assert.rejects(a.methodChannel('temporary').invokeMethod('m'), MissingPluginError);
    // Removing again is not an error.
    assert.equal(await channel.setMethodCallHandler(null, { method: 'm' }), null);
  });
});
