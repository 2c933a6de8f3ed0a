// Frame encoder and decoder, without sockets: whole frames, byte by byte, several per
// chunk, split headers, bodies that are not v1 frames, and the shared Protocol/ vectors.

import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { describe, test } from 'node:test';

import { encodeFrame, FrameDecoder, FrameError } from '../src/index.js';

const messages = [
  { op: 'hello', id: 1, protocol: 1, name: 'mail-app' },
  { op: 'reply', id: 1, result: { protocol: 1, server: 'notifbus/0', client: 'c7', maxFrame: 1048576 } },
  { op: 'event', event: 12, observer: 'o2', name: 'didReceive', payload: { text: 'héllo ✉️ 𝄞' } },
  { op: 'reply', id: 'string-id', result: null },
];

const header = (length) => {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(length);
  return bytes;
};

describe('encodeFrame', () => {
  test('writes a big-endian length, then the UTF-8 JSON', () => {
    const frame = encodeFrame({ op: 'ping', id: 2 });
    const body = '{"op":"ping","id":2}';
    assert.deepEqual(frame, Buffer.concat([header(body.length), Buffer.from(body)]));
  });

  test('counts bytes, not characters', () => {
    const frame = encodeFrame({ s: 'é𝄞' });
    assert.equal(frame.readUInt32BE(0), Buffer.byteLength('{"s":"é𝄞"}'));
    assert.equal(frame.length, 4 + frame.readUInt32BE(0));
  });

  test('refuses what is not a JSON object', () => {
    assert.throws(() => encodeFrame([1, 2]), TypeError);
    assert.throws(() => encodeFrame({ n: 1n }), TypeError);
  });

  test('names a value nested too deeply for JSON.stringify, and reads one as deep', () => {
    let deep = 1;
    for (let i = 0; i < 200_000; i++) deep = [deep];
    assert.throws(() => encodeFrame({ op: 'post', payload: deep }), {
      name: 'RangeError',
      message: /^a value in the post is nested too deeply to encode: /,
    });
    // Reading has no such limit: a frame as deep as the broker forwards is decoded.
    const body = `{"op":"event","payload":${'['.repeat(200_000)}${']'.repeat(200_000)}}`;
    const decoder = new FrameDecoder();
    const [frame] = decoder.push(Buffer.concat([header(Buffer.byteLength(body)), Buffer.from(body)]));
    assert.equal(frame.op, 'event');
  });
});

describe('FrameDecoder', () => {
  const stream = Buffer.concat(messages.map(encodeFrame));

  test('decodes whole frames', () => {
    for (const message of messages) {
      assert.deepEqual(new FrameDecoder().push(encodeFrame(message)), [message]);
    }
  });

  test('decodes several frames in one chunk', () => {
    const decoder = new FrameDecoder();
    assert.deepEqual(decoder.push(stream), messages);
    assert.equal(decoder.bufferedBytes, 0);
  });

  test('decodes byte by byte', () => {
    const decoder = new FrameDecoder();
    const out = [];
    for (let i = 0; i < stream.length; i++) out.push(...decoder.push(stream.subarray(i, i + 1)));
    assert.deepEqual(out, messages);
  });

  test('decodes at every split point', () => {
    for (let split = 0; split <= stream.length; split++) {
      const decoder = new FrameDecoder();
      const out = [...decoder.push(stream.subarray(0, split)), ...decoder.push(stream.subarray(split))];
      assert.deepEqual(out, messages, `split at ${split}`);
    }
  });

  test('holds a truncated frame until the rest arrives', () => {
    const frame = encodeFrame(messages[2]);
    const decoder = new FrameDecoder();
    assert.deepEqual(decoder.push(frame.subarray(0, 3)), []);
    assert.deepEqual(decoder.push(frame.subarray(3, frame.length - 1)), []);
    assert.equal(decoder.bufferedBytes, frame.length - 1 - 4);
    assert.deepEqual(decoder.push(frame.subarray(frame.length - 1)), [messages[2]]);
  });

  test('reads frames longer than the default maxFrame', () => {
    const big = { op: 'reply', id: 3, result: 'x'.repeat(2 * 1048576) };
    const frame = encodeFrame(big);
    const decoder = new FrameDecoder();
    const out = [];
    for (let i = 0; i < frame.length; i += 65536) out.push(...decoder.push(frame.subarray(i, i + 65536)));
    assert.deepEqual(out, [big]);
  });

  test('rejects a zero length', () => {
    assert.throws(() => new FrameDecoder().push(header(0)), FrameError);
  });

  test('rejects bodies that are not UTF-8 JSON objects', () => {
    const bodies = [Buffer.from('[1]'), Buffer.from('null'), Buffer.from('{"a":'), Buffer.from([0x7b, 0xff, 0x7d])];
    for (const body of bodies) {
      assert.throws(() => new FrameDecoder().push(Buffer.concat([header(body.length), body])), FrameError);
    }
  });
});

// The shared vectors in Protocol/vectors/framing.json, which every implementation loads.
const vectorsPath = new URL('../../../Protocol/vectors/framing.json', import.meta.url);
const vectors = existsSync(vectorsPath) ? JSON.parse(readFileSync(vectorsPath, 'utf8')) : null;
const noVectors = vectors === null && 'Protocol/vectors/framing.json is not beside this package';

describe('shared framing vectors', { skip: noVectors }, () => {
  const bytes = (vector) => Buffer.from(vector.hex, 'hex');

  test('each valid frame decodes to its json, whole and byte by byte', () => {
    for (const vector of vectors.valid) {
      assert.deepEqual(new FrameDecoder().push(bytes(vector)), [vector.json], vector.name);
      const decoder = new FrameDecoder();
      const out = [];
      for (const byte of bytes(vector)) out.push(...decoder.push(Uint8Array.of(byte)));
      assert.deepEqual(out, [vector.json], `${vector.name}, byte by byte`);
    }
  });

  test('the valid frames concatenated decode in order', () => {
    const stream = Buffer.concat(vectors.valid.map(bytes));
    assert.deepEqual(
      new FrameDecoder().push(stream),
      vectors.valid.map((v) => v.json),
    );
  });

  test('bad_json bodies fail, and the decoder stays in step', () => {
    const follower = vectors.valid[0];
    for (const vector of vectors.invalid.filter((v) => v.error === 'bad_json')) {
      const decoder = new FrameDecoder();
      assert.throws(() => decoder.push(bytes(vector)), FrameError, vector.name);
      assert.deepEqual(decoder.push(bytes(follower)), [follower.json], `${vector.name}, then a valid frame`);
    }
  });

  test('a zero length fails; longer-than-maxFrame lengths only wait, since a client reads any length', () => {
    for (const vector of vectors.invalid.filter((v) => v.error === 'frame_too_large')) {
      const zero = bytes(vector).readUInt32BE(0) === 0;
      if (zero) assert.throws(() => new FrameDecoder().push(bytes(vector)), FrameError, vector.name);
      else assert.deepEqual(new FrameDecoder().push(bytes(vector)), [], vector.name);
    }
  });

  test('incomplete frames decode nothing yet', () => {
    for (const vector of vectors.invalid.filter((v) => v.error === 'incomplete')) {
      assert.deepEqual(new FrameDecoder().push(bytes(vector)), [], vector.name);
    }
  });
});
