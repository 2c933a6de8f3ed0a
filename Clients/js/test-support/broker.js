// Test support: starts the real notifbus broker on a socket in a fresh temporary folder,
// and stops it. Every wait here is bounded. It lives outside test/ so that
// `node --test` does not count it as a test file.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, afterEach, before } from 'node:test';
import { fileURLToPath } from 'node:url';

import { connect } from '../src/index.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The repository root: Clients/js is two folders below it. */
export const repoRoot = path.resolve(here, '..', '..', '..');

/** How long a broker may take to accept connections. Debug builds start in well under a second. */
const READY_TIMEOUT_MS = 10_000;

/** How long SIGTERM gets before SIGKILL. The spec gives the broker 2 seconds to exit. */
const STOP_GRACE_MS = 3_000;

/** The broker binary: NOTIFBUS_BIN, else the debug build in the repository. */
export function brokerBinary() {
  return process.env.NOTIFBUS_BIN || path.join(repoRoot, '.build', 'debug', 'notifbus');
}

/**
 * A running broker.
 * @typedef {object} Broker
 * @property {string} socket the socket path
 * @property {import('node:child_process').ChildProcess} child
 * @property {() => string} stderr everything it wrote to stderr so far
 * @property {Promise<{code: number | null, signal: string | null}>} exited
 * @property {() => Promise<{code: number | null, signal: string | null}>} stop SIGTERM, then SIGKILL after a bound; removes the folder
 * @property {() => Promise<void>} kill SIGKILL, waiting for the exit
 */

/**
 * Starts `notifbus broker --socket <tmp>/b.sock ...args` and waits until it accepts connections.
 * @param {string[]} [args] extra flags, such as `['--hop-timeout', '500ms']`
 * @returns {Promise<Broker>}
 */
export async function startBroker(args = []) {
  const binary = brokerBinary();
  if (!existsSync(binary)) {
    throw new Error(
      `notifbus binary not found at ${binary}: run \`swift build --product notifbus\` in ${repoRoot} or set NOTIFBUS_BIN`,
    );
  }
  // A short path: sun_path holds about 108 bytes.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nbjs-'));
  const socket = path.join(dir, 'b.sock');
  const child = spawn(binary, ['broker', '--socket', socket, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8');
  child.stderr.on('data', (text) => {
    stderr += text;
  });
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => {
      stderr += String(error);
      resolve({ code: null, signal: null });
    });
  });

  let running = true;
  exited.then(() => {
    running = false;
  });

  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  const waitExit = (ms) => Promise.race([exited, delay(ms).then(() => null)]);

  const broker = {
    socket,
    child,
    exited,
    stderr: () => stderr,
    async stop() {
      if (running) {
        child.kill('SIGTERM');
        if ((await waitExit(STOP_GRACE_MS)) === null) {
          child.kill('SIGKILL');
          await waitExit(STOP_GRACE_MS);
        }
      }
      removeDir();
      return exited;
    },
    async kill() {
      if (running) child.kill('SIGKILL');
      await waitExit(STOP_GRACE_MS);
    },
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (!running) {
      removeDir();
      const { code, signal } = await exited;
      throw new Error(`broker exited (code ${code}, signal ${signal}) before it was ready: ${stderr.trim()}`);
    }
    if (await accepts(socket)) return broker;
    if (Date.now() > deadline) {
      await broker.stop();
      throw new Error(`broker not ready within ${READY_TIMEOUT_MS} ms: ${stderr.trim()}`);
    }
    await delay(25);
  }
}

/** Whether something accepts connections on the socket, bounded to one second. */
function accepts(socketPath) {
  return new Promise((resolve) => {
    const probe = net.createConnection({ path: socketPath });
    const done = (ok) => {
      clearTimeout(timer);
      probe.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), 1_000);
    probe.once('connect', () => done(true));
    probe.once('error', () => done(false));
  });
}

/** @param {number} ms */
export function delay(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Rejects when the promise has not settled within `ms`, so that no assertion waits forever.
 * @template T
 * @param {Promise<T>} promise
 * @param {number} ms
 * @param {string} what
 * @returns {Promise<T>}
 */
export function within(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * A promise with its resolve function, for handlers that report to the test.
 * @template T
 * @returns {{promise: Promise<T>, resolve: (value: T) => void}}
 */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * Registers hooks in the calling test file: a broker started before its tests and
 * stopped after them, and clients that are closed after each test.
 * @param {string[]} [args] extra broker flags
 * @returns {{broker: () => Broker, client: (name?: string, options?: object) => Promise<import('../src/index.js').Client>}}
 */
export function useBroker(args = []) {
  let broker;
  let clients = [];
  before(async () => {
    broker = await startBroker(args);
  });
  afterEach(async () => {
    const open = clients;
    clients = [];
    await Promise.all(open.map((c) => c.close()));
  });
  after(async () => {
    await broker?.stop();
  });
  return {
    broker: () => broker,
    async client(name, options = {}) {
      const c = await connect({ socket: broker.socket, name, timeout: CLIENT_TIMEOUT_MS, ...options });
      clients.push(c);
      return c;
    },
  };
}

/** Default client timeout in the tests: long enough for a loaded machine, short enough to fail fast. */
export const CLIENT_TIMEOUT_MS = 5_000;
