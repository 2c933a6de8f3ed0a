// Framing for protocol v1 (§2): a 4-byte big-endian length, then that many bytes of
// UTF-8 JSON whose top-level value is an object. Bytes in, objects out: no sockets here.
// Reads are not bounded by the broker's maxFrame, since the broker may write longer frames.

const HEADER_BYTES = 4;
/** The largest length a 4-byte header can carry. */
const MAX_LENGTH = 0xffff_ffff;

/** Raised when the bytes from the broker cannot be a v1 frame; the stream is unusable after it. */
export class FrameError extends Error {
  /** @param {string} message */
  constructor(message) {
    super(message);
    this.name = 'FrameError';
  }
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Encodes one message as a frame.
 * @param {object} message a JSON object
 * @returns {Buffer} the length header followed by the JSON body
 * @throws {TypeError} if the message is not JSON-serialisable to an object
 * @throws {RangeError} if it is too long, or nested too deeply for JSON.stringify
 */
export function encodeFrame(message) {
  let json;
  try {
    json = JSON.stringify(message);
  } catch (error) {
    // JSON.stringify recurses per level of nesting (JSON.parse does not): a value nested
    // tens of thousands of levels deep overflows the stack. Say so, not just "call stack".
    if (error instanceof RangeError) {
      throw new RangeError(`a value in the ${message?.op ?? 'frame'} is nested too deeply to encode: ${error.message}`);
    }
    throw error;
  }
  if (typeof json !== 'string' || !json.startsWith('{')) {
    throw new TypeError('a frame must hold a JSON object');
  }
  const length = Buffer.byteLength(json, 'utf8');
  if (length > MAX_LENGTH) throw new RangeError(`frame of ${length} bytes is too long`);
  const frame = Buffer.allocUnsafe(HEADER_BYTES + length);
  frame.writeUInt32BE(length, 0);
  frame.write(json, HEADER_BYTES, 'utf8');
  return frame;
}

/**
 * Decodes the bytes of one frame body.
 * @param {Uint8Array} body
 * @returns {Record<string, unknown>}
 * @throws {FrameError} if the body is not UTF-8 JSON holding an object
 */
export function decodeBody(body) {
  let value;
  try {
    value = JSON.parse(utf8.decode(body));
  } catch (error) {
    throw new FrameError(`frame body is not UTF-8 JSON: ${error.message}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new FrameError('frame body is not a JSON object');
  }
  return value;
}

/**
 * Incremental decoder: feed it chunks as they arrive, in any sizes, and it returns the
 * complete messages. Chunks are kept in a list and joined once per frame, so a large
 * frame arriving in many small reads costs linear time.
 */
export class FrameDecoder {
  /** @type {Buffer[]} */
  #chunks = [];
  #buffered = 0;
  /** Body length of the frame being read, or -1 while its header is incomplete. */
  #needed = -1;

  /** Bytes received that do not yet form a complete frame. */
  get bufferedBytes() {
    return this.#buffered;
  }

  /**
   * Adds bytes and returns every message they complete, in order.
   * @param {Uint8Array} chunk
   * @returns {Record<string, unknown>[]}
   * @throws {FrameError} on a zero length or a body that is not a JSON object
   */
  push(chunk) {
    if (chunk.length > 0) {
      this.#chunks.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.length));
      this.#buffered += chunk.length;
    }
    const messages = [];
    for (;;) {
      if (this.#needed < 0) {
        if (this.#buffered < HEADER_BYTES) break;
        this.#needed = this.#take(HEADER_BYTES).readUInt32BE(0);
        if (this.#needed === 0) throw new FrameError('frame length is 0');
      }
      if (this.#buffered < this.#needed) break;
      const body = this.#take(this.#needed);
      this.#needed = -1;
      messages.push(decodeBody(body));
    }
    return messages;
  }

  /** Removes and returns the first `count` buffered bytes; the caller checked they are there. */
  #take(count) {
    const first = this.#chunks[0];
    if (first.length >= count) {
      if (first.length === count) this.#chunks.shift();
      else this.#chunks[0] = first.subarray(count);
      this.#buffered -= count;
      return first.subarray(0, count);
    }
    const out = Buffer.allocUnsafe(count);
    let filled = 0;
    while (filled < count) {
      const head = this.#chunks[0];
      const used = Math.min(head.length, count - filled);
      head.copy(out, filled, 0, used);
      filled += used;
      if (used === head.length) this.#chunks.shift();
      else this.#chunks[0] = head.subarray(used);
    }
    this.#buffered -= count;
    return out;
  }
}
