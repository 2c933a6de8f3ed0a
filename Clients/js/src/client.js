// The notifbus client's socket front: it owns the socket, the timers and the emitter, feeds
// the broker's bytes to framing and the messages to its `Session` (session.js, which holds
// the protocol state), writes the frames the session returns and runs the user's code.
// Registrations themselves live in the broker; reading never waits on a user handler.

import { EventEmitter } from 'node:events';
import { statSync } from 'node:fs';
import net from 'node:net';

import { BrokerError, ConnectionLostError, NotifBusError, RequestTimeoutError } from './errors.js';
import { FrameDecoder } from './framing.js';
import { Registry, resumeRequest, retryDelays, sleep, supersededBy } from './reconnect.js';
import { Session } from './session.js';
import { resolveSocketPath } from './socketPath.js';

export { complete, HANDLER_ERROR_CODE, NEXT, PROTOCOL_VERSION, STOP } from './session.js';

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

/**
 * What the client keeps of a request in flight, handed to the session as its waiter.
 * `onValue` runs as the reply is read, after the session's own bookkeeping; `resend`
 * says the request goes out again on the next connection when this one is lost.
 * @typedef {{resolve: (value: unknown) => void, reject: (error: Error) => void, timer?: NodeJS.Timeout, onValue?: (value: any) => unknown, ms: number, resend: boolean, started: number}} Waiter
 */

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
  #session = new Session();
  #defaultTimeout;
  /** @type {Promise<void>} */
  #closed;
  #path = '';
  /** @type {string | undefined} */
  #name;
  /** @type {boolean | undefined} */
  #reconnect = false;
  #resendKeyed = false;
  #registry = new Registry();
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
      await client.#request(client.#session.hello(name));
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
    const generation = this.#session.generation;
    this.#closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('data', (chunk) => {
      if (generation === this.#session.generation) this.#onData(chunk);
    });
    socket.on('error', (error) => {
      if (generation === this.#session.generation) this.#session.closeCause ??= error;
    });
    socket.on('close', () => {
      if (generation === this.#session.generation) this.#onClose();
    });
  }

  /** The id the broker gave this client (`"c7"`). */
  get id() {
    return this.#session.greeting?.client ?? null;
  }

  /** The broker's version string (`"notifbus/<version>"`). */
  get server() {
    return this.#session.greeting?.server ?? null;
  }

  /** The largest frame the broker reads; larger requests are refused locally. */
  get maxFrame() {
    return this.#session.maxFrame;
  }

  /** Whether the connection is gone for good. */
  get closed() {
    return this.#session.closed;
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
    if (!this.#session.closed) {
      this.#session.markClosed('the client was closed');
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
    await this.#request(this.#session.ping(), options);
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
    const names = typeof events === 'string' ? [events] : [...events];
    return this.#request(this.#session.subscribe(names, handler, { priority, key, onEvicted }), {
      timeout,
      onValue: (observer) => {
        this.#registry.add({
          kind: 'observer',
          handle: observer,
          current: observer,
          handler,
          onEvicted,
          events: names,
          priority,
          key,
        });
        return observer;
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
    return this.#request(this.#session.post(name, payload, options.once), { timeout: options.timeout });
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
    return this.#request(this.#session.put(slot, value, options.once), { timeout: options.timeout });
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
    let ms = timeout ?? this.#defaultTimeout;
    if (wait != null && Number.isFinite(wait) && wait > 0) ms += wait;
    return this.#request(this.#session.take(slot, wait, once), { timeout: ms });
  }

  /**
   * Reads a slot without emptying it.
   * @param {string} slot
   * @param {CallOptions} [options]
   * @returns {Promise<unknown>} the value, or null
   */
  async peek(slot, options = {}) {
    return this.#request(this.#session.peek(slot), options);
  }

  /**
   * Replaces the whole set of notification categories.
   * @param {object[]} categories shaped like `UNNotificationCategory` (§3.6)
   * @param {CallOptions & OnceOption} [options]
   * @returns {Promise<number>} how many categories are now in force
   * @throws {BrokerError} `bad_request` when the set is invalid; the set in force stays
   */
  async setNotificationCategories(categories, options = {}) {
    const result = await this.#request(this.#session.setCategories(categories, options.once), {
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
    const result = await this.#request(this.#session.getCategories(), options);
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
    let latest = await this.#request(this.#session.status(), { ...options, timeout: limit });
    const lists = Object.fromEntries(STATUS_LISTS.map((name) => [name, [...(latest[name] ?? [])]]));
    while (latest.next !== undefined && latest.next !== null) {
      const cursor = latest.next;
      const left = deadline - Date.now();
      if (left <= 0) throw new RequestTimeoutError('status', limit, 'its pages were not all read in time');
      const page = await this.#request(this.#session.status(cursor), { ...options, timeout: left });
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
    await this.#request(this.#session.monitor(), options);
  }

  // Requests

  /**
   * Sends a request and settles with its reply. `onValue` runs as the reply is read,
   * after the session's own bookkeeping and before any later frame, so registrations are
   * in place for the frames that follow. A request with a `once` key lost with its
   * connection goes out again on the next one (`#resendLater`).
   * @param {import('./session.js').Request} request
   * @param {{timeout?: number, onValue?: (value: any) => unknown, internal?: boolean}} [options]
   * @returns {Promise<any>}
   */
  #request(request, { timeout, onValue, internal = false } = {}) {
    if (this.#reconnecting && !internal && !this.#session.closed) {
      return this.#requestWhenBack(request, { timeout, onValue });
    }
    return new Promise((resolve, reject) => {
      if (this.#session.closed) throw this.#session.lostError();
      const ms = checkTimeout(timeout ?? this.#defaultTimeout, 'timeout');
      const resend = this.#resendKeyed && !internal && request.keyed;
      /** @type {Waiter} */
      const waiter = { resolve, reject, onValue, ms, resend, started: resend ? Date.now() : 0 };
      const { id, frame } = this.#session.start(request, waiter);
      waiter.timer = setTimeout(
        () => {
          this.#session.cancel(id);
          reject(new RequestTimeoutError(request.op, ms));
        },
        Math.min(ms, MAX_TIMER_MS),
      );
      this.#socket.write(frame);
    });
  }

  #unsubscribe(fields, options) {
    return this.#request(this.#session.unsubscribe(fields), {
      timeout: options.timeout,
      onValue: (removed) => {
        const handles = this.#registry.handles(removed);
        this.#registry.forget(removed);
        return handles;
      },
    });
  }

  /**
   * A request made while reconnecting: it goes out once the client is back, within its
   * own timeout, or fails saying the broker is unreachable.
   */
  #requestWhenBack(request, options, started = Date.now()) {
    const ms = checkTimeout(options.timeout ?? this.#defaultTimeout, 'timeout');
    return new Promise((resolve, reject) => {
      const entry = {
        send: () => {
          clearTimeout(timer);
          this.#waiting.delete(entry);
          const left = Math.max(0, ms - (Date.now() - started));
          this.#request(request, { ...options, timeout: left }).then(resolve, reject);
        },
        fail: (error) => {
          clearTimeout(timer);
          this.#waiting.delete(entry);
          reject(error);
        },
      };
      const timer = setTimeout(
        () => {
          entry.fail(new RequestTimeoutError(request.op, ms, 'the broker is unreachable (reconnecting)'));
        },
        Math.min(Math.max(0, ms - (Date.now() - started)), MAX_TIMER_MS),
      );
      this.#waiting.add(entry);
    });
  }

  /**
   * Takes the keyed requests in flight out of the session; each function returned has one
   * go out again once the client is back, with the same fields (so the same bytes), within
   * what is left of its timeout: the broker answers each exactly once.
   */
  #resendLater() {
    const later = [];
    for (const { request, waiter } of this.#session.withdraw((_, waiter) => waiter.resend)) {
      clearTimeout(waiter.timer);
      later.push(() =>
        this.#requestWhenBack(request, { timeout: waiter.ms, onValue: waiter.onValue }, waiter.started).then(
          waiter.resolve,
          waiter.reject,
        ),
      );
    }
    return later;
  }

  /** @param {string} channel @param {string} method @param {unknown} args @param {CallOptions} options */
  #invoke(channel, method, args, options) {
    return this.#request(this.#session.invoke(channel, method, args), { timeout: options.timeout });
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
    if (handler == null) {
      const current = this.#session.handlerId(channel, method);
      if (current === undefined) return null;
      this.#session.forgetHandler(current);
      this.#registry.forget([current]);
      try {
        await this.#request(this.#session.unhandle(current), { timeout });
      } catch (error) {
        if (!(error instanceof BrokerError && error.code === 'not_found')) throw error;
      }
      return null;
    }
    if (typeof handler !== 'function') throw new TypeError('handler must be a function or null');
    // This client replacing its own handler is not an eviction worth reporting.
    const request = this.#session.handle(channel, method, handler, onEvicted);
    try {
      return await this.#request(request, {
        timeout,
        onValue: (id) => {
          this.#registry.add({ kind: 'handler', handle: id, current: id, handler, onEvicted, channel, method });
          return id;
        },
      });
    } catch (error) {
      request.undo();
      throw error;
    }
  }

  // Frames from the broker

  #onData(chunk) {
    let messages;
    try {
      messages = this.#decoder.push(chunk);
    } catch (error) {
      this.#session.closeCause = error;
      this.#socket.destroy();
      return;
    }
    for (const message of messages) this.#perform(this.#session.receive(message));
  }

  /**
   * Carries out the session's effects, in order (session.js lists them).
   * @param {import('./session.js').Effect[]} effects
   */
  #perform(effects) {
    for (const effect of effects) {
      switch (effect.kind) {
        case 'write':
          this.#socket.write(effect.frame);
          break;
        case 'resolve':
          this.#settle(effect.waiter, effect.value);
          break;
        case 'reject':
          clearTimeout(effect.waiter.timer);
          effect.waiter.reject(effect.error);
          break;
        case 'event':
          this.#deliverEvent(effect);
          break;
        case 'call':
          this.#deliverCall(effect);
          break;
        case 'evicted':
          this.#notifyEvicted(effect.callback, effect.eviction);
          break;
        case 'emit':
          this.#emitLater(effect.name, effect.value);
          break;
        case 'handlerError':
          this.#reportHandlerError(effect.report);
          break;
        default:
          throw new Error(`notifbus: unknown session effect ${effect.kind}`);
      }
    }
  }

  /** @param {Waiter} waiter @param {unknown} value */
  #settle(waiter, value) {
    clearTimeout(waiter.timer);
    try {
      waiter.resolve(waiter.onValue ? waiter.onValue(value) : value);
    } catch (error) {
      waiter.reject(error);
    }
  }

  #deliverEvent(delivery) {
    const { handler } = delivery;
    runHandler(() => handler(delivery.event)).then(
      (answer) => this.#perform(this.#session.answer(delivery, answer)),
      (error) => this.#perform(this.#session.answerFailure(delivery, error)),
    );
  }

  #deliverCall(delivery) {
    const { handler } = delivery;
    runHandler(() => handler(delivery.call)).then(
      (result) => this.#perform(this.#session.methodReturn(delivery, result)),
      (error) => this.#perform(this.#session.methodFailure(delivery, error)),
    );
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
    if (!this.#session.closed && this.#shouldReconnect()) {
      this.#beginReconnect();
      return;
    }
    this.#session.markClosed('the connection to the broker was lost');
    this.#rejectPending();
    this.#session.forgetRegistrations();
    this.#emitLater('close', this.#session.lostError());
  }

  /**
   * Fails every request in flight with a `ConnectionLostError` for `reason`, and, when
   * there is a reason, the requests waiting for a reconnection too.
   * @param {string | null} [reason] the session's closed reason unless given
   */
  #rejectPending(reason = this.#session.closedReason) {
    this.#perform(this.#session.failPending(reason));
    if (reason !== null) {
      for (const entry of [...this.#waiting]) entry.fail(this.#session.lostError(reason));
    }
  }

  // Reconnecting (PROTOCOL.md §13): the machinery shared with the other clients is in
  // reconnect.js; what touches this client's private state is here.

  #shouldReconnect() {
    if (this.#reconnect === false) return false;
    const held = this.#registry.keepLive(this.#session.liveIds()).length > 0 || this.#session.monitoring;
    if (this.#reconnect === true) return true;
    return held || this.#session.inFlight().some(({ request, waiter }) => request.op === 'take' || waiter.resend);
  }

  #beginReconnect() {
    this.#reconnecting = true;
    const reason = 'the connection to the broker was lost';
    const error = this.#session.lostError(reason);
    const resent = this.#resendLater();
    this.#rejectPending(reason);
    // Queued after the others failed (the failing clears the waiting requests of a client
    // that is closed, which this one is not).
    for (const send of resent) send();
    this.#session.forgetRegistrations();
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
      this.#session.beginConnection();
      const generation = this.#session.generation;
      this.#socket = socket;
      this.#decoder = new FrameDecoder();
      this.#attach(socket);
      const outcome = await this.#resume(generation);
      if (outcome === null || generation !== this.#session.generation || socket.destroyed || signal.aborted) {
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
      await this.#request(this.#session.hello(this.#name), internal);
      const entries = this.#registry.entries;
      // Each registration is in place the moment its reply is read, before any frame after
      // it (an event for it, or its eviction by a newer holder) is looked at.
      const replies = entries.map((e) => {
        const [op, wire] = resumeRequest(e);
        const onValue = (result) => {
          this.#adopt(e, e.kind === 'observer' ? result.observer : result.handler);
          return result;
        };
        return this.#request(this.#session.request(op, wire), { ...internal, onValue }).then(
          (result) => ({ result }),
          (error) => ({ error }),
        );
      });
      const monitor = this.#session.monitoring ? this.#request(this.#session.monitor(), internal) : null;
      const settled = await Promise.all(replies);
      if (monitor) await monitor;
      if (generation !== this.#session.generation) return null;
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
      this.#session.registerObserver(id, e.handler, e.onEvicted);
    } else {
      this.#session.registerHandler(id, e.channel, e.method, e.handler, e.onEvicted);
    }
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
