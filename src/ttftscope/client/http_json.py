"""Non-streaming JSON calls (``/models``, ``/tokenize``, ping) with classified failures.

Every failure becomes the :mod:`ttftscope.errors` exception for its kind, with the API key
masked. ``retries`` (``api.max_retries``) re-sends on 429, 5xx, timeouts and refused
connections, waiting as long as Retry-After says (capped) or a short backoff.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any, NoReturn

import httpx

from ttftscope import errors
from ttftscope.client.classify import (
    JSON_ERRORS,
    RequestFailure,
    classify_status,
    classify_transport,
    json_problem,
    to_exception,
)
from ttftscope.client.httpx_faults import httpx_fault
from ttftscope.client.stream import request_headers
from ttftscope.config.redact import header_secrets, redact_text
from ttftscope.errors import FailureKind

WRONG_THING = (
    "base_url points at the wrong thing; it should end in /v1 (e.g. http://127.0.0.1:8000/v1)"
)
_RETRYABLE = frozenset(
    {
        FailureKind.RATE_LIMITED,
        FailureKind.SERVER_ERROR,
        FailureKind.TIMEOUT,
        FailureKind.CONNECTION_REFUSED,
    }
)
_MAX_WAIT_S = 30.0


def _raise(failure: RequestFailure, secrets: list[str | None]) -> NoReturn:
    message = redact_text(failure.message, secrets)
    raise to_exception(dataclasses.replace(failure, message=message))


def _wait_s(failure: RequestFailure, attempt: int) -> float:
    try:
        after = float(failure.retry_after) if failure.retry_after else None
    except ValueError:  # an HTTP date; rare on inference servers
        after = None
    return min(_MAX_WAIT_S, after if after is not None else 0.5 * 2**attempt)


async def _once(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    timeout_s: float,
    headers: dict[str, str],
    payload: object,
) -> httpx.Response | RequestFailure:
    try:
        resp = await client.request(
            method, url, json=payload, headers=headers, timeout=httpx.Timeout(timeout_s)
        )
    except (httpx.HTTPError, OSError) as exc:
        return classify_transport(httpx_fault(exc), url, timeout_s)
    if resp.status_code != 200:
        return classify_status(resp.status_code, resp.headers, resp.content, url)
    return resp


async def call_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    api_key: str | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    payload: object = None,
    retries: int = 0,
) -> tuple[httpx.Response, Any]:
    """Send; retry what is worth retrying; return ``(response, parsed JSON)`` or raise.

    >>> async def models() -> tuple[httpx.Response, Any]:
    ...     async with httpx.AsyncClient() as c:
    ...         return await call_json(c, "GET", server_url + "/models", api_key=None, timeout_s=5)
    >>> asyncio.run(models())
    (<Response [200 OK]>, {'object': 'list', 'data': [{'id': 'tiny-llama', ...}, ...]})
    """
    hdrs = {**request_headers(api_key, headers), "Accept": "application/json"}
    secrets = [api_key, *header_secrets(headers)]
    attempt = 0
    while True:
        got = await _once(client, method, url, timeout_s=timeout_s, headers=hdrs, payload=payload)
        if isinstance(got, httpx.Response):
            break
        if got.kind not in _RETRYABLE or attempt >= retries:
            _raise(got, secrets)
        await asyncio.sleep(_wait_s(got, attempt))
        attempt += 1
    ctype = got.headers.get("content-type", "").split(";")[0].strip() or "no content type"
    try:
        return got, json.loads(got.content)
    except JSON_ERRORS as exc:  # also 4,300+ digit numbers and ~1,000-deep nesting
        raise errors.BadResponse(
            redact_text(
                f"{url} answered with {ctype} that is not readable JSON ({json_problem(exc)}): "
                "this is not an OpenAI-compatible API",
                secrets,
            ),
            hint=WRONG_THING,
        ) from None
