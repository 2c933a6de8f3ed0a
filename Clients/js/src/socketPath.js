// Where the broker's socket is (§1). Pure: the environment and uid come in as arguments.

import path from 'node:path';

/**
 * Resolves the socket path: the explicit path, then `NOTIFBUS_SOCKET`, then
 * `$XDG_RUNTIME_DIR/notifbus.sock`, then `/tmp/notifbus-$UID/notifbus.sock`.
 * Empty strings count as unset.
 * @param {string | null | undefined} explicit the `socket` option
 * @param {Record<string, string | undefined>} [env]
 * @param {number | undefined} [uid]
 * @returns {string}
 */
export function resolveSocketPath(explicit, env = process.env, uid = process.getuid?.()) {
  if (explicit) return explicit;
  if (env.NOTIFBUS_SOCKET) return env.NOTIFBUS_SOCKET;
  if (env.XDG_RUNTIME_DIR) return path.join(env.XDG_RUNTIME_DIR, 'notifbus.sock');
  if (uid === undefined) {
    throw new Error('cannot find the notifbus socket: no uid on this platform; pass the socket option');
  }
  return `/tmp/notifbus-${uid}/notifbus.sock`;
}
