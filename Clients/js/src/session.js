// The protocol state of one client connection, without any I/O: request ids and the
// replies they wait for, the observers and handlers with the connection generation they
// belong to, and what each frame from the broker calls for. It never touches a socket, a
// timer, an emitter or `process`: the caller (client.js) carries out the effects it returns.

import { BrokerError, ConnectionLostError, MethodCallError, MissingPluginError } from './errors.js';
import { CLOSING_CODES } from './errorTable.js';
import { encodeFrame } from './framing.js';

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

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
 * A request ready to be started, with the bookkeeping its reply triggers. `onResult`
 * runs as the reply is read, before any later frame is looked at, so a registration is
 * in place for the frames that follow; its return value is what the request resolves to.
 */
export class Request {
  /**
   * @param {string} op
   * @param {Record<string, unknown>} fields the members after `op` and `id`, in wire order
   * @param {{onResult?: (result: any) => unknown, errorType?: typeof BrokerError, markRepeat?: boolean, undo?: () => void}} [options]
   *   `markRepeat`: a result marked `repeat` (a keyed request's first outcome) resolves with
   *   `repeat: true` added; `undo`: reverts what building the request changed, for the
   *   caller to run when the request fails
   */
  constructor(op, fields, { onResult, errorType = BrokerError, markRepeat = false, undo } = {}) {
    this.op = op;
    this.fields = fields;
    this.onResult = onResult;
    this.errorType = errorType;
    this.markRepeat = markRepeat;
    this.undo = undo ?? (() => {});
  }

  /** Whether it carries an idempotency key (`once`), so that sending it again cannot apply it twice. */
  get keyed() {
    return this.fields.once != null;
  }
}

/**
 * @typedef {object} Delivery a frame from the broker that runs user code, and whose answer
 *   (`Session.answer`, `Session.methodReturn`) goes out only on the connection it came on
 * @property {number} generation the connection it came on
 * @property {Function} handler the user code to run (for an unknown observer one that
 *   answers `NEXT`; for an unknown handler one that throws `MissingPluginError`)
 */

/**
 * What the caller of `receive`, `answer` and the other inputs does, in order:
 *
 *   kind            fields                         the caller
 *   'write'         frame                          writes the bytes to the socket
 *   'resolve'       waiter, value                  settles the request with value
 *   'reject'        waiter, error                  fails the request with error
 *   'event'         generation, handler, event     runs handler(event), then `answer`/`answerFailure`
 *   'call'          generation, handler, call      runs handler(call), then `methodReturn`/`methodFailure`
 *   'evicted'       callback, eviction             calls callback (when given), emits 'evicted'
 *   'emit'          name, value                    emits name ('seen', 'errorFrame') with value
 *   'handlerError'  report                         reports a throw of user code
 *
 * `waiter` is whatever the caller passed to `start` with the request.
 * @typedef {{kind: string} & Record<string, any>} Effect
 */

/**
 * The protocol state of one client: one `Session` outlives the connections a reconnecting
 * client makes, each a new `generation`. It is open until `markClosed`, then closed for good.
 *
 *   input                               open                              closed
 *   start(request, waiter)              frame returned, request pending   throws ConnectionLostError
 *   receive(reply)                      'resolve' or 'reject' of it       the same
 *   receive(event | call)               'event' or 'call'                 the same
 *   receive(evicted)                    'evicted', registration dropped   the same
 *   answer..., method...(delivery)      'write' if of this generation     nothing written
 *   failPending(reason)                 'reject' of every pending one     the same
 *   beginConnection()                   generation + 1, no greeting       the same
 */
