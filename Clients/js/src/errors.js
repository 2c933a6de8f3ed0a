// The errors the client rejects with. A broker error reply keeps its wire code, message
// and details unchanged; failures on this side (lost connection, a wait that ran out)
// get codes of their own that the broker never sends.

const NOT_IMPLEMENTED = 'not_implemented';

/** Base class of every error this package rejects with; `code` is a short stable string. */
export class NotifBusError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(code, message, options) {
    super(message, options);
    this.name = 'NotifBusError';
    /** @type {string} */
    this.code = code;
  }
}

/**
 * An error reply or error frame from the broker (§4 lists the codes). `details` is
 * `undefined` when the reply had none, and `null` when it carried `null`.
 */
export class BrokerError extends NotifBusError {
  /**
   * @param {string} code
   * @param {string} message
   * @param {unknown} [details]
   */
  constructor(code, message, details) {
    super(code, message);
    this.name = 'BrokerError';
    /** @type {unknown} */
    this.details = details;
    /**
     * True when the reply was marked `repeat`: the stored outcome of an earlier request
     * with the same `once` key (`interrupted` always is).
     * @type {boolean}
     */
    this.repeat = false;
  }

  /**
   * Builds the error from a wire `error` object.
   * @param {{code?: unknown, message?: unknown, details?: unknown}} error
   * @returns {BrokerError}
   */
  static fromWire(error) {
    const code = typeof error?.code === 'string' ? error.code : 'unknown';
    const message = typeof error?.message === 'string' ? error.message : '';
    // biome-ignore lint/complexity/noThisInStatic: called on a subclass, it builds that subclass
    return new this(code, message, error?.details);
  }
}

/**
 * The error of a method call, as Flutter's `PlatformException`. `invokeMethod` rejects
 * with it when the handler returned an error or the broker could not deliver the call
 * (`not_implemented`, `handler_gone`, `timeout`, `shutting_down`). A method call handler
 * throws it to return exactly this code, message and details.
 */
export class MethodCallError extends BrokerError {
  /**
   * @param {string} code
   * @param {string} [message]
   * @param {unknown} [details] leave out to send no details; `null` is sent as null
   */
  constructor(code, message = '', details = undefined) {
    super(code, message, details);
    this.name = 'MethodCallError';
  }

  /**
   * Builds the error from a wire `error` object, choosing `MissingPluginError` for
   * `not_implemented`.
   * @param {{code?: unknown, message?: unknown, details?: unknown}} error
   * @returns {MethodCallError}
   */
  static fromWire(error) {
    if (error?.code === NOT_IMPLEMENTED) {
      const message = typeof error.message === 'string' ? error.message : '';
      return new MissingPluginError(message, error.details);
    }
    // biome-ignore lint/complexity/noThisInStatic: BrokerError's, building a MethodCallError
    return super.fromWire(error);
  }
}

/**
 * No handler took the call (code `not_implemented`), as Flutter's
 * `MissingPluginException`. A handler may throw it to say it does not implement a method.
 */
export class MissingPluginError extends MethodCallError {
  /**
   * @param {string} [message]
   * @param {unknown} [details]
   */
  constructor(message = 'not implemented', details = undefined) {
    super(NOT_IMPLEMENTED, message, details);
    this.name = 'MissingPluginError';
  }
}

/**
 * The connection closed, or was never usable, before the answer came. Code
 * `connection_lost`; `cause` holds the broker's last error frame or the socket error,
 * when there was one.
 */
export class ConnectionLostError extends NotifBusError {
  /**
   * @param {string} message
   * @param {ErrorOptions} [options]
   */
  constructor(message, options) {
    super('connection_lost', message, options);
    this.name = 'ConnectionLostError';
  }
}

/**
 * No answer came within the client-side timeout. Code `request_timeout`, distinct from
 * the broker's own `timeout` code.
 */
export class RequestTimeoutError extends NotifBusError {
  /**
   * @param {string} op the request that timed out
   * @param {number} ms
   * @param {string} [why] what kept the reply away, when the client knows it
   */
  constructor(op, ms, why) {
    super('request_timeout', `no reply to ${op} within ${ms} ms${why ? `: ${why}` : ''}`);
    this.name = 'RequestTimeoutError';
    /** @type {string} */
    this.op = op;
    /** @type {number} */
    this.timeoutMs = ms;
  }
}
