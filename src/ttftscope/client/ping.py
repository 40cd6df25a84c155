"""Is the server there, does the key work, is the model served? One tiny request says.

Failures raise the :mod:`ttftscope.errors` exception for their kind (each its own exit code),
with a message that says what to do.

>>> import asyncio
>>> result = asyncio.run(ping(base_url=server_url, api_key=None, model=None, timeout_s=10))
>>> result.model_requested, result.status
('tiny-llama', 200)
"""

from __future__ import annotations

import difflib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from pydantic import BaseModel

from ttftscope import errors
from ttftscope.client.http_json import WRONG_THING, call_json
from ttftscope.config.redact import redact_text

__all__ = ["PingResult", "list_models", "ping"]


class PingResult(BaseModel):
    """A successful ping. ``model_requested`` is the model sent (picked from /models if none).

    >>> PingResult(base_url="u", model_requested="m", model_reported="m", latency_ms=3.0,
    ...            status=200).model_reported
    'm'
    """

    base_url: str
    model_requested: str
    model_reported: str | None
    latency_ms: float
    status: int


@asynccontextmanager
async def _client(client: httpx.AsyncClient | None) -> AsyncIterator[httpx.AsyncClient]:
    if client is not None:
        yield client
        return
    async with httpx.AsyncClient() as own:
        yield own


@dataclass(frozen=True)
class ModelCard:
    """One entry of ``GET /models``; ``max_model_len`` where the server says (vLLM does).

    >>> ModelCard("tiny", 131072).max_model_len
    131072
    """

    id: str
    max_model_len: int | None = None


async def list_model_cards(
    *,
    base_url: str,
    api_key: str | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    retries: int = 0,
) -> list[ModelCard]:
    """The entries of ``GET {base_url}/models``, in the server's order.

    >>> import asyncio
    >>> asyncio.run(list_model_cards(base_url=server_url, api_key=None, timeout_s=5))[0]
    ModelCard(id='tiny-llama', max_model_len=None)
    """
    url = base_url.rstrip("/") + "/models"
    async with _client(client) as c:
        try:
            _, obj = await call_json(
                c,
                "GET",
                url,
                api_key=api_key,
                timeout_s=timeout_s,
                headers=headers,
                retries=retries,
            )
        except errors.ModelNotFound as exc:
            raise errors.BadResponse(f"GET {url} answered 404", hint=WRONG_THING) from exc
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise errors.BadResponse(
            redact_text(f"GET {url} did not return an OpenAI model list", [api_key]),
            hint=WRONG_THING,
        )
    return [_card(m) for m in data if isinstance(m, dict) and "id" in m]


def _card(entry: dict[str, object]) -> ModelCard:
    length = entry.get("max_model_len")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        return ModelCard(str(entry["id"]), length)
    return ModelCard(str(entry["id"]))


async def list_models(
    *,
    base_url: str,
    api_key: str | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    retries: int = 0,
) -> list[str]:
    """Ids from ``GET {base_url}/models``, in the server's order.

    >>> import asyncio
    >>> from ttftscope import list_models
    >>> asyncio.run(list_models(base_url=server_url, api_key=None, timeout_s=5))
    ['tiny-llama', 'tiny-qwen-chat']
    """
    cards = await list_model_cards(
        base_url=base_url,
        api_key=api_key,
        timeout_s=timeout_s,
        headers=headers,
        client=client,
        retries=retries,
    )
    return [card.id for card in cards]


async def ping(
    *,
    base_url: str,
    api_key: str | None,
    model: str | None,
    timeout_s: float,
    headers: Mapping[str, str] | None = None,
    client: httpx.AsyncClient | None = None,
    retries: int = 0,
) -> PingResult:
    """One non-streaming chat completion (``max_tokens`` 8); raise a clear error if it fails.

    With ``model=None`` the first model of ``GET /models`` is used.

    >>> import asyncio
    >>> from ttftscope import ping
    >>> asyncio.run(ping(base_url=server_url, api_key=None, model="tiny-qwen-chat",
    ...                  timeout_s=10)).model_reported
    'tiny-qwen-chat'
    """
    async with _client(client) as c:
        models = _ModelLister(c, base_url, api_key, timeout_s, headers, retries)
        if model is None:
            served = await models()
            if not served:
                raise errors.BadResponse(
                    f"{base_url} serves no models (GET /models is empty)",
                    hint="start the server with a model loaded",
                )
            model = served[0]
        url = base_url.rstrip("/") + "/chat/completions"
        payload = {
            "model": model,
            "max_tokens": 8,
            "messages": [{"role": "user", "content": "ping"}],
        }
        t0 = time.perf_counter_ns()
        try:
            resp, obj = await call_json(
                c,
                "POST",
                url,
                api_key=api_key,
                timeout_s=timeout_s,
                headers=headers,
                payload=payload,
                retries=retries,
            )
        except errors.ModelNotFound as exc:
            raise await explain_not_found(model, exc, models, base_url=base_url) from exc
        latency_ms = (time.perf_counter_ns() - t0) / 1e6
    if not isinstance(obj, dict) or not isinstance(obj.get("choices"), list):
        raise errors.BadResponse(f"{url} answered JSON without a `choices` list", hint=WRONG_THING)
    reported = obj.get("model")
    return PingResult(
        base_url=base_url,
        model_requested=model,
        model_reported=None if reported is None else str(reported),
        latency_ms=latency_ms,
        status=resp.status_code,
    )


@dataclass(frozen=True)
class _ModelLister:
    """``GET /models`` on one server, callable again for an explanation."""

    client: httpx.AsyncClient
    base_url: str
    api_key: str | None
    timeout_s: float
    headers: Mapping[str, str] | None
    retries: int

    async def __call__(self) -> list[str]:
        return await list_models(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            headers=self.headers,
            client=self.client,
            retries=self.retries,
        )


async def explain_not_found(
    model: str,
    exc: errors.ModelNotFound,
    served_models: Callable[[], Awaitable[list[str]]],
    *,
    base_url: str,
) -> errors.ServerRequestError:
    """A 404 is a wrong model name or a wrong base_url; the model list tells which.

    >>> import asyncio
    >>> async def served() -> list[str]:
    ...     return ["tiny"]
    >>> err = errors.ModelNotFound("HTTP 404", status=404)
    >>> print(asyncio.run(explain_not_found("tiny2", err, served, base_url="http://h/v1")))
    model 'tiny2' is not served by http://h/v1; available: tiny
      hint: did you mean 'tiny'?
    """
    try:
        served = await served_models()
    except errors.ServerRequestError as listing:
        return errors.BadResponse(
            f"{exc.message}; GET /models failed too: {listing.message}", hint=WRONG_THING
        )
    if model in served:
        return exc
    names = ", ".join(served) or "(none)"
    close = difflib.get_close_matches(model, served, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]!r}?" if close else "pass one of the served names as --model"
    return errors.ModelNotFound(
        f"model {model!r} is not served by {base_url}; available: {names}",
        status=404,
        hint=hint,
    )
