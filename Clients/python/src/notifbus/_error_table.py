"""The error codes the broker itself sends, and which of them close the connection.

Generated from Protocol/errors.json by Clients/generate_error_table.py: edit that table
and run the script, never this file. It holds data only; the client decides with it.
"""

from typing import Dict, FrozenSet, NamedTuple


class ErrorCodeInfo(NamedTuple):
    """One row of the table."""

    #: The broker closes the connection after sending this error.
    closes: bool
    #: The code is in the contract's list (protocol v1, section 4), not one the project adds.
    contract: bool
    #: What the error means, in one line.
    meaning: str


#: Every code the broker sends, in the table's order.
ERROR_CODES: Dict[str, ErrorCodeInfo] = {
    "hello_required": ErrorCodeInfo(closes=True, contract=True, meaning="The first frame of a connection was not a hello, or no hello came in time."),
    "unsupported_protocol": ErrorCodeInfo(closes=True, contract=True, meaning="hello asked for an integer protocol version other than 1."),
    "bad_json": ErrorCodeInfo(closes=False, contract=True, meaning="A complete frame is not a UTF-8 JSON object; framing is still in step."),
    "bad_request": ErrorCodeInfo(closes=False, contract=True, meaning="A missing, mistyped, unknown or out-of-range member, a second hello, a limit reached, or a malformed answer."),
    "unknown_op": ErrorCodeInfo(closes=False, contract=True, meaning="A string op that is neither a request nor an answer."),
    "frame_too_large": ErrorCodeInfo(closes=True, contract=True, meaning="A length prefix of 0 or above the broker's --max-frame."),
    "forbidden": ErrorCodeInfo(closes=True, contract=True, meaning="The peer's uid is neither the broker's, nor 0, nor given with --allow-uid."),
    "too_many_clients": ErrorCodeInfo(closes=True, contract=True, meaning="The connection would exceed --max-clients."),
    "not_found": ErrorCodeInfo(closes=False, contract=True, meaning="unsubscribe or unhandle matched nothing."),
    "queue_full": ErrorCodeInfo(closes=False, contract=True, meaning="The post queue, its byte bound, or this connection's share of it is full."),
    "not_implemented": ErrorCodeInfo(closes=False, contract=True, meaning="invoke found no handler for the channel and method."),
    "handler_gone": ErrorCodeInfo(closes=False, contract=True, meaning="The connection that received the call closed before returning it."),
    "timeout": ErrorCodeInfo(closes=False, contract=True, meaning="The call was not returned within --call-timeout."),
    "invalid_payload": ErrorCodeInfo(closes=False, contract=True, meaning="A notification profile event's payload breaks the profile's rules."),
    "invalid_action": ErrorCodeInfo(closes=False, contract=True, meaning="A didReceive action is not one the categories in force allow (or its userText does not match)."),
    "shutting_down": ErrorCodeInfo(closes=False, contract=True, meaning="The broker is stopping; it answers queued and running posts, pending invokes and waiting takes, then closes every connection anyway."),
    "once_conflict": ErrorCodeInfo(closes=False, contract=True, meaning="A request's idempotency key (once) is held by a request of another op, target or body; nothing was applied."),
    "interrupted": ErrorCodeInfo(closes=False, contract=True, meaning="A repeat of a keyed post whose chain was cut when the broker stopped; it will not run again."),
    "storage_failed": ErrorCodeInfo(closes=False, contract=False, meaning="A journal write to --state-dir failed, so the put, take or setCategories it would have acknowledged changed nothing."),
    "overloaded": ErrorCodeInfo(closes=True, contract=False, meaning="The bytes buffered across all connections passed --max-buffered-bytes and this connection held the most."),
    "superseded": ErrorCodeInfo(closes=False, contract=False, meaning="A subscribe or handle marked resume found its key or route held by a live registration, which it leaves alone."),
}

#: The codes after which the broker closes the connection.
CLOSING_CODES: FrozenSet[str] = frozenset(code for code, info in ERROR_CODES.items() if info.closes)
