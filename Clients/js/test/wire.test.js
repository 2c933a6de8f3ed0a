// The exact frames the client writes, checked against a scripted peer on a Unix socket:
// the hello, observer answers, returns with and without details, and how the client
// reads replies split across reads or packed into one.

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import {
  BrokerError,
  complete,
  connect,
  encodeFrame,
  FrameDecoder,
  MethodCallError,
  NEXT,
  STOP,
} from '../src/index.js';
import { within } from '../test-support/broker.js';

const T = { timeout: 5_000 };

let dir;
before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A peer that plays the broker's side for one connection: `next()` resolves with each
 * frame the client sends, `send()` writes frames back.
 */
async function scriptedPeer(name) {
  const socketPath = path.join(dir, `${name}.sock`);
  const received = [];
  const waiters = [];
  let connection;
  let connectedResolve;
  const connected = new Promise((resolve) => {
    connectedResolve = resolve;
  });
  const server = net.createServer((socket) => {
    connection = socket;
    const decoder = new FrameDecoder();
    socket.on('data', (chunk) => {
      for (const frame of decoder.push(chunk)) {
        const waiter = waiters.shift();
        if (waiter) waiter(frame);
        else received.push(frame);
      }
    });
    socket.on('error', () => {});
    server.close();
    connectedResolve();
  });
  await new Promise((resolve) => server.listen(socketPath, resolve));
  return {
    socketPath,
    connected,
    next: () =>
      within(
        received.length > 0 ? Promise.resolve(received.shift()) : new Promise((resolve) => waiters.push(resolve)),
        5_000,
        'frame from the client',
      ),
    send: (...frames) => connection.write(Buffer.concat(frames.map(encodeFrame))),
    write: (bytes) => connection.write(bytes),
    end: () => connection.end(),
  };
}

/** Connects a client to a scripted peer and answers its hello. */
async function greeted(name) {
  const peer = await scriptedPeer(name);
  const connecting = connect({ socket: peer.socketPath, name, timeout: 2_000 });
  const hello = await peer.next();
  peer.send({
    op: 'reply',
    id: hello.id,
    result: { protocol: 1, server: 'notifbus/test', client: 'c1', maxFrame: 1048576 },
  });
  return { peer, client: await connecting, hello };
}

