// What the client needs to outlive the broker: the ordered list of the application's
// observers and handlers, the retry delays, and the resumed registration frames
// (PROTOCOL.md §13, 39-40). No sockets here; it never re-sends an application's request.

/** The first retry comes at once; each later one waits this much longer than the last. */
export const FIRST_DELAY_MS = 10;
const GROWTH = 1.5;
/** Retries never wait longer than this, so a restarted broker is found within a second. */
export const MAX_DELAY_MS = 1_000;

/** The error a resumed registration gets when a newer one holds its key or route. */
export const SUPERSEDED = 'superseded';

/**
 * Milliseconds to wait before each connection attempt: 0, then about 10 ms growing by
 * half each time up to 1 s, each scaled by a random 75-100 % so that many clients do
 * not knock at the same instant.
 * @returns {Generator<number>}
 */
export function* retryDelays(random = Math.random) {
  yield 0;
  let delay = FIRST_DELAY_MS;
  for (;;) {
    yield delay * (0.75 + 0.25 * random());
    delay = Math.min(MAX_DELAY_MS, delay * GROWTH);
  }
}

/**
 * @typedef {object} Registration
 * @property {'observer' | 'handler'} kind
 * @property {string} handle the id the application got first; it stays valid
 * @property {string} current the broker's id on the present connection
 * @property {Function} handler
 * @property {Function} [onEvicted]
 * @property {string[]} [events]
 * @property {number} [priority]
 * @property {string | null} [key]
 * @property {string} [channel]
 * @property {string | null} [method]
 */

/** The application's registrations, in the order it made them. */
export class Registry {
  /** @type {Registration[]} */
  #entries = [];

  /** @param {Registration} entry */
  add(entry) {
    if (entry.kind === 'handler') {
      // A new handler of ours for the same route replaced the old one.
      this.#entries = this.#entries.filter(
        (e) => !(e.kind === 'handler' && e.channel === entry.channel && e.method === entry.method),
      );
    }
    this.#entries.push(entry);
  }

  /** The present broker id of a handle; other ids come back unchanged. */
  current(handle) {
    return this.#entries.find((e) => e.handle === handle)?.current ?? handle;
  }

  /** Broker ids turned back into the application's handles, where they are ours. */
  handles(ids) {
    return ids.map((id) => this.#entries.find((e) => e.current === id)?.handle ?? id);
  }

  /** @param {string[]} ids broker ids that are gone */
  forget(ids) {
    this.#entries = this.#entries.filter((e) => !ids.includes(e.current));
  }

  /** Keeps only what the lost connection still held; returns it. */
  keepLive(liveIds) {
    this.#entries = this.#entries.filter((e) => liveIds.has(e.current));
    return [...this.#entries];
  }

  get entries() {
    return [...this.#entries];
  }

  get size() {
    return this.#entries.length;
  }
}

/**
 * The request (op and fields) that makes a registration again, marked `resume`.
 * @param {Registration} e
 * @returns {[string, object]}
 */
export function resumeRequest(e) {
  if (e.kind === 'observer') {
    const fields = { events: e.events, priority: e.priority, resume: true };
    if (e.key != null) fields.key = e.key;
    return ['subscribe', fields];
  }
  const fields = { channel: e.channel, resume: true };
  if (e.method != null) fields.method = e.method;
  return ['handle', fields];
}

/** The holder a `superseded` error names, else ''. */
export function supersededBy(error) {
  return error?.code === SUPERSEDED && typeof error.details?.by === 'string' ? error.details.by : '';
}

/** A promise that resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms, signal) {
  return new Promise((resolve) => {
    if (ms <= 0 || signal.aborted) return resolve();
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
