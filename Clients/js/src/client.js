// The notifbus client: one connection to the broker, the requests in flight on it, and
// the observer and method-call handler functions this process registered. Registrations
// themselves live in the broker; reading never waits on a user handler.

import { EventEmitter } from 'node:events';
import { statSync } from 'node:fs';
import net from 'node:net';

import {
  BrokerError,
  ConnectionLostError,
  MethodCallError,
  MissingPluginError,
  NotifBusError,
  RequestTimeoutError,
} from './errors.js';
import { CLOSING_CODES } from './errorTable.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { Registry, resumeRequest, retryDelays, sleep, supersededBy } from './reconnect.js';
import { resolveSocketPath } from './socketPath.js';

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

/**
 * Client-side bound on every wait, in ms. Longer than the broker's own defaults (30 s
 * hop and call timeouts) so that the broker's answer normally comes first.
 */
export const DEFAULT_TIMEOUT = 60_000;

/** The largest delay `setTimeout` honours; longer timeouts are clamped to it. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How long `close()` waits for the broker to close its side before cutting the socket. */
const CLOSE_GRACE_MS = 1_000;

/** The lists of a `status` result that continue on the page its `next` names. */
const STATUS_LISTS = ['clients', 'observers', 'handlers', 'slots'];

/** Code of the error returned for a method call handler that threw something other than a `MethodCallError`. */
export const HANDLER_ERROR_CODE = 'error';

/**
 * An observer's answer to an event. Handlers return `NEXT`, `STOP` or `complete(value)`;
 * build no other instances.
 */
class ChainAnswer {
  /**
   * @param {'next' | 'stop' | 'complete'} op
   * @param {unknown} [value]
   */
  constructor(op, value) {
    this.op = op;
    this.value = value;
    Object.freeze(this);
  }
}

/** Observer answer: pass the event on to the next observer in the chain. */
export const NEXT = new ChainAnswer('next');

/** Observer answer: end the chain without a value (outcome `stopped`). */
export const STOP = new ChainAnswer('stop');

/**
 * Observer answer: end the chain with a value (outcome `completed`). Leaving `value`
 * out sends no value, which the broker reports as null; a `willPresent` completion
 * needs an array of presentation options.
 * @param {unknown} [value] any JSON value
 * @returns {ChainAnswer}
 */
export function complete(value) {
  return new ChainAnswer('complete', value);
}

/**
 * @typedef {object} ObserverEvent
 * @property {string} name the event name
 * @property {unknown} payload the posted payload (null when the poster sent none)
 * @property {number} event the broker's event id
 * @property {string} observer the id of the observer this hop is for
 */

/**
 * @callback ObserverHandler
 * @param {ObserverEvent} event
 * @returns {ChainAnswer | void | Promise<ChainAnswer | void>}
 *   `NEXT`, `STOP` or `complete(value)`; anything else, a throw or a rejection answers `next`
 */

/**
 * @typedef {object} Eviction
 * @property {string} [observer] the evicted observer (for observers)
 * @property {string} [handler] the evicted handler (for method call handlers)
 * @property {string} by the observer or handler that took its place
 */

/**
 * @typedef {object} MethodCall
 * @property {string} method
 * @property {unknown} arguments null when the invoker sent none
 * @property {string} channel
 * @property {string} from the invoking client's id
 * @property {number} call the broker's call id
 */

/**
 * @callback MethodCallHandler
 * @param {MethodCall} call
 * @returns {unknown} the result (any JSON value; `undefined` is sent as null), or a promise of it
 */

/**
 * @typedef {object} PostResult
 * @property {number} event
 * @property {'completed' | 'stopped' | 'unhandled'} outcome
 * @property {string | null} by the observer that completed or stopped the chain
 * @property {unknown} value the completion value, else null
 * @property {string | null} retained the slot the payload was retained in (`"launch"`), else null
 * @property {{observer: string, reply: 'next' | 'complete' | 'stop' | 'gone' | 'timeout' | 'invalid' | 'skipped'}[]} trace
 */

/**
 * @typedef {object} CallOptions
 * @property {number} [timeout] ms to wait for the reply, instead of the client's default
 */

/**
 * @typedef {object} OnceOption
 * @property {string | null} [once] an idempotency key (§3.8): the request is applied at most
 *   once for it; sent again with the same key and arguments it answers with the first
 *   outcome, marked `repeat: true`; with other arguments it rejects with `once_conflict`
 */

/**
 * @typedef {object} ConnectOptions
 * @property {string} [socket] socket path; else NOTIFBUS_SOCKET, $XDG_RUNTIME_DIR/notifbus.sock, /tmp/notifbus-$UID/notifbus.sock
 * @property {string} [name] the name the broker lists this client under
 * @property {number} [timeout] default ms for every wait, connecting included (default 60000)
 * @property {boolean} [reconnect] after a lost connection, connect again and make every
 *   observer, handler and the monitor again: by default when the client holds any of them,
 *   a waiting `take` or a keyed request in flight; `true` always, `false` never (PROTOCOL.md §13)
 * @property {boolean} [resendKeyed] send requests in flight that carry a `once` key again on
 *   the new connection, where the broker answers each exactly once (default `true`)
 */

