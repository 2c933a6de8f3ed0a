// Clients that outlive the broker: a real broker is restarted on the same socket under the
// client (SIGTERM and SIGKILL); observers, handlers, keys, order and the monitor come back,
// a pending request fails exactly once, and a resumed key yields to a newer holder.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';

import { ConnectionLostError, complete, connect, NEXT, RequestTimeoutError, STOP } from '../src/index.js';
import { brokerBinary, delay, within } from '../test-support/broker.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-re-'));
const socket = path.join(dir, 'b.sock');
after(() => rmSync(dir, { recursive: true, force: true }));

/** One broker process on `socket`, with `flags`, ready when this resolves. */
async function startOn(flags = []) {
  const child = spawn(brokerBinary(), ['broker', '--socket', socket, ...flags], {
    stdio: ['ignore', 'ignore', 'ignore'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + 15_000;
  while (!(await accepts())) {
    if (Date.now() > deadline) throw new Error('broker not ready');
    await delay(20);
  }
  return { child, exited };
}

function accepts() {
  return new Promise((resolve) => {
    const s = net.createConnection({ path: socket });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

async function stop(broker, signal) {
  broker.child.kill(signal);
  await within(broker.exited, 5_000, 'broker exit');
}

function once(emitter, name) {
  return new Promise((resolve) => emitter.once(name, resolve));
}

for (const signal of ['SIGTERM', 'SIGKILL']) {
  test(`observers, handlers and the monitor come back after ${signal}`, async () => {
    let broker = await startOn();
    const bus = await connect({ socket, name: 'survivor', timeout: 10_000 });
    const states = [];
    bus.on('disconnected', () => states.push('disconnected'));
    bus.on('reconnected', () => states.push('reconnected'));
    const first = await bus.addObserver('e', () => NEXT, { priority: 10, key: 'jk' });
    const second = await bus.addObserver(['e', 'f'], () => NEXT, { priority: 10 });
    const third = await bus.addObserver('e', (ev) => complete(ev.payload), { priority: 30 });
    const handler = await bus.methodChannel('jch').setMethodCallHandler((call) => call.arguments, { method: 'm' });
    const monitor = await connect({ socket, timeout: 10_000 });
    await monitor.monitor();
    const seen = [];
    monitor.on('seen', (frame) => seen.push(frame));

    // A waiting take is a request in flight: it fails exactly once, and is not re-sent.
    const outcomes = [];
    const pending = bus.take('never', { wait: 30_000 }).then(
      () => outcomes.push('result'),
      (error) => outcomes.push(error instanceof ConnectionLostError ? 'lost' : error.code),
    );
    await delay(200);
    const back = once(bus, 'reconnected');
    const monitorBack = once(monitor, 'reconnected');
    await stop(broker, signal);
    broker = await startOn();
    await within(pending, 10_000, 'take settles');
    assert.deepEqual(outcomes, [signal === 'SIGTERM' ? 'shutting_down' : 'lost']);
    const { ids, superseded } = await within(back, 10_000, 'reconnected');
    await within(monitorBack, 10_000, 'monitor reconnected');
    assert.deepEqual(states, ['disconnected', 'reconnected']);
    assert.deepEqual(Object.keys(ids).sort(), [first, second, third, handler].sort());
    assert.deepEqual(superseded, []);

    const probe = await connect({ socket, reconnect: false, timeout: 10_000 });
    const status = await probe.status();
    const mine = status.observers.filter((o) => o.client === bus.id);
    assert.deepEqual(
      mine.map((o) => [o.events, o.priority, o.key]),
      [
        [['e'], 10, 'jk'],
        [['e', 'f'], 10, null],
        [['e'], 30, null],
      ],
    );
    const result = await probe.post('e', 'p');
    assert.deepEqual(
      result.trace.map((h) => h.observer),
      [ids[first], ids[second], ids[third]],
    );
    assert.equal(result.value, 'p');
    assert.deepEqual(await probe.methodChannel('jch').invokeMethod('m', [7]), [7]);
    assert.ok(
      seen.some((f) => f.frame?.op === 'post'),
      'the monitor sees frames again',
    );
    assert.equal(status.counters.posted, 0);
    assert.deepEqual(await bus.removeObserver(second), [second]);
    assert.equal(bus.currentId(first), ids[first]);
    await probe.close();
    await monitor.close();
    await bus.close();
    await stop(broker, 'SIGTERM');
  });
}

test('a resumed key yields to a newer holder, and the old holder hears it once', async () => {
  let broker = await startOn();
  const bus = await connect({ socket, timeout: 10_000 });
  const evictions = [];
  await bus.addObserver('e', () => NEXT, { key: 'k', onEvicted: (e) => evictions.push(e) });
  const back = once(bus, 'reconnected');
  await stop(broker, 'SIGKILL');
  broker = await startOn();
  const newcomer = await connect({ socket, reconnect: false, timeout: 10_000 });
  const mine = await newcomer.addObserver('e', () => STOP, { key: 'k' });
  await within(back, 10_000, 'reconnected');
  await delay(200);
  assert.equal(evictions.length, 1);
  assert.equal(evictions[0].by, mine);
  const status = await newcomer.status();
  assert.deepEqual(
    status.observers.map((o) => [o.observer, o.key]),
    [[mine, 'k']],
  );
  await newcomer.close();
  await bus.close();
  await stop(broker, 'SIGTERM');
});

/** How a post ended, as the keyed-resend test compares it. */
async function outcome(promise) {
  try {
    const result = await promise;
    return `${result.value ?? result.outcome} repeat=${result.repeat === true}`;
  } catch (error) {
    if (error instanceof ConnectionLostError) return 'lost';
    return `${error.code} repeat=${error.repeat}`;
  }
}

test('keyed posts in flight are sent again after SIGKILL and answered once', async () => {
  // A broker with --state-dir dies with posts in flight: the keyed ones go out again on the
  // new connection and each is answered exactly once (the running one hears `interrupted`,
  // the queued ones run once); the unkeyed one fails.
  const flags = ['--state-dir', path.join(dir, 'state')];
  let broker = await startOn(flags);
  const bus = await connect({ socket, timeout: 20_000 });
  const seen = [];
  let release;
  const released = new Promise((resolve) => {
    release = resolve;
  });
  await bus.addObserver('e', async ({ payload }) => {
    seen.push(payload);
    if (payload === 'held') await released; // the broker dies while this event runs
    return complete(payload);
  });
  // Holds nothing but its keyed post in flight: it reconnects for it.
  const poster = await connect({ socket, timeout: 20_000 });
  try {
    const held = outcome(bus.post('e', 'held', { once: 'k-held' }));
    await within(
      (async () => {
        while (seen.length === 0) await delay(10);
      })(),
      10_000,
      'the held event runs',
    );
    const queued = outcome(bus.post('e', 'queued', { once: 'k-queued' }));
    const plain = outcome(bus.post('e', 'plain'));
    const solo = outcome(poster.post('e', 'solo', { once: 'k-solo' }));
    const probe = await connect({ socket, reconnect: false });
    while ((await probe.status()).queue.pending < 3) await delay(10);
    await probe.close();
    await stop(broker, 'SIGKILL');
    broker = await startOn(flags);
    assert.equal(await within(held, 20_000, 'held'), 'interrupted repeat=true');
    assert.equal(await within(queued, 20_000, 'queued'), 'queued repeat=false');
    assert.equal(await within(plain, 20_000, 'plain'), 'lost');
    // Run once on the new broker, before or after the observer is made again.
    assert.ok(['solo repeat=false', 'unhandled repeat=false'].includes(await within(solo, 20_000, 'solo')));
    assert.deepEqual(
      seen.filter((p) => p !== 'solo'),
      ['held', 'queued'],
    );
    assert.ok(seen.filter((p) => p === 'solo').length <= 1);

    const again = await bus.post('e', 'queued', { once: 'k-queued' });
    assert.equal(again.repeat, true);
    assert.equal(again.value, 'queued');
    await assert.rejects(
      bus.post('e', 'other', { once: 'k-queued' }),
      (error) => error.code === 'once_conflict' && !error.repeat,
    );
    const checker = await connect({ socket, reconnect: false });
    assert.equal((await checker.status()).counters.posted, 2);
    await checker.close();
  } finally {
    release();
    await poster.close();
    await bus.close();
    await stop(broker, 'SIGTERM');
  }
});

test('requests made while reconnecting wait within their timeout', async () => {
  let broker = await startOn();
  const bus = await connect({ socket, timeout: 10_000 });
  await bus.addObserver('e', () => NEXT);
  const lost = once(bus, 'disconnected');
  await stop(broker, 'SIGKILL');
  await within(lost, 5_000, 'disconnected');
  assert.equal(bus.reconnecting, true);
  await assert.rejects(
    bus.ping({ timeout: 300 }),
    (error) => error instanceof RequestTimeoutError && /unreachable/.test(error.message),
  );
  const later = bus.ping({ timeout: 10_000 });
  broker = await startOn();
  await within(later, 10_000, 'ping after the restart');
  await bus.close();
  await stop(broker, 'SIGTERM');
});

test('reconnect: false stays lost', async () => {
  let broker = await startOn();
  const bus = await connect({ socket, timeout: 5_000, reconnect: false });
  await bus.addObserver('e', () => NEXT);
  const closed = once(bus, 'close');
  await stop(broker, 'SIGTERM');
  broker = await startOn();
  await within(closed, 5_000, 'close');
  await assert.rejects(bus.ping(), ConnectionLostError);
  await bus.close();
  await stop(broker, 'SIGTERM');
});
