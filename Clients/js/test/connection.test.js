// Connecting, closing and losing the connection: the socket path rules, the hello,
// client-side timeouts, and a broker that is killed or stopped while requests are pending.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';

import {
  BrokerError,
  ConnectionLostError,
  connect,
  NEXT,
  RequestTimeoutError,
  resolveSocketPath,
} from '../src/index.js';
import { deferred, delay, startBroker, within } from '../test-support/broker.js';

const T = { timeout: 15_000 };

/** Brokers started by a test that are still to be stopped. */
const started = [];
after(() => Promise.all(started.map((broker) => broker.stop())));

async function freshBroker(args = []) {
  const broker = await startBroker(args);
  started.push(broker);
  return broker;
}

/** Resolves with the rejection reason, so a test can wait for it later without an unhandled rejection. */
const settled = (promise) =>
  promise.then(
    (value) => ({ resolved: value }),
    (error) => error,
  );

const isLost = (error) => error instanceof ConnectionLostError && error.code === 'connection_lost';

describe('socket path', () => {
  test('the option, then NOTIFBUS_SOCKET, then XDG_RUNTIME_DIR, then /tmp/notifbus-$UID', () => {
    const env = { NOTIFBUS_SOCKET: '/env/bus.sock', XDG_RUNTIME_DIR: '/run/user/1000' };
    assert.equal(resolveSocketPath('/given.sock', env, 1000), '/given.sock');
    assert.equal(resolveSocketPath(undefined, env, 1000), '/env/bus.sock');
    assert.equal(resolveSocketPath(null, { XDG_RUNTIME_DIR: '/run/user/1000' }, 1000), '/run/user/1000/notifbus.sock');
    assert.equal(resolveSocketPath(undefined, {}, 1000), '/tmp/notifbus-1000/notifbus.sock');
    assert.equal(
      resolveSocketPath('', { NOTIFBUS_SOCKET: '', XDG_RUNTIME_DIR: '' }, 0),
      '/tmp/notifbus-0/notifbus.sock',
    );
  });

  test('connect follows NOTIFBUS_SOCKET', T, async () => {
    const broker = await freshBroker();
    const saved = process.env.NOTIFBUS_SOCKET;
    process.env.NOTIFBUS_SOCKET = broker.socket;
    try {
      const client = await connect({ name: 'from-env', timeout: 5_000 });
      assert.match(client.id, /^c/);
      assert.match(client.server, /^notifbus\//);
      assert.equal(client.maxFrame, 1048576);
      await client.close();
    } finally {
      if (saved === undefined) delete process.env.NOTIFBUS_SOCKET;
      else process.env.NOTIFBUS_SOCKET = saved;
    }
  });
});

describe('connecting', () => {
  test('no broker at the path rejects at once', T, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-'));
    try {
      await assert.rejects(
        within(connect({ socket: path.join(dir, 'none.sock'), timeout: 5_000 }), 2_000, 'connect'),
        (error) => error.code === 'ENOENT',
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a folder or a plain file at the path is named as no socket', T, async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-'));
    try {
      await assert.rejects(
        connect({ socket: dir, timeout: 5_000 }),
        (error) => error.code === 'ECONNREFUSED' && error.message.includes(`${dir} is a folder, not a socket`),
      );
      const file = path.join(dir, 'plain');
      writeFileSync(file, 'x');
      await assert.rejects(connect({ socket: file, timeout: 5_000 }), (error) =>
        error.message.includes(`${file} is not a socket`),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a connection beyond --max-clients is refused with too_many_clients', T, async () => {
    const broker = await freshBroker(['--max-clients', '1']);
    // The readiness probe's connection may still count until the broker sees it close.
    let first;
    for (let attempt = 0; first === undefined; attempt++) {
      try {
        first = await connect({ socket: broker.socket, timeout: 5_000 });
      } catch (error) {
        if (attempt >= 20 || !['too_many_clients', 'connection_lost'].includes(error.code)) throw error;
        await delay(50);
      }
    }
    try {
      // The broker writes its refusal and closes at once. If the hello is written after
      // that close, it fails with EPIPE and the unread refusal is lost with the socket, so
      // a refused connect may also end as connection_lost. The code must come through at
      // least once in a few tries, and nothing else may happen.
      const outcomes = [];
      for (let attempt = 0; attempt < 5 && !outcomes.includes('too_many_clients'); attempt++) {
        const error = await within(connect({ socket: broker.socket, timeout: 5_000 }), 2_000, 'refused connect').then(
          () => assert.fail('a second client was accepted'),
          (failure) => failure,
        );
        assert.ok(
          (error instanceof BrokerError && error.code === 'too_many_clients') ||
            (error instanceof ConnectionLostError && error.cause?.code === 'EPIPE'),
          `unexpected ${error}`,
        );
        outcomes.push(error.code);
      }
      assert.ok(outcomes.includes('too_many_clients'), `outcomes: ${outcomes}`);
      await first.ping();
    } finally {
      await first.close();
    }
  });

  test('the broker reports maxFrame and the client refuses larger frames locally', T, async () => {
    const broker = await freshBroker(['--max-frame', '200']);
    const client = await connect({ socket: broker.socket, timeout: 5_000 });
    try {
      assert.equal(client.maxFrame, 200);
      await assert.rejects(client.post('big', 'x'.repeat(300)), RangeError);
      await client.ping();
    } finally {
      await client.close();
    }
  });
});

describe('closing and timeouts', () => {
  test('close rejects pending requests and every later one', T, async () => {
    const broker = await freshBroker();
    const client = await connect({ socket: broker.socket, timeout: 5_000 });
    const waiting = assert.rejects(client.take('close-test', { wait: 10_000 }), isLost);
    const closedEvent = deferred();
    client.once('close', closedEvent.resolve);
    await client.close();
    await waiting;
    assert.ok(isLost(await within(closedEvent.promise, 5_000, "'close'")));
    assert.equal(client.closed, true);
    await assert.rejects(client.ping(), isLost);
    await assert.rejects(
      client.addObserver('x', () => NEXT),
      isLost,
    );
    await client.close();
  });

  test('a reply that does not come in time rejects with RequestTimeoutError', T, async () => {
    const broker = await freshBroker(['--hop-timeout', '10s']);
    const [observer, poster] = [
      await connect({ socket: broker.socket, timeout: 5_000 }),
      await connect({ socket: broker.socket, timeout: 5_000 }),
    ];
    try {
      const reached = deferred();
      await observer.addObserver('hang', () => {
        reached.resolve();
        return new Promise(() => {});
      });
      // The client's own timeout, while the hop still runs: the broker's hop timeout (10 s)
      // would have answered with a result, not an error.
      await assert.rejects(poster.post('hang', null, { timeout: 300 }), (error) => {
        assert.ok(error instanceof RequestTimeoutError);
        assert.equal(error.code, 'request_timeout');
        assert.equal(error.op, 'post');
        return true;
      });
      await within(reached.promise, 5_000, 'hop delivered');
      // The connection is still usable after a client-side timeout.
      await poster.ping();
    } finally {
      await Promise.all([observer.close(), poster.close()]);
    }
  });
});

describe('losing the broker', () => {
  test('SIGKILL during pending requests rejects them all as lost', T, async () => {
    const broker = await freshBroker(['--hop-timeout', '10s', '--call-timeout', '10s']);
    const [handler, invoker] = [
      await connect({ socket: broker.socket, timeout: 10_000, reconnect: false }),
      await connect({ socket: broker.socket, timeout: 10_000, reconnect: false }),
    ];
    const reached = deferred();
    await handler.methodChannel('doomed').setMethodCallHandler(() => {
      reached.resolve();
      return new Promise(() => {});
    });
    const invoked = settled(invoker.methodChannel('doomed').invokeMethod('m'));
    const taken = settled(invoker.take('doomed', { wait: 10_000 }));
    const lost = [deferred(), deferred()];
    handler.once('close', lost[0].resolve);
    invoker.once('close', lost[1].resolve);
    await within(reached.promise, 5_000, 'call delivered');

    await broker.kill();
    // Lost, not timed out (the call timeout and the take's wait are 10 s): they failed with
    // the connection.
    assert.ok(isLost(await within(invoked, 5_000, 'invoke after SIGKILL')));
    assert.ok(isLost(await within(taken, 5_000, 'take after SIGKILL')));
    await within(Promise.all(lost.map((d) => d.promise)), 5_000, "'close' on both clients");
    await assert.rejects(invoker.post('after'), isLost);
  });

  test('SIGTERM answers pending requests with shutting_down', T, async () => {
    const broker = await freshBroker();
    const client = await connect({ socket: broker.socket, timeout: 5_000 });
    const taken = assert.rejects(
      within(client.take('shutdown', { wait: 10_000 }), 6_000, 'take after SIGTERM'),
      (error) => error instanceof BrokerError && error.code === 'shutting_down',
    );
    const closed = deferred();
    client.once('close', closed.resolve);
    await client.ping();
    broker.child.kill('SIGTERM');
    await taken;
    const { code } = await within(broker.exited, 6_000, 'broker exit');
    assert.equal(code, 0);
    await within(closed.promise, 5_000, "'close'");
    await assert.rejects(client.ping(), isLost);
  });
});