/** @typedef {{resolve: (value: unknown) => void, reject: (error: Error) => void, timer: NodeJS.Timeout, onResult?: (result: any) => unknown, errorType: typeof BrokerError, op: string, markRepeat?: boolean, resend?: {fields: object, ms: number, started: number}}} Pending */

/** Gives `MethodChannel` access to the client's private request methods. */
let channelAccess;

/**
 * A connection to the broker. Make one with `connect()`.
 *
 * Events:
 * - `'evicted'` `(eviction: Eviction)`: one of this client's observers or handlers was
 *   displaced by a key or a (channel, method) registered elsewhere.
 * - `'close'` `(error: ConnectionLostError)`: the connection is gone; every pending
 *   promise has been rejected with a `ConnectionLostError`.
 * - `'errorFrame'` `(error: BrokerError)`: the broker sent an error frame that answers
 *   no request (for example `bad_request` about a malformed answer).
 * - `'handlerError'` `({error, observer?, event?, handler?, call?})`: an observer or
 *   method call handler threw; the broker was answered `next` or an error return.
 * - `'seen'` `(frame)`: after `monitor()`, every frame of the other connections.
 * - `'disconnected'` `(error: ConnectionLostError)`: the connection was lost and the
 *   client is reconnecting; pending promises were rejected, later requests wait.
 * - `'reconnected'` `({ids, superseded})`: back, with every live observer and handler
 *   made again: `ids` maps each one's first id to its new one, `superseded` lists those
 *   whose key or route a newer registration had taken (they also get `onEvicted`).
 */
export class Client extends EventEmitter {
  /** @type {net.Socket} */
  #socket;
  #decoder = new FrameDecoder();
  #defaultTimeout;
  #nextId = 1;
  /** @type {Map<number, Pending>} */
  #pending = new Map();
  /** @type {Map<string, {handler: ObserverHandler, onEvicted?: (eviction: Eviction) => void}>} */
  #observers = new Map();
  /** @type {Map<string, {handler: MethodCallHandler, key: string, onEvicted?: (eviction: Eviction) => void, superseded: boolean}>} */
  #handlers = new Map();
  /** Handler id registered by this client for each (channel, method) key. @type {Map<string, string>} */
  #handlerIds = new Map();
  /** The reason the connection is unusable, once it is. @type {string | null} */
  #closedReason = null;
  /** @type {Error | undefined} */
  #closeCause;
  /** @type {Promise<void>} */
  #closed;
  /** @type {{protocol: number, server: string, client: string, maxFrame: number} | null} */
  #greeting = null;
  #path = '';
  /** @type {string | undefined} */
  #name;
  /** @type {boolean | undefined} */
  #reconnect = false;
  #resendKeyed = false;
  #registry = new Registry();
  #monitoring = false;
  /** Counts connections; answers for an older one never go out on a newer one. */
  #generation = 0;
  #reconnecting = false;
  /** Requests made while reconnecting: [send, fail] pairs. @type {Set<{send: () => void, fail: (e: Error) => void}>} */
  #waiting = new Set();
  #stopReconnect = new AbortController();

  static {
    channelAccess = {
      invoke: (client, ...args) => client.#invoke(...args),
      setHandler: (client, ...args) => client.#setHandler(...args),
    };
  }

  /**
   * Connects to the broker and says hello.
   * @param {ConnectOptions} [options]
   * @returns {Promise<Client>}
   * @throws {BrokerError} when the broker refuses the connection (`forbidden`, `too_many_clients`) or the hello
   * @throws {RequestTimeoutError | ConnectionLostError | Error} when the socket cannot be reached in time
   */
  static async connect({ socket, name, timeout, reconnect, resendKeyed = true } = {}) {
    const ms = checkTimeout(timeout ?? DEFAULT_TIMEOUT, 'timeout');
    const path = resolveSocketPath(socket);
    const sock = await openSocket(path, ms);
    const client = new Client(sock, ms);
    client.#path = path;
    client.#name = name ?? undefined;
    try {
      await pollOnce();
      const fields = { protocol: PROTOCOL_VERSION };
      if (name != null) fields.name = name;
      client.#greeting = await client.#request('hello', fields);
    } catch (error) {
      client.#socket.destroy();
      if (!(error instanceof ConnectionLostError)) throw error;
      if (error.cause instanceof BrokerError) throw error.cause;
      const { cause } = error;
      throw new ConnectionLostError(
        `the broker closed the connection before answering hello${cause ? ` (${cause.message})` : ''}`,
        cause ? { cause } : undefined,
      );
    }
    client.#reconnect = reconnect;
    client.#resendKeyed = resendKeyed !== false;
    return client;
  }

  /**
   * Use `connect()`; this wraps a socket that is already connected.
   * @param {net.Socket} socket
   * @param {number} defaultTimeout
   */
  constructor(socket, defaultTimeout) {
    super();
    this.#socket = socket;
    this.#defaultTimeout = defaultTimeout;
    this.#attach(socket);
  }