export class Session {
  #nextId = 1;
  /** @type {Map<number, {request: Request, waiter: unknown}>} */
  #pending = new Map();
  /** @type {Map<string, {handler: Function, onEvicted?: Function}>} */
  #observers = new Map();
  /** @type {Map<string, {handler: Function, key: string, onEvicted?: Function, superseded: boolean}>} */
  #handlers = new Map();
  /** Handler id registered by this client for each (channel, method) key. @type {Map<string, string>} */
  #handlerIds = new Map();
  /** The reason the connection is unusable for good, once it is. @type {string | null} */
  #closedReason = null;
  /** @type {{protocol: number, server: string, client: string, maxFrame: number} | null} */
  #greeting = null;

  /**
   * Why the connection ended, as far as is known: the socket's error, a framing error, or
   * the error frame of a code after which the broker closes. Set by the caller for the
   * first two. @type {Error | undefined}
   */
  closeCause;
  /** Whether a `monitor` request succeeded; a resumed connection starts it again. */
  monitoring = false;
  /** Counts connections; answers for an older one never go out on a newer one. */
  generation = 0;

  /** The broker's `hello` result on the present connection, or null before it. */
  get greeting() {
    return this.#greeting;
  }

  /** The largest frame the broker reads, or null before `hello`. */
  get maxFrame() {
    return this.#greeting?.maxFrame ?? null;
  }

  /** Whether the connection is gone for good. */
  get closed() {
    return this.#closedReason !== null;
  }

  /** The reason the connection is gone for good, or null. */
  get closedReason() {
    return this.#closedReason;
  }

  /** Marks the connection gone for good, keeping the first reason given. */
  markClosed(reason) {
    this.#closedReason ??= reason;
  }

  /**
   * A fresh error saying why the connection is gone, with `closeCause` as its cause.
   * @param {string | null} [reason] the connection's closed reason unless given
   */
  lostError(reason = this.#closedReason) {
    const cause = this.closeCause;
    const detail = cause ? `: ${cause.code ? `${cause.code}: ` : ''}${cause.message}` : '';
    return new ConnectionLostError(`${reason}${detail}`, cause ? { cause } : undefined);
  }

  /**
   * Starts carrying a new connection: a new generation, no greeting, no cause yet.
   * Pending requests and registrations stay as they are.
   */
  beginConnection() {
    this.generation += 1;
    this.closeCause = undefined;
    this.#greeting = null;
  }

  /** Forgets every observer and handler; the broker dropped them with the connection. */
  forgetRegistrations() {
    this.#observers.clear();
    this.#handlers.clear();
    this.#handlerIds.clear();
  }

