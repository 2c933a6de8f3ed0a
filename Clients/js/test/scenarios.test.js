// Plays the multi-connection scenarios of Protocol/vectors/scenarios/ against the real
// broker, one fresh broker per scenario, over raw node:net sockets (not the client
// library), so that only the wire is checked. The format is described at the end of
// Protocol/README.md; the Swift and Python suites play the same files. Every wait is bounded.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import net from 'node:net';
import { test } from 'node:test';

import { delay, startBroker } from '../test-support/broker.js';

const folder = new URL('../../../Protocol/vectors/scenarios/', import.meta.url);

/** How long an `expect` or `expectClosed` waits unless the step gives `timeout`. */
const DEFAULT_TIMEOUT_MS = 2_000;

/** Every scenario of every file, files in name order; a file holds one object or a list. */
const scenarios = readdirSync(folder)
  .filter((file) => file.endsWith('.json'))
  .sort()
  .flatMap((file) => [JSON.parse(readFileSync(new URL(file, folder), 'utf8'))].flat());

/** One raw socket: decoded frames are queued until a step reads them. */
class Conn {
  constructor(socket) {
    this.socket = socket;
    this.buffer = Buffer.alloc(0);
    this.frames = [];
    this.closed = false;
    this.wake = null;
    this.decoder = new TextDecoder('utf-8', { fatal: true });
    socket.on('data', (chunk) => {
      this.buffer = Buffer.concat([this.buffer, chunk]);
      while (this.buffer.length >= 4) {
        const n = this.buffer.readUInt32BE(0);
        if (this.buffer.length < 4 + n) break;
        this.frames.push(JSON.parse(this.decoder.decode(this.buffer.subarray(4, 4 + n))));
        this.buffer = this.buffer.subarray(4 + n);
      }
      this.wake?.();
    });
    const end = () => {
      this.closed = true;
      this.wake?.();
    };
    socket.on('end', end);
    socket.on('close', end);
    socket.on('error', end);
  }

  static open(path) {
    return new Promise((resolve, reject) => {
      const socket = net.createConnection({ path });
      const timer = setTimeout(() => reject(new Error(`connect to ${path} timed out`)), DEFAULT_TIMEOUT_MS);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new Conn(socket));
      });
      socket.once('error', (error) => {
        clearTimeout(timer);
        reject(error);
      });
    });
  }

  send(frame) {
    const body = Buffer.from(JSON.stringify(frame), 'utf8');
    const header = Buffer.alloc(4);
    header.writeUInt32BE(body.length);
    this.socket.write(Buffer.concat([header, body]));
  }

  /** The next frame; 'closed' at end of stream; 'timeout' when nothing came within `ms`. */
  async read(ms) {
    const deadline = Date.now() + ms;
    for (;;) {
      if (this.frames.length > 0) return this.frames.shift();
      if (this.closed) return 'closed';
      const left = deadline - Date.now();
      if (left <= 0) return 'timeout';
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, left);
        this.wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wake = null;
    }
  }
}

/** Runs one scenario's steps against the broker listening on `path`. */
class Player {
  constructor(scenario, path) {
    this.scenario = scenario;
    this.path = path;
    this.conns = new Map();
    this.clients = new Map();
  }

  fail(index, step, why) {
    return new assert.AssertionError({
      message: `${this.scenario.name}: step ${index} ${JSON.stringify(step)}: ${why}`,
    });
  }

  /** Replaces every "$client:NAME" with that connection's client id. */
  substitute(value) {
    if (typeof value === 'string' && value.startsWith('$client:')) {
      const id = this.clients.get(value.slice('$client:'.length));
      if (id === undefined) throw new Error(`${this.scenario.name}: no client id for ${value}`);
      return id;
    }
    if (Array.isArray(value)) return value.map((v) => this.substitute(v));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.substitute(v)]));
    }
    return value;
  }

  /** Whether `actual` fits `expected`: "$any" fits any value; subset skips unlisted keys. */
  matches(expected, actual, subset) {
    if (expected === '$any') return true;
    if (Array.isArray(expected)) {
      return (
        Array.isArray(actual) &&
        actual.length === expected.length &&
        expected.every((e, i) => this.matches(e, actual[i], subset))
      );
    }
    if (expected !== null && typeof expected === 'object') {
      if (actual === null || typeof actual !== 'object' || Array.isArray(actual)) return false;
      const keys = Object.keys(expected);
      if (!subset && Object.keys(actual).length !== keys.length) return false;
      return keys.every((k) => Object.hasOwn(actual, k) && this.matches(expected[k], actual[k], subset));
    }
    return this.substitute(expected) === actual;
  }

  /** Connects in the listed order; each hello is answered before the next connect. */
  async connectAll() {
    for (const entry of this.scenario.connections) {
      const name = typeof entry === 'string' ? entry : entry.name;
      const conn = await Conn.open(this.path);
      this.conns.set(name, conn);
      if (this.scenario.hello === false || entry.hello === false) continue;
      conn.send({ op: 'hello', id: 'hello', protocol: 1, name });
      const reply = await conn.read(DEFAULT_TIMEOUT_MS);
      const shape = {
        op: 'reply',
        id: 'hello',
        result: { protocol: 1, server: '$any', client: '$any', maxFrame: '$any' },
      };
      if (!this.matches(shape, reply, false) || typeof reply.result.client !== 'string') {
        throw new Error(`${this.scenario.name}: hello of ${name} got ${JSON.stringify(reply)}`);
      }
      this.clients.set(name, reply.result.client);
    }
  }

  async run() {
    try {
      await this.connectAll();
      for (const [index, step] of this.scenario.steps.entries()) await this.step(index, step);
    } finally {
      for (const conn of this.conns.values()) conn.socket.destroy();
    }
  }

  async step(index, step) {
    const timeout = step.timeout ?? DEFAULT_TIMEOUT_MS;
    if ('send' in step) {
      this.conns.get(step.send).send(this.substitute(step.frame));
    } else if ('expect' in step) {
      const got = await this.conns.get(step.expect).read(timeout);
      if (typeof got === 'string') throw this.fail(index, step, `got no frame (${got} after ${timeout} ms)`);
      if (!this.matches(step.frame, got, step.match === 'subset'))
        throw this.fail(index, step, `got ${JSON.stringify(got)}`);
    } else if ('expectNothing' in step) {
      const got = await this.conns.get(step.expectNothing).read(step.within);
      if (got !== 'timeout') throw this.fail(index, step, `got ${JSON.stringify(got)}`);
    } else if ('expectClosed' in step) {
      const got = await this.conns.get(step.expectClosed).read(timeout);
      if (got !== 'closed') throw this.fail(index, step, `expected end of stream, got ${JSON.stringify(got)}`);
    } else if ('close' in step) {
      this.conns.get(step.close).socket.destroy();
    } else if ('sleep' in step) {
      await delay(step.sleep);
    } else {
      throw this.fail(index, step, 'unknown step');
    }
  }
}

test('the scenario folder holds at least 12 distinctly named scenarios', () => {
  const names = scenarios.map((s) => s.name);
  assert.ok(names.length >= 12);
  assert.equal(new Set(names).size, names.length);
});

for (const scenario of scenarios) {
  test(`scenario ${scenario.name}`, { timeout: 60_000 }, async () => {
    const broker = await startBroker(scenario.broker ?? []);
    try {
      await new Player(scenario, broker.socket).run();
    } finally {
      await broker.stop();
    }
  });
}