describe('frames the client writes', () => {
  test('hello carries protocol 1, an integer id and the name', T, async () => {
    const { client, hello } = await greeted('hello');
    assert.deepEqual(hello, { op: 'hello', id: hello.id, protocol: 1, name: 'hello' });
    assert.ok(Number.isInteger(hello.id) && hello.id >= 0);
    assert.equal(client.id, 'c1');
    await client.close();
  });

  test('observer answers: next, stop, complete with and without a value', T, async () => {
    const { peer, client } = await greeted('answers');
    const answers = { a: NEXT, b: STOP, c: complete({ v: 1 }), d: complete(), e: complete(null) };
    const subscribing = client.addObserver(Object.keys(answers), ({ name }) => answers[name]);
    const subscribe = await peer.next();
    assert.deepEqual(subscribe, { op: 'subscribe', id: subscribe.id, events: Object.keys(answers), priority: 100 });
    peer.send({ op: 'reply', id: subscribe.id, result: { observer: 'o1', replaced: [] } });
    assert.equal(await subscribing, 'o1');

    const expected = [
      { op: 'next', event: 1 },
      { op: 'stop', event: 2 },
      { op: 'complete', event: 3, value: { v: 1 } },
      { op: 'complete', event: 4 },
      { op: 'complete', event: 5, value: null },
    ];
    for (const [i, name] of Object.keys(answers).entries()) {
      peer.send({ op: 'event', event: i + 1, observer: 'o1', name, payload: null });
      assert.deepEqual(await peer.next(), expected[i]);
    }
    // An event for an observer this client does not know is passed on.
    peer.send({ op: 'event', event: 9, observer: 'o99', name: 'a', payload: null });
    assert.deepEqual(await peer.next(), { op: 'next', event: 9 });
    await client.close();
  });

  test('returns keep null details and leave absent details out', T, async () => {
    const { peer, client } = await greeted('returns');
    const handling = client.methodChannel('ch').setMethodCallHandler((call) => {
      switch (call.method) {
        case 'absent':
          throw new MethodCallError('E', 'absent');
        case 'null':
          throw new MethodCallError('E', 'null', null);
        case 'undefined':
          return undefined;
        default:
          return call.arguments;
      }
    });
    const handle = await peer.next();
    assert.deepEqual(handle, { op: 'handle', id: handle.id, channel: 'ch' });
    peer.send({ op: 'reply', id: handle.id, result: { handler: 'h1', replaced: null } });
    assert.equal(await handling, 'h1');

    const call = (n, method, args) => ({
      op: 'call',
      call: n,
      handler: 'h1',
      channel: 'ch',
      method,
      arguments: args,
      from: 'c2',
    });
    peer.send(call(1, 'absent', null), call(2, 'null', null), call(3, 'undefined', null), call(4, 'echo', [1]));
    const returns = [await peer.next(), await peer.next(), await peer.next(), await peer.next()];
    returns.sort((x, y) => x.call - y.call);
    assert.deepEqual(returns, [
      { op: 'return', call: 1, error: { code: 'E', message: 'absent' } },
      { op: 'return', call: 2, error: { code: 'E', message: 'null', details: null } },
      { op: 'return', call: 3, result: null },
      { op: 'return', call: 4, result: [1] },
    ]);

    peer.send(call(5, 'x', null));
    const fifth = await peer.next();
    assert.equal(fifth.call, 5);
    // A call for a handler this client no longer has answers not_implemented.
    peer.send({ ...call(6, 'x', null), handler: 'h9' });
    const orphan = await peer.next();
    assert.equal(orphan.error.code, 'not_implemented');
    await client.close();
  });

  test('invoke leaves absent arguments out', T, async () => {
    const { peer, client } = await greeted('invoke');
    const invoking = client.methodChannel('ch').invokeMethod('m');
    const invoke = await peer.next();
    assert.deepEqual(invoke, { op: 'invoke', id: invoke.id, channel: 'ch', method: 'm' });
    peer.send({ op: 'reply', id: invoke.id, error: { code: 'E', message: 'm' } });
    await assert.rejects(invoking, (error) => error instanceof MethodCallError && error.details === undefined);
    await client.close();
  });
});

describe('reading', () => {
  test('replies split across reads and packed into one are all matched', T, async () => {
    const { peer, client } = await greeted('split');
    const pings = [client.ping(), client.ping(), client.ping()];
    const ids = [(await peer.next()).id, (await peer.next()).id, (await peer.next()).id];
    const bytes = Buffer.concat(ids.map((id) => encodeFrame({ op: 'reply', id, result: {} })));
    // The first reply in two pieces, then the rest with a split header.
    peer.write(bytes.subarray(0, 3));
    await new Promise((resolve) => setTimeout(resolve, 20));
    peer.write(bytes.subarray(3, bytes.length - 10));
    await new Promise((resolve) => setTimeout(resolve, 20));
    peer.write(bytes.subarray(bytes.length - 10));
    await within(Promise.all(pings), 1_000, 'pings');
    await client.close();
  });

  test('unknown frames are ignored and late replies dropped', T, async () => {
    const { peer, client } = await greeted('unknown');
    peer.send({ op: 'future-op', x: 1 }, { op: 'reply', id: 424242, result: null });
    const pinging = client.ping();
    const ping = await peer.next();
    peer.send({ op: 'reply', id: ping.id, result: {} });
    await pinging;
    await client.close();
  });

  test('an error frame before a close rejects connect with that error', T, async () => {
    const peer = await scriptedPeer('refused');
    const connecting = connect({ socket: peer.socketPath, timeout: 2_000 });
    await peer.connected;
    peer.send({ op: 'reply', id: null, error: { code: 'forbidden', message: 'uid 1001 is not allowed' } });
    peer.end();
    await assert.rejects(connecting, (error) => error instanceof BrokerError && error.code === 'forbidden');
  });

  test('a body that is not JSON ends the connection with a clear error', T, async () => {
    const { peer, client } = await greeted('garbage');
    const pinging = client.ping();
    await peer.next();
    peer.write(Buffer.from([0, 0, 0, 3, 0x6e, 0x6f, 0x21]));
    await assert.rejects(pinging, (error) => error.code === 'connection_lost' && /JSON/.test(error.message));
  });
});