  /** The ids of the observers and handlers this connection holds. */
  liveIds() {
    return new Set([...this.#observers.keys(), ...this.#handlers.keys()]);
  }

  // Requests

  /**
   * Registers a request under a fresh id and returns the id and its frame.
   * @param {Request} request
   * @param {unknown} waiter handed back in the 'resolve' or 'reject' effect of its reply
   * @returns {{id: number, frame: Buffer}}
   * @throws {ConnectionLostError} when the connection is gone for good
   * @throws {RangeError | TypeError} when it cannot be encoded or exceeds the broker's maxFrame;
   *   nothing stays registered
   */
  start(request, waiter) {
    if (this.closed) throw this.lostError();
    const id = this.#nextId++;
    const frame = this.#encode({ op: request.op, id, ...request.fields });
    this.#pending.set(id, { request, waiter });
    return { id, frame };
  }

  /** Forgets a request whose wait ran out; its late reply is dropped. */
  cancel(id) {
    this.#pending.delete(id);
  }

  /** The requests waiting for a reply, in the order they were started. */
  inFlight() {
    return [...this.#pending.values()];
  }

  /**
   * Takes the pending requests `select` picks out of the session, in order; their
   * replies, should they come, are dropped.
   * @param {(request: Request, waiter: any) => boolean} select
   */
  withdraw(select) {
    const taken = [];
    for (const [id, entry] of [...this.#pending]) {
      if (!select(entry.request, entry.waiter)) continue;
      this.#pending.delete(id);
      taken.push(entry);
    }
    return taken;
  }

  /**
   * Fails every pending request with a `ConnectionLostError` for `reason`.
   * @param {string | null} [reason] the connection's closed reason unless given
   * @returns {Effect[]} one 'reject' per request, in the order they were started
   */
  failPending(reason = this.#closedReason) {
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    return pending.map(({ waiter }) => ({ kind: 'reject', waiter, error: this.lostError(reason) }));
  }

  // Request builders

  /** `hello`: its result is the greeting, and sets `maxFrame`. */
  hello(name) {
    const fields = { protocol: PROTOCOL_VERSION };
    if (name != null) fields.name = name;
    return new Request('hello', fields, {
      onResult: (result) => {
        this.#greeting = result;
        return result;
      },
    });
  }

  ping() {
    return new Request('ping', {});
  }

  /**
   * `subscribe`: resolves with the observer id, under which `handler` is registered.
   * @param {string[]} events
   * @param {Function} handler
   * @param {{priority: number, key?: string | null, onEvicted?: Function}} options
   */
  subscribe(events, handler, { priority, key = null, onEvicted }) {
    const fields = { events, priority };
    if (key != null) fields.key = key;
    return new Request('subscribe', fields, {
      onResult: (result) => {
        this.registerObserver(result.observer, handler, onEvicted);
        return result.observer;
      },
    });
  }

  /** `unsubscribe` by `{observer}` or `{key}`: resolves with the removed ids. */
  unsubscribe(fields) {
    return new Request('unsubscribe', fields, {
      onResult: (result) => {
        for (const id of result.removed) this.#observers.delete(id);
        return result.removed;
      },
    });
  }

  /** `post`, with `payload` left out when undefined. */
  post(name, payload, once) {
    const fields = keyed({ name }, once);
    if (payload !== undefined) fields.payload = payload;
    return new Request('post', fields, { markRepeat: true });
  }

  put(slot, value, once) {
    const fields = keyed({ slot }, once);
    fields.value = value;
    return new Request('put', fields, { markRepeat: true });
  }

  /** `take`, with `wait` (ms) sent when given. */
  take(slot, wait, once) {
    const fields = keyed({ slot }, once);
    if (wait != null) fields.wait = wait;
    return new Request('take', fields);
  }

  peek(slot) {
    return new Request('peek', { slot });
  }

  setCategories(categories, once) {
    return new Request('setCategories', keyed({ categories }, once));
  }

  getCategories() {
    return new Request('getCategories', {});
  }

  /** `status`: one page, the first or the one a page's `next` names. */
  status(page) {
    return new Request('status', page === undefined ? {} : { page });
  }

  /** `monitor`: from its reply on, `seen` frames come as 'emit' effects. */
  monitor() {
    return new Request(
      'monitor',
      {},
      {
        onResult: (result) => {
          this.monitoring = true;
          return result;
        },
      },
    );
  }

  /** `invoke`: errors come as `MethodCallError`. */
  invoke(channel, method, args) {
    const fields = { channel, method };
    if (args !== undefined) fields.arguments = args;
    return new Request('invoke', fields, { errorType: MethodCallError });
  }

  /**
   * `handle`: resolves with the handler id, under which `handler` is registered, replacing
   * this client's handler for the same (channel, method). While it is in flight an
   * eviction of that handler is this client's own replacement and not reported;
   * `request.undo()` reports them again.
   */
  handle(channel, method, handler, onEvicted) {
    const current = this.handlerId(channel, method);
    const previous = current === undefined ? undefined : this.#handlers.get(current);
    if (previous) previous.superseded = true;
    const fields = { channel };
    if (method != null) fields.method = method;
    return new Request('handle', fields, {
      onResult: (result) => {
        if (current !== undefined && result.replaced === current) this.forgetHandler(current);
        this.registerHandler(result.handler, channel, method, handler, onEvicted);
        return result.handler;
      },
      undo: () => {
        if (previous) previous.superseded = false;
      },
    });
  }

  unhandle(handlerId) {
    return new Request('unhandle', { handler: handlerId });
  }

  /** A request built by other code (a resumed registration): sent as given, result as is. */
  request(op, fields) {
    return new Request(op, fields);
  }

  // Registrations

  /** Records an observer the broker holds under `id`. */
  registerObserver(id, handler, onEvicted) {
    this.#observers.set(id, { handler, onEvicted });
  }

  /** Records a handler the broker holds under `id` as this client's for (channel, method). */
  registerHandler(id, channel, method, handler, onEvicted) {
    const key = handlerKey(channel, method);
    this.#handlers.set(id, { handler, key, onEvicted, superseded: false });
    this.#handlerIds.set(key, id);
  }

  /** The id of this client's handler for exactly (channel, method), if any. */
  handlerId(channel, method) {
    return this.#handlerIds.get(handlerKey(channel, method));
  }

  /** Drops the record of a handler the broker no longer has, or is about to drop. */
  forgetHandler(id) {
    const entry = this.#handlers.get(id);
    if (entry === undefined) return;
    this.#handlers.delete(id);
    if (this.#handlerIds.get(entry.key) === id) this.#handlerIds.delete(entry.key);
  }

  // Frames from the broker

  /**
   * Takes in one message from the broker.
   * @param {Record<string, any>} message
   * @returns {Effect[]}
   */
  receive(message) {
    switch (message.op) {
      case 'reply':
        return this.#onReply(message);
      case 'event':
        return [this.#onEvent(message)];
      case 'call':
        return [this.#onCall(message)];
      case 'evicted':
        return this.#onEvicted(message);
      case 'seen':
        return [{ kind: 'emit', name: 'seen', value: message }];
      default:
        // A frame this version does not know; newer brokers may add some.
        return [];
    }
  }

  #onReply(message) {
    if (message.error !== undefined && CLOSING_CODES.has(message.error?.code)) {
      // The broker closes after this error, whether or not it names a request.
      this.closeCause = BrokerError.fromWire(message.error);
    }
    if (message.id === null) {
      return [{ kind: 'emit', name: 'errorFrame', value: BrokerError.fromWire(message.error) }];
    }
    const pending = this.#pending.get(message.id);
    if (pending === undefined) return []; // its wait already ran out
    this.#pending.delete(message.id);
    const { request, waiter } = pending;
    if ('error' in message) {
      const error = request.errorType.fromWire(message.error);
      error.repeat = message.repeat === true;
      return [{ kind: 'reject', waiter, error }];
    }
    try {
      let result = message.result;
      if (request.markRepeat && message.repeat === true && result !== null && typeof result === 'object') {
        result = { ...result, repeat: true };
      }
      return [{ kind: 'resolve', waiter, value: request.onResult ? request.onResult(result) : result }];
    } catch (error) {
      return [{ kind: 'reject', waiter, error }];
    }
  }

  #onEvent(message) {
    const { event, observer, name } = message;
    const entry = this.#observers.get(observer);
    const payload = message.payload ?? null;
    return {
      kind: 'event',
      generation: this.generation,
      handler: entry ? entry.handler : () => NEXT,
      event: { name, payload, event, observer },
    };
  }

  #onCall(message) {
    const { call, handler, channel, method, from } = message;
    const entry = this.#handlers.get(handler);
    return {
      kind: 'call',
      generation: this.generation,
      handlerId: handler,
      handler:
        entry?.handler ??
        (() => {
          throw new MissingPluginError(`handler ${handler} is no longer registered`);
        }),
      call: { method, arguments: message.arguments ?? null, channel, from, call },
    };
  }

  #onEvicted(message) {
    const { by } = message;
    if (typeof message.observer === 'string') {
      const entry = this.#observers.get(message.observer);
      if (entry === undefined) return [];
      this.#observers.delete(message.observer);
      return [{ kind: 'evicted', callback: entry.onEvicted, eviction: { observer: message.observer, by } }];
    }
    if (typeof message.handler === 'string') {
      const entry = this.#handlers.get(message.handler);
      if (entry === undefined) return [];
      this.forgetHandler(message.handler);
      if (!entry.superseded) {
        return [{ kind: 'evicted', callback: entry.onEvicted, eviction: { handler: message.handler, by } }];
      }
    }
    return [];
  }

  // Answers to events and calls

  /**
   * The answer to an 'event' effect whose handler returned `answer`: anything but a
   * `ChainAnswer` or undefined is reported and answered `next`.
   * @param {Effect} delivery the 'event' effect
   * @param {unknown} answer
   * @returns {Effect[]}
   */
  answer(delivery, answer) {
    const { event, observer } = delivery.event;
    if (answer instanceof ChainAnswer) return this.#answer(delivery.generation, event, answer, observer);
    const effects = [];
    if (answer !== undefined) {
      const error = new TypeError('an observer must return NEXT, STOP or complete(value)');
      effects.push(handlerError({ error, observer, event }));
    }
    return [...effects, ...this.#answer(delivery.generation, event, NEXT, observer)];
  }

  /**
   * The answer to an 'event' effect whose handler threw `error`: reported, answered `next`.
   * @param {Effect} delivery
   * @param {unknown} error
   * @returns {Effect[]}
   */
  answerFailure(delivery, error) {
    const { event, observer } = delivery.event;
    return [handlerError({ error, observer, event }), ...this.#answer(delivery.generation, event, NEXT, observer)];
  }

  #answer(generation, event, answer, observer) {
    if (this.closed || generation !== this.generation) return [];
    const frame = { op: answer.op, event };
    if (answer.op === 'complete' && answer.value !== undefined) frame.value = answer.value;
    try {
      return [{ kind: 'write', frame: this.#encode(frame) }];
    } catch (error) {
      return [handlerError({ error, observer, event }), { kind: 'write', frame: this.#encode({ op: 'next', event }) }];
    }
  }

  /**
   * The `return` for a 'call' effect whose handler returned `result` (undefined is sent as null).
   * @param {Effect} delivery the 'call' effect
   * @param {unknown} result
   * @returns {Effect[]}
   */
  methodReturn(delivery, result) {
    return this.#return(delivery, { result: result === undefined ? null : result });
  }

  /**
   * The error `return` for a 'call' effect whose handler threw `error`; a throw other
   * than a `MethodCallError` is reported too.
   * @param {Effect} delivery
   * @param {unknown} error
   * @returns {Effect[]}
   */
  methodFailure(delivery, error) {
    const effects = [];
    if (!(error instanceof MethodCallError)) {
      effects.push(handlerError({ error, handler: delivery.handlerId, call: delivery.call.call }));
    }
    return [...effects, ...this.#return(delivery, { error: wireError(error) })];
  }

  #return(delivery, outcome) {
    if (this.closed || delivery.generation !== this.generation) return [];
    const { call } = delivery.call;
    try {
      return [{ kind: 'write', frame: this.#encode({ op: 'return', call, ...outcome }) }];
    } catch (error) {
      return [
        handlerError({ error, handler: delivery.handlerId, call }),
        { kind: 'write', frame: this.#encode({ op: 'return', call, error: wireError(error) }) },
      ];
    }
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
}

/** The effect reporting a throw of user code. */
function handlerError(report) {
  return { kind: 'handlerError', report };
}

/** The key of a (channel, method) route in `#handlerIds`. */
function handlerKey(channel, method) {
  return JSON.stringify([channel, method]);
}

/**
 * `fields` with the idempotency key `once`, when given, before the body members added after.
 * @param {Record<string, unknown>} fields
 * @param {string | null | undefined} once
 */
function keyed(fields, once) {
  if (once != null) fields.once = once;
  return fields;
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
