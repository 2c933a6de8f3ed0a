// The error codes the broker itself sends, and which of them close the connection.
// Generated from Protocol/errors.json by Clients/generate_error_table.py: edit that table
// and run the script, never this file. It holds data only; the client decides with it.

/**
 * Every code the broker sends, in the table's order: whether the broker closes the
 * connection after it, whether it is in the contract's list (protocol v1, section 4)
 * rather than one the project adds, and what it means.
 * @type {Readonly<Record<string, Readonly<{closes: boolean, contract: boolean, meaning: string}>>>}
 */
export const ERROR_CODES = Object.freeze({
  "hello_required": Object.freeze({ closes: true, contract: true, meaning: "The first frame of a connection was not a hello, or no hello came in time." }),
  "unsupported_protocol": Object.freeze({ closes: true, contract: true, meaning: "hello asked for an integer protocol version other than 1." }),
  "bad_json": Object.freeze({ closes: false, contract: true, meaning: "A complete frame is not a UTF-8 JSON object; framing is still in step." }),
  "bad_request": Object.freeze({ closes: false, contract: true, meaning: "A missing, mistyped, unknown or out-of-range member, a second hello, a limit reached, or a malformed answer." }),
  "unknown_op": Object.freeze({ closes: false, contract: true, meaning: "A string op that is neither a request nor an answer." }),
  "frame_too_large": Object.freeze({ closes: true, contract: true, meaning: "A length prefix of 0 or above the broker's --max-frame." }),
  "forbidden": Object.freeze({ closes: true, contract: true, meaning: "The peer's uid is neither the broker's, nor 0, nor given with --allow-uid." }),
  "too_many_clients": Object.freeze({ closes: true, contract: true, meaning: "The connection would exceed --max-clients." }),
  "not_found": Object.freeze({ closes: false, contract: true, meaning: "unsubscribe or unhandle matched nothing." }),
  "queue_full": Object.freeze({ closes: false, contract: true, meaning: "The post queue, its byte bound, or this connection's share of it is full." }),
  "not_implemented": Object.freeze({ closes: false, contract: true, meaning: "invoke found no handler for the channel and method." }),
  "handler_gone": Object.freeze({ closes: false, contract: true, meaning: "The connection that received the call closed before returning it." }),
  "timeout": Object.freeze({ closes: false, contract: true, meaning: "The call was not returned within --call-timeout." }),
  "invalid_payload": Object.freeze({ closes: false, contract: true, meaning: "A notification profile event's payload breaks the profile's rules." }),
  "invalid_action": Object.freeze({ closes: false, contract: true, meaning: "A didReceive action is not one the categories in force allow (or its userText does not match)." }),
  "shutting_down": Object.freeze({ closes: false, contract: true, meaning: "The broker is stopping; it answers queued and running posts, pending invokes and waiting takes, then closes every connection anyway." }),
  "once_conflict": Object.freeze({ closes: false, contract: true, meaning: "A request's idempotency key (once) is held by a request of another op, target or body; nothing was applied." }),
  "interrupted": Object.freeze({ closes: false, contract: true, meaning: "A repeat of a keyed post whose chain was cut when the broker stopped; it will not run again." }),
  "storage_failed": Object.freeze({ closes: false, contract: false, meaning: "A journal write to --state-dir failed, so the put, take or setCategories it would have acknowledged changed nothing." }),
  "overloaded": Object.freeze({ closes: true, contract: false, meaning: "The bytes buffered across all connections passed --max-buffered-bytes and this connection held the most." }),
  "superseded": Object.freeze({ closes: false, contract: false, meaning: "A subscribe or handle marked resume found its key or route held by a live registration, which it leaves alone." }),
});

/** The codes after which the broker closes the connection. @type {ReadonlySet<string>} */
export const CLOSING_CODES = new Set(Object.keys(ERROR_CODES).filter((code) => ERROR_CODES[code].closes));
