"""Retries follow api.max_retries and Retry-After; what is not retryable fails at once."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.faultserver import FaultOptions, FaultServer
from ttftscope import errors
from ttftscope.client.http_json import call_json


async def _models(url: str, retries: int) -> None:
    async with httpx.AsyncClient() as client:
        await call_json(
            client,
            "POST",
            url,
            api_key="sk-secret-key-0123456789",
            timeout_s=5,
            payload={"model": "tiny-llama", "messages": []},
            retries=retries,
        )


def test_rate_limited_calls_are_retried_then_reported() -> None:
    with FaultServer(FaultOptions(retry_after="0")) as srv:
        url = srv.base_url("rate_limited") + "/chat/completions"
        with pytest.raises(errors.RateLimited) as info:
            asyncio.run(_models(url, retries=2))
        assert len(srv.requests) == 3
    assert info.value.retry_after == "0"


def test_auth_errors_are_not_retried_and_hide_the_key() -> None:
    with FaultServer() as srv:
        url = srv.base_url("unauthorized") + "/chat/completions"
        with pytest.raises(errors.AuthError) as info:
            asyncio.run(_models(url, retries=3))
        assert len(srv.requests) == 1
    assert "sk-secret-key-0123456789" not in str(info.value)
