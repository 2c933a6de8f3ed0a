// The client's generated error table against Protocol/errors.json: the same codes in the
// same order, the same closing flag and meaning, and the client keeps a closing error
// frame as the reason its connection ended. The table's generator is Clients/generate_error_table.py.

import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CLOSING_CODES, ERROR_CODES } from '../src/errorTable.js';
import { ConnectionLostError, connect, encodeFrame } from '../src/index.js';
import { SUPERSEDED } from '../src/reconnect.js';
import { within } from '../test-support/broker.js';

const T = { timeout: 5_000 };
const table = JSON.parse(readFileSync(new URL('../../../Protocol/errors.json', import.meta.url), 'utf8')).codes;

let dir;
before(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-errors-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

describe('error table', () => {
  test('is the JSON table, code for code', () => {
    assert.deepEqual(
      Object.keys(ERROR_CODES),
      table.map((e) => e.code),
    );
    for (const e of table) {
      assert.deepEqual(
        { ...ERROR_CODES[e.code] },
        { closes: e.closes, contract: e.contract, meaning: e.meaning },
        e.code,
      );
    }
    assert.deepEqual(
      [...CLOSING_CODES].sort(),
      table
        .filter((e) => e.closes)
        .map((e) => e.code)
        .sort(),
    );
    assert.ok(SUPERSEDED in ERROR_CODES);
  });

  // A scripted peer greets the client, then sends one error frame and closes: a closing
  // code becomes the reason in the connection-lost error, any other code does not.
  for (const e of table) {
    test(`an error frame ${e.code} ${e.closes ? 'is' : 'is not'} kept as the close reason`, T, async () => {
      const socketPath = path.join(dir, `${e.code}.sock`);
      const server = net.createServer((socket) => {
        socket.once('data', () => {
          socket.write(
            encodeFrame({
              op: 'reply',
              id: 1,
              result: { protocol: 1, server: 'peer', client: 'c1', maxFrame: 1048576 },
            }),
          );
          socket.end(encodeFrame({ op: 'reply', id: null, error: { code: e.code, message: 'm' } }));
        });
      });
      await new Promise((resolve) => server.listen(socketPath, resolve));
      try {
        const bus = await connect({ socket: socketPath, reconnect: false });
        bus.on('errorFrame', () => {});
        const error = await within(new Promise((resolve) => bus.once('close', resolve)), 3_000, 'close');
        assert.ok(error instanceof ConnectionLostError, `${error}`);
        if (e.closes) assert.equal(error.cause?.code, e.code);
        else assert.notEqual(error.cause?.code, e.code);
        bus.close();
      } finally {
        server.close();
      }
    });
  }
});