  /** Wires a socket's events to this client, for the present generation only. */
  #attach(socket) {
    const generation = this.#generation;
    this.#closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('data', (chunk) => {
      if (generation === this.#generation) this.#onData(chunk);
    });
    socket.on('error', (error) => {
      if (generation === this.#generation) this.#closeCause ??= error;
    });
    socket.on('close', () => {
      if (generation === this.#generation) this.#onClose();
    });
  }

  /** The id the broker gave this client (`"c7"`). */
  get id() {
    return this.#greeting?.client ?? null;
  }

  /** The broker's version string (`"notifbus/<version>"`). */
  get server() {
    return this.#greeting?.server ?? null;
  }

  /** The largest frame the broker reads; larger requests are refused locally. */
  get maxFrame() {
    return this.#greeting?.maxFrame ?? null;
  }

  /** Whether the connection is gone for good. */
  get closed() {
    return this.#closedReason !== null;
  }

  /** Whether the connection is lost and the client is connecting again. */
  get reconnecting() {
    return this.#reconnecting;
  }

  /**
   * The broker's present id of an observer or handler of this client, given the id it
   * first got (they differ after a reconnect).
   * @param {string} handle
   */
  currentId(handle) {
    return this.#registry.current(handle);
  }

  /**
   * Closes the connection. Pending requests reject with `ConnectionLostError`; the
   * broker drops this client's observers and handlers.
   * @returns {Promise<void>} settles once the socket is closed
   */
  async close() {
    if (this.#closedReason === null) {
      this.#closedReason = 'the client was closed';
      this.#stopReconnect.abort();
      this.#reconnecting = false;
      this.#rejectPending();
      this.#socket.end();
      const timer = setTimeout(() => this.#socket.destroy(), CLOSE_GRACE_MS);
      await this.#closed;
      clearTimeout(timer);
    }
    await this.#closed;
  }

  /** @returns {Promise<void>} */
  async ping(options = {}) {
    await this.#request('ping', {}, options);
  }

  /**
   * Adds an observer to the chains of the given events.
   * @param {string | string[]} events one name or 1 to 64 distinct names
   * @param {ObserverHandler} handler runs for each hop; may be slow without blocking other traffic
   * @param {{priority?: number, key?: string | null, onEvicted?: (eviction: Eviction) => void} & CallOptions} [options]
   *   `priority`: lower runs first, default 100; `key`: unique across the broker, taking it
   *   evicts its holder; `onEvicted`: called when this observer is evicted in turn
   * @returns {Promise<string>} the observer id
   */
  async addObserver(events, handler, { priority = 100, key = null, onEvicted, timeout } = {}) {
    if (typeof handler !== 'function') throw new TypeError('handler must be a function');
    const fields = { events: typeof events === 'string' ? [events] : [...events], priority };
    if (key != null) fields.key = key;
    return this.#request('subscribe', fields, {
      timeout,
      onResult: (result) => {
        this.#observers.set(result.observer, { handler, onEvicted });
        this.#registry.add({
          kind: 'observer',
          handle: result.observer,
          current: result.observer,
          handler,
          onEvicted,
          events: fields.events,
          priority,
          key,
        });
        return result.observer;
      },
    });
  }

  /**
   * Removes an observer, from this client or any other.
   * @param {string} observer
   * @param {CallOptions} [options]
   * @returns {Promise<string[]>} the removed ids
   * @throws {BrokerError} `not_found` when no such observer exists
   */
  async removeObserver(observer, options = {}) {
    return this.#unsubscribe({ observer: this.#registry.current(observer) }, options);
  }

  /**
   * Removes the observer holding a key, from this client or any other.
   * @param {string} key
   * @param {CallOptions} [options]
   * @returns {Promise<string[]>} the removed ids
   * @throws {BrokerError} `not_found` when no observer holds the key
   */
  async removeObserverByUniqueKey(key, options = {}) {
    return this.#unsubscribe({ key }, options);
  }

  /**
   * Posts an event and waits for its chain to end. The wait includes the events queued
   * before it and every hop, so pass a longer `timeout` when chains may be slow.
   * @param {string} name
   * @param {unknown} [payload] any JSON value; left out means null
   * @param {CallOptions & OnceOption} [options]
   * @returns {Promise<PostResult>}
   * @throws {BrokerError} `invalid_payload`, `invalid_action`, `queue_full`, `once_conflict`,
   *   `interrupted` (a keyed post whose chain a broker crash cut), ...
   */
  async post(name, payload, options = {}) {
    const fields = keyed({ name }, options.once);
    if (payload !== undefined) fields.payload = payload;
    return this.#request('post', fields, { timeout: options.timeout, markRepeat: true });
  }

  /**
   * The method channel of that name, Flutter-style.
   * @param {string} name
   * @returns {MethodChannel}
   */
  methodChannel(name) {
    return new MethodChannel(this, name);
  }

  /**
   * Puts a value in a retained slot, or hands it to the oldest waiting `take`.
   * @param {string} slot
   * @param {unknown} value any JSON value; null empties the slot
   * @param {CallOptions & OnceOption} [options]
   * @returns {Promise<{replaced: boolean, delivered: boolean, repeat?: true}>}
   */
  async put(slot, value, options = {}) {
    if (value === undefined) throw new TypeError('put needs a value; pass null to empty the slot');
    const fields = keyed({ slot }, options.once);
    fields.value = value;
    return this.#request('put', fields, { timeout: options.timeout, markRepeat: true });
  }

  /**
   * Takes the value out of a slot, emptying it.
   * @param {string} slot
   * @param {{wait?: number} & CallOptions & OnceOption} [options] `wait`: ms to wait for a `put`
   *   when the slot is empty (0 to 600000); the client timeout is extended by it. With `once`,
   *   a take sent again returns the value the first took, and takes nothing
   * @returns {Promise<unknown>} the value, or null when the slot stayed empty
   */
  async take(slot, { wait, timeout, once } = {}) {
    const fields = keyed({ slot }, once);
    let ms = timeout ?? this.#defaultTimeout;
    if (wait != null) {
      fields.wait = wait;
      if (Number.isFinite(wait) && wait > 0) ms += wait;
    }
    return this.#request('take', fields, { timeout: ms });
  }

  /**
   * Reads a slot without emptying it.
   * @param {string} slot
   * @param {CallOptions} [options]
   * @returns {Promise<unknown>} the value, or null
   */
  async peek(slot, options = {}) {
    return this.#request('peek', { slot }, options);
  }

  /**
   * Replaces the whole set of notification categories.
   * @param {object[]} categories shaped like `UNNotificationCategory` (§3.6)
   * @param {CallOptions & OnceOption} [options]
   * @returns {Promise<number>} how many categories are now in force
   * @throws {BrokerError} `bad_request` when the set is invalid; the set in force stays
   */
  async setNotificationCategories(categories, options = {}) {
    const result = await this.#request('setCategories', keyed({ categories }, options.once), {
      timeout: options.timeout,
    });
    return result.count;
  }

  /**
   * The categories in force, exactly as they were set.
   * @param {CallOptions} [options]
   * @returns {Promise<object[]>}
   */
  async notificationCategories(options = {}) {
    const result = await this.#request('getCategories', {}, options);
    return result.categories;
  }

  /**
   * The broker's clients, observers, handlers, queue, slots, buffers and counters (§3.7).
   * A large status comes in pages; this asks for each in turn and resolves with them
   * merged (the lists joined, the figures of the last page); `options.timeout` bounds
   * the whole walk.
   * @param {CallOptions} [options]
   * @returns {Promise<object>}
   */
  async status(options = {}) {
    // One bound for the whole walk; the lists are joined as the pages come.
    const limit = checkTimeout(options.timeout ?? this.#defaultTimeout, 'timeout');
    const deadline = Date.now() + limit;
    let latest = await this.#request('status', {}, { ...options, timeout: limit });
    const lists = Object.fromEntries(STATUS_LISTS.map((name) => [name, [...(latest[name] ?? [])]]));
    while (latest.next !== undefined && latest.next !== null) {
      const cursor = latest.next;
      const left = deadline - Date.now();
      if (left <= 0) throw new RequestTimeoutError('status', limit, 'its pages were not all read in time');
      const page = await this.#request('status', { page: cursor }, { ...options, timeout: left });
      if (page.next === cursor) {
        throw new NotifBusError('protocol_violation', `status page ${cursor} names itself as the next page`);
      }
      for (const name of STATUS_LISTS) for (const item of page[name] ?? []) lists[name].push(item);
      latest = page;
    }
    return { ...latest, ...lists };
  }

  /**
   * Starts mirroring: from now on the client emits `'seen'` for every frame the broker
   * reads from or writes to any other connection, in order. `onSeen`, when given, is
   * added as a `'seen'` listener first, as the Swift client's `monitor { frame in }`.
   * @param {((seen: {op: 'seen', dir: 'in' | 'out', client: string, frame: object}) => void) | CallOptions} [onSeen]
   * @param {CallOptions} [options]
   * @returns {Promise<void>}
   */
  async monitor(onSeen, options = {}) {
    if (typeof onSeen === 'function') {
      this.on('seen', onSeen);
    } else {
      options = onSeen ?? {};
    }
    await this.#request('monitor', {}, options);
    this.#monitoring = true;
  }

  // Requests

  /**
   * Sends a request and settles with its reply. `onResult` runs as the reply is read,
   * before any later frame, so registrations are in place for the frames that follow.
   * @param {string} op
   * @param {object} fields
   * A request with a `once` key lost with its connection goes out again on the next one
   * (`#resendLater`); `markRepeat` adds `repeat: true` to the result of a repeat.
   * @param {{timeout?: number, onResult?: (result: any) => unknown, errorType?: typeof BrokerError, internal?: boolean, markRepeat?: boolean}} [options]
   * @returns {Promise<any>}
   */
  #request(op, fields, { timeout, onResult, errorType = BrokerError, internal = false, markRepeat = false } = {}) {
    if (this.#reconnecting && !internal && this.#closedReason === null) {
      return this.#requestWhenBack(op, fields, { timeout, onResult, errorType, markRepeat });
    }
    return new Promise((resolve, reject) => {
      if (this.#closedReason !== null) throw this.#lostError();
      const ms = checkTimeout(timeout ?? this.#defaultTimeout, 'timeout');
      const id = this.#nextId++;
      const frame = this.#encode({ op, id, ...fields });
      const timer = setTimeout(
        () => {
          this.#pending.delete(id);
          reject(new RequestTimeoutError(op, ms));
        },
        Math.min(ms, MAX_TIMER_MS),
      );
      const resend =
        this.#resendKeyed && !internal && fields.once != null ? { fields, ms, started: Date.now() } : undefined;
      this.#pending.set(id, { resolve, reject, timer, onResult, errorType, op, markRepeat, resend });
      this.#socket.write(frame);
    });
  }

  #unsubscribe(fields, options) {
    return this.#request('unsubscribe', fields, {
      timeout: options.timeout,
      onResult: (result) => {
        for (const id of result.removed) this.#observers.delete(id);
        const handles = this.#registry.handles(result.removed);
        this.#registry.forget(result.removed);
        return handles;
      },
    });
  }

  /**
   * A request made while reconnecting: it goes out once the client is back, within its
   * own timeout, or fails saying the broker is unreachable.
   */
  #requestWhenBack(op, fields, options, started = Date.now()) {
    const ms = checkTimeout(options.timeout ?? this.#defaultTimeout, 'timeout');
    return new Promise((resolve, reject) => {
      const entry = {
        send: () => {
          clearTimeout(timer);
          this.#waiting.delete(entry);
          const left = Math.max(0, ms - (Date.now() - started));
          this.#request(op, fields, { ...options, timeout: left }).then(resolve, reject);
        },
        fail: (error) => {
          clearTimeout(timer);
          this.#waiting.delete(entry);
          reject(error);
        },
      };
      const timer = setTimeout(
        () => {
          entry.fail(new RequestTimeoutError(op, ms, 'the broker is unreachable (reconnecting)'));
        },
        Math.min(Math.max(0, ms - (Date.now() - started)), MAX_TIMER_MS),
      );
      this.#waiting.add(entry);
    });
  }

  /**
   * Takes the keyed requests in flight out of `#pending`; each function returned has one
   * go out again once the client is back, with the same fields (so the same bytes), within
   * what is left of its timeout: the broker answers each exactly once.
   */
  #resendLater() {
    const later = [];
    for (const [id, pending] of [...this.#pending]) {
      if (pending.resend === undefined) continue;
      this.#pending.delete(id);
      clearTimeout(pending.timer);
      const { op, onResult, errorType, markRepeat, resend } = pending;
      later.push(() =>
        this.#requestWhenBack(
          op,
          resend.fields,
          { timeout: resend.ms, onResult, errorType, markRepeat },
          resend.started,
        ).then(pending.resolve, pending.reject),
      );
    }
    return later;
  }

  /** @param {string} channel @param {string} method @param {unknown} args @param {CallOptions} options */
  #invoke(channel, method, args, options) {
    const fields = { channel, method };
    if (args !== undefined) fields.arguments = args;
    return this.#request('invoke', fields, { timeout: options.timeout, errorType: MethodCallError });
  }

  /**
   * Registers, replaces or (with a null handler) removes this client's handler for a
   * (channel, method) key.
   * @param {string} channel
   * @param {string | null} method
   * @param {MethodCallHandler | null} handler
   * @param {{onEvicted?: (eviction: Eviction) => void} & CallOptions} options
   * @returns {Promise<string | null>} the new handler id, or null after a removal
   */
  async #setHandler(channel, method, handler, { onEvicted, timeout }) {
    const key = JSON.stringify([channel, method]);
    const current = this.#handlerIds.get(key);
    if (handler == null) {
      if (current === undefined) return null;
      this.#forgetHandler(current);
      this.#registry.forget([current]);
      try {
        await this.#request('unhandle', { handler: current }, { timeout });
      } catch (error) {
        if (!(error instanceof BrokerError && error.code === 'not_found')) throw error;
      }
      return null;
    }
    if (typeof handler !== 'function') throw new TypeError('handler must be a function or null');
    const previous = current === undefined ? undefined : this.#handlers.get(current);
    // This client replacing its own handler is not an eviction worth reporting.
    if (previous) previous.superseded = true;
    const fields = { channel };
    if (method != null) fields.method = method;
    try {
      return await this.#request('handle', fields, {
        timeout,
        onResult: (result) => {
          if (current !== undefined && result.replaced === current) this.#forgetHandler(current);
          this.#handlers.set(result.handler, { handler, key, onEvicted, superseded: false });
          this.#handlerIds.set(key, result.handler);
          this.#registry.add({
            kind: 'handler',
            handle: result.handler,
            current: result.handler,
            handler,
            onEvicted,
            channel,
            method,
          });
          return result.handler;
        },
      });
    } catch (error) {
      if (previous) previous.superseded = false;
      throw error;
    }
  }

  #forgetHandler(id) {
    const entry = this.#handlers.get(id);
    if (entry === undefined) return;
    this.#handlers.delete(id);
    if (this.#handlerIds.get(entry.key) === id) this.#handlerIds.delete(entry.key);
  }

  // Frames from the broker

  #onData(chunk) {
    let messages;
    try {
      messages = this.#decoder.push(chunk);
    } catch (error) {
      this.#closeCause = error;
      this.#socket.destroy();
      return;
    }
    for (const message of messages) this.#dispatch(message);
  }

  /** @param {Record<string, any>} message */
  #dispatch(message) {
    switch (message.op) {
      case 'reply':
        this.#onReply(message);
        break;
      case 'event':
        this.#onEvent(message);
        break;
      case 'call':
        this.#onCall(message);
        break;
      case 'evicted':
        this.#onEvicted(message);
        break;
      case 'seen':
        this.#emitLater('seen', message);
        break;
      default:
        // A frame this version does not know; newer brokers may add some.
        break;
    }
  }

  #onReply(message) {
    if (message.error !== undefined && CLOSING_CODES.has(message.error?.code)) {
      // The broker closes after this error, whether or not it names a request.
      this.#closeCause = BrokerError.fromWire(message.error);
    }
    if (message.id === null) {
      const error = BrokerError.fromWire(message.error);
      this.#emitLater('errorFrame', error);
      return;
    }
    const pending = this.#pending.get(message.id);
    if (pending === undefined) return; // its wait already ran out
    this.#pending.delete(message.id);
    clearTimeout(pending.timer);
    if ('error' in message) {
      const error = pending.errorType.fromWire(message.error);
      error.repeat = message.repeat === true;
      pending.reject(error);
      return;
    }
    try {
      let result = message.result;
      if (pending.markRepeat && message.repeat === true && result !== null && typeof result === 'object') {
        result = { ...result, repeat: true };
      }
      pending.resolve(pending.onResult ? pending.onResult(result) : result);
    } catch (error) {
      pending.reject(error);
    }
  }

  #onEvent(message) {
    const { event, observer, name } = message;
    const generation = this.#generation;
    const entry = this.#observers.get(observer);
    const payload = message.payload ?? null;
    runHandler(() => (entry ? entry.handler({ name, payload, event, observer }) : NEXT)).then(
      (answer) => {
        if (answer instanceof ChainAnswer) return this.#answer(event, answer, observer, generation);
        if (answer !== undefined) {
          const error = new TypeError('an observer must return NEXT, STOP or complete(value)');
          this.#reportHandlerError({ error, observer, event });
        }
        return this.#answer(event, NEXT, observer, generation);
      },
      (error) => {
        this.#reportHandlerError({ error, observer, event });
        return this.#answer(event, NEXT, observer, generation);
      },
    );
  }

  /** @param {number} event @param {ChainAnswer} answer @param {string} observer @param {number} generation */
  #answer(event, answer, observer, generation) {
    if (this.#closedReason !== null || generation !== this.#generation) return;
    const frame = { op: answer.op, event };
    if (answer.op === 'complete' && answer.value !== undefined) frame.value = answer.value;
    let bytes;
    try {
      bytes = this.#encode(frame);
    } catch (error) {
      this.#reportHandlerError({ error, observer, event });
      bytes = this.#encode({ op: 'next', event });
    }
    this.#socket.write(bytes);
  }

  #onCall(message) {
    const { call, handler, channel, method, from } = message;
    const generation = this.#generation;
    const entry = this.#handlers.get(handler);
    const request = { method, arguments: message.arguments ?? null, channel, from, call };
    runHandler(() => {
      if (entry === undefined) throw new MissingPluginError(`handler ${handler} is no longer registered`);
      return entry.handler(request);
    }).then(
      (result) => this.#return(call, { result: result === undefined ? null : result }, handler, generation),
      (error) => {
        if (!(error instanceof MethodCallError)) this.#reportHandlerError({ error, handler, call });
        this.#return(call, { error: wireError(error) }, handler, generation);
      },
    );
  }

  #return(call, outcome, handler, generation) {
    if (this.#closedReason !== null || generation !== this.#generation) return;
    let bytes;
    try {
      bytes = this.#encode({ op: 'return', call, ...outcome });
    } catch (error) {
      this.#reportHandlerError({ error, handler, call });
      bytes = this.#encode({ op: 'return', call, error: wireError(error) });
    }
    this.#socket.write(bytes);
  }

  #onEvicted(message) {
    const { by } = message;
    if (typeof message.observer === 'string') {
      const entry = this.#observers.get(message.observer);
      if (entry === undefined) return;
      this.#observers.delete(message.observer);
      this.#notifyEvicted(entry.onEvicted, { observer: message.observer, by });
    } else if (typeof message.handler === 'string') {
      const entry = this.#handlers.get(message.handler);
      if (entry === undefined) return;
      this.#forgetHandler(message.handler);
      if (!entry.superseded) this.#notifyEvicted(entry.onEvicted, { handler: message.handler, by });
    }
  }

  #notifyEvicted(callback, eviction) {
    process.nextTick(() => {
      if (callback) {
        try {
          callback(eviction);
        } catch (error) {
          this.#reportHandlerError({ error, ...eviction });
        }
      }
      this.emit('evicted', eviction);
    });
  }

  // Connection state

  #onClose() {
    if (this.#reconnecting) {
      // A connection made while reconnecting failed: the reconnect loop goes on.
      this.#rejectPending();
      return;
    }
    if (this.#closedReason === null && this.#shouldReconnect()) {
      this.#beginReconnect();
      return;
    }
    this.#closedReason ??= 'the connection to the broker was lost';
    this.#rejectPending();
    this.#observers.clear();
    this.#handlers.clear();
    this.#handlerIds.clear();
    this.#emitLater('close', this.#lostError());
  }

  #rejectPending() {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const { reject, timer } of pending) {
      clearTimeout(timer);
      reject(this.#lostError());
    }
    if (this.#closedReason !== null) {
      for (const entry of [...this.#waiting]) entry.fail(this.#lostError());
    }
  }

  // Reconnecting (PROTOCOL.md §13): the machinery shared with the other clients is in
  // reconnect.js; what touches this client's private state is here.

  #shouldReconnect() {
    if (this.#reconnect === false) return false;
    const live = new Set([...this.#observers.keys(), ...this.#handlers.keys()]);
    const held = this.#registry.keepLive(live).length > 0 || this.#monitoring;
    if (this.#reconnect === true) return true;
    return held || [...this.#pending.values()].some((p) => p.op === 'take' || p.resend !== undefined);
  }

  #beginReconnect() {
    this.#reconnecting = true;
    const reason = 'the connection to the broker was lost';
    const saved = this.#closedReason;
    this.#closedReason = reason;
    const error = this.#lostError();
    const resent = this.#resendLater();
    this.#rejectPending();
    this.#closedReason = saved;
    // Queued after the others failed (the failing clears the waiting requests of a client
    // that is closed, which this one is not).
    for (const send of resent) send();
    this.#observers.clear();
    this.#handlers.clear();
    this.#handlerIds.clear();
    this.#emitLater('disconnected', error);
    this.#reconnectLoop().catch((failure) => this.#reportHandlerError({ error: failure }));
  }

  async #reconnectLoop() {
    const signal = this.#stopReconnect.signal;
    for (const delay of retryDelays()) {
      await sleep(delay, signal);
      if (signal.aborted) return;
      let socket;
      try {
        socket = await openSocket(this.#path, this.#defaultTimeout);
      } catch {
        continue;
      }
      if (signal.aborted) {
        socket.destroy();
        return;
      }
      this.#generation += 1;
      const generation = this.#generation;
      this.#socket = socket;
      this.#decoder = new FrameDecoder();
      this.#closeCause = undefined;
      this.#greeting = null;
      this.#attach(socket);
      const outcome = await this.#resume(generation);
      if (outcome === null || generation !== this.#generation || socket.destroyed || signal.aborted) {
        socket.destroy();
        continue;
      }
      this.#reconnecting = false;
      for (const entry of [...this.#waiting]) entry.send();
      for (const [callback, eviction] of outcome.evictions) this.#notifyEvicted(callback, eviction);
      this.#emitLater('reconnected', { ids: outcome.ids, superseded: outcome.superseded });
      return;
    }
  }

  /** Greets and replays every registration in order; null when the connection failed on the way. */
  async #resume(generation) {
    const internal = { internal: true };
    try {
      await pollOnce();
      const fields = { protocol: PROTOCOL_VERSION };
      if (this.#name !== undefined) fields.name = this.#name;
      this.#greeting = await this.#request('hello', fields, internal);
      const entries = this.#registry.entries;
      // Each registration is in place the moment its reply is read, before any frame after
      // it (an event for it, or its eviction by a newer holder) is looked at.
      const replies = entries.map((e) => {
        const [op, wire] = resumeRequest(e);
        const onResult = (result) => {
          this.#adopt(e, e.kind === 'observer' ? result.observer : result.handler);
          return result;
        };
        return this.#request(op, wire, { ...internal, onResult }).then(
          (result) => ({ result }),
          (error) => ({ error }),
        );
      });
      const monitor = this.#monitoring ? this.#request('monitor', {}, internal) : null;
      const settled = await Promise.all(replies);
      if (monitor) await monitor;
      if (generation !== this.#generation) return null;
      const ids = {};
      const superseded = [];
      const evictions = [];
      for (const [i, e] of entries.entries()) {
        const { error } = settled[i];
        if (error instanceof ConnectionLostError) return null;
        if (error === undefined) {
          ids[e.handle] = e.current;
          continue;
        }
        this.#registry.forget([e.current]);
        superseded.push(e.handle);
        const by = supersededBy(error);
        evictions.push([e.onEvicted, e.kind === 'observer' ? { observer: e.current, by } : { handler: e.current, by }]);
      }
      return { ids, superseded, evictions };
    } catch {
      return null;
    }
  }

  /** Records a registration made again under its new broker id. */
  #adopt(e, id) {
    e.current = id;
    if (e.kind === 'observer') {
      this.#observers.set(id, { handler: e.handler, onEvicted: e.onEvicted });
    } else {
      const key = JSON.stringify([e.channel, e.method]);
      this.#handlers.set(id, { handler: e.handler, key, onEvicted: e.onEvicted, superseded: false });
      this.#handlerIds.set(key, id);
    }
  }

  #lostError() {
    const cause = this.#closeCause;
    const detail = cause ? `: ${cause.code ? `${cause.code}: ` : ''}${cause.message}` : '';
    return new ConnectionLostError(`${this.#closedReason}${detail}`, cause ? { cause } : undefined);
  }

  /**
   * Encodes a frame, refusing one the broker would not read: it would answer
   * `frame_too_large` and drop the whole connection.
   */
  #encode(message) {
    const frame = encodeFrame(message);
    const limit = this.maxFrame;
    if (limit !== null && frame.length - 4 > limit) {
      throw new RangeError(
        `${message.op} frame of ${frame.length - 4} bytes exceeds the broker's maxFrame of ${limit}`,
      );
    }
    return frame;
  }

  /**
   * Reports a throw from user code to `'handlerError'` listeners, or as a process
   * warning when there are none, so that it is never lost silently.
   */
  #reportHandlerError(report) {
    process.nextTick(() => {
      if (this.listenerCount('handlerError') > 0) {
        this.emit('handlerError', report);
        return;
      }
      const where = report.observer ?? report.handler ?? 'a callback';
      const message = report.error instanceof Error ? report.error.message : String(report.error);
      process.emitWarning(`notifbus: ${where} threw: ${message}`, { code: 'NOTIFBUS_HANDLER_ERROR' });
    });
  }

  /** Emits outside the read loop, so a listener that throws cannot disturb decoding. */
  #emitLater(name, value) {
    process.nextTick(() => this.emit(name, value));
  }
}

