"""Checks the REPLY a block assigned and turns it into the runner's reply record."""

import json
import re

from json_depth import MAX_DEPTH, too_deep

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# What every HTTP stack accepts in a field value: visible ASCII, space and tab.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")


class InvalidReply(Exception):
    """REPLY is missing, malformed or not JSON-serialisable."""


def build(namespace, missing):
    """Return (status, headers, body_json) from the block's globals."""
    reply = namespace.get("REPLY", missing)
    if reply is missing:
        raise InvalidReply("the block did not assign REPLY")
    if not isinstance(reply, dict):
        raise InvalidReply(f"REPLY must be a dict, not {type(reply).__name__}")
    unknown = set(reply) - {"status", "headers", "body"}
    if unknown:
        raise InvalidReply(f"REPLY has unknown keys: {', '.join(sorted(map(str, unknown)))}")
    return _status(reply.get("status", 200)), _headers(reply.get("headers")), _body(reply)


def _status(status):
    # 1xx are interim answers in HTTP, never a final one.
    if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
        raise InvalidReply(f"REPLY status must be an integer from 200 to 599, not {status!r}")
    return status


def _headers(headers):
    if headers is None:
        return []
    if not isinstance(headers, dict):
        raise InvalidReply("REPLY headers must be a dict")
    result = []
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise InvalidReply(f"REPLY header name {name!r} is not a valid token")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise InvalidReply(f"REPLY header {name} must be a string or number")
        text = str(value)
        if not _HEADER_VALUE.fullmatch(text):
            raise InvalidReply(
                f"REPLY header {name} must be visible ASCII, spaces or tabs "
                "(percent-encode ids in paths with quote_segment)"
            )
        result.append((name, text))
    return result


def _body(reply):
    if "body" not in reply or reply["body"] is None:
        return None
    if too_deep(reply["body"]):
        raise InvalidReply(f"REPLY body nests deeper than {MAX_DEPTH} levels")
    try:
        return json.dumps(reply["body"], allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidReply(f"REPLY body is not JSON-serialisable: {exc}") from None