/**
 * A named method channel, Flutter-style. Get one with `client.methodChannel(name)`.
 * Several objects for one name are interchangeable: handlers belong to the client.
 */
export class MethodChannel {
  /** @type {Client} */
  #client;

  /**
   * @param {Client} client
   * @param {string} name
   */
  constructor(client, name) {
    this.#client = client;
    /** @type {string} */
    this.name = name;
  }

  /**
   * Calls a method on whichever process handles it.
   * @param {string} method
   * @param {unknown} [args] any JSON value; left out means null for the handler
   * @param {CallOptions} [options]
   * @returns {Promise<unknown>} the handler's result
   * @throws {MissingPluginError} when no handler exists (`not_implemented`)
   * @throws {MethodCallError} with the handler's code, message and details, or the broker's
   *   `handler_gone`, `timeout` or `shutting_down`
   */
  invokeMethod(method, args, options = {}) {
    return channelAccess.invoke(this.#client, this.name, method, args, options);
  }

  /**
   * Sets the handler for one method of this channel, or for the whole channel when
   * `method` is left out. The latest registration anywhere wins; the one it displaces
   * gets `onEvicted`. A null handler removes this client's handler for that key.
   *
   * A handler that throws `MethodCallError` returns exactly its code, message and
   * details; `MissingPluginError` returns `not_implemented`; any other throw returns
   * code `"error"` (`HANDLER_ERROR_CODE`) with the thrown message.
   * @param {MethodCallHandler | null} handler
   * @param {{method?: string | null, onEvicted?: (eviction: Eviction) => void} & CallOptions} [options]
   * @returns {Promise<string | null>} the handler id, or null after a removal
   */
  setMethodCallHandler(handler, { method = null, onEvicted, timeout } = {}) {
    return channelAccess.setHandler(this.#client, this.name, method, handler, { onEvicted, timeout });
  }
}

/**
 * Connects to the broker and says hello. See `Client.connect`.
 * @param {ConnectOptions} [options]
 * @returns {Promise<Client>}
 */
export function connect(options) {
  return Client.connect(options);
}

/**
 * Lets the event loop poll the socket once before the hello is written. A broker that
 * refuses a connection (`forbidden`, `too_many_clients`) writes its error frame at once
 * and closes; a hello written after that close fails with EPIPE, and Node then drops the
 * unread frame. Reading first keeps the broker's reason.
 */
/**
 * `fields` with the idempotency key `once`, when given, before the body members added after.
 * @param {Record<string, unknown>} fields
 * @param {string | null | undefined} once
 */
function keyed(fields, once) {
  if (once != null) fields.once = once;
  return fields;
}

function pollOnce() {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/** Runs a user handler, turning a synchronous throw into a rejection. */
function runHandler(run) {
  try {
    return Promise.resolve(run());
  } catch (error) {
    return Promise.reject(error);
  }
}

/** The wire `error` object a method call returns for a thrown value. */
function wireError(error) {
  if (error instanceof MethodCallError) {
    const wire = { code: String(error.code), message: String(error.message) };
    if (error.details !== undefined) wire.details = error.details;
    return wire;
  }
  const message = error instanceof Error ? error.message || error.name : String(error);
  return { code: HANDLER_ERROR_CODE, message };
}

/**
 * @param {unknown} value
 * @param {string} name
 * @returns {number}
 */
function checkTimeout(value, name) {
  if (typeof value !== 'number' || Number.isNaN(value) || value < 0) {
    throw new RangeError(`${name} must be a number of ms, 0 or more`);
  }
  return value;
}

/**
 * Says so when `path` exists but is no socket (a folder, a plain file): the system's
 * ECONNREFUSED would suggest a broker that is down. Keeps the error's code.
 * @param {Error & {code?: string}} error
 * @param {string} path
 * @returns {Error}
 */
function describeSocketError(error, path) {
  let what;
  try {
    const st = statSync(path);
    if (st.isDirectory()) what = "is a folder, not a socket (give the socket's path inside it)";
    else if (!st.isSocket()) what = 'is not a socket';
  } catch {
    return error;
  }
  if (what === undefined) return error;
  const described = new Error(`connect ${error.code}: ${path} ${what}`, { cause: error });
  described.code = error.code;
  return described;
}

/**
 * Opens the Unix socket, bounded by `ms`.
 * @param {string} path
 * @param {number} ms
 * @returns {Promise<net.Socket>}
 */
function openSocket(path, ms) {
  return new Promise((resolve, reject) => {
    const socket = net.createConnection({ path });
    const timer = setTimeout(
      () => {
        socket.destroy();
        reject(new RequestTimeoutError('connect', ms));
      },
      Math.min(ms, MAX_TIMER_MS),
    );
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(describeSocketError(error, path));
    });
    socket.once('connect', () => {
      clearTimeout(timer);
      socket.removeAllListeners('error');
      resolve(socket);
    });
  });
}
