"""The server we talk to: URLs, credentials, model, and the few non-streaming calls we need."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx

from ttftscope.errors import BadResponse, ConnectError, HTTPStatusError


def root_url(base_url: str) -> str:
    """The server root for non-OpenAI routes (``/tokenize``, ``/metrics``, ``/health``).

    >>> root_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    """
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


@dataclass
class Endpoint:
    """Where and how to send requests.

    >>> Endpoint(base_url="http://h:1/v1", metrics_url="http://h:1/metrics").root
    'http://h:1'
    """

    base_url: str
    metrics_url: str
    api_key: str | None = None
    timeout_s: float = 600.0
    model: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Any, *, headers: dict[str, str] | None = None) -> Endpoint:
        """Build from a loaded ``config.Settings``."""
        key = settings.api.api_key
        return cls(
            base_url=settings.api.base_url.rstrip("/"),
            metrics_url=settings.api.metrics_url,
            api_key=key.get_secret_value() if key is not None else None,
            timeout_s=float(settings.api.timeout_seconds),
            model=settings.model.default or "",
            headers=dict(headers or {}),
        )

    @property
    def root(self) -> str:
        return root_url(self.base_url)

    def auth_headers(self) -> dict[str, str]:
        out = dict(self.headers)
        if self.api_key:
            out["Authorization"] = f"Bearer {self.api_key}"
        return out

    async def _call(self, client: httpx.AsyncClient, method: str, url: str,
                    json: Any = None) -> Any:
        try:
            resp = await client.request(method, url, json=json, headers=self.auth_headers(),
                                        timeout=self.timeout_s)
        except httpx.TransportError as exc:
            raise ConnectError(f"{method} {url} failed: {type(exc).__name__}",
                               hint="is the server running? `ttftscope ping` tells more") from None
        if resp.status_code >= 400:
            raise HTTPStatusError(f"{method} {url} answered {resp.status_code}: "
                                  f"{resp.text[:200]}", status=resp.status_code,
                                  hint="this route is vLLM/SGLang-specific; set tokenizer.path "
                                  "to count tokens locally instead")
        try:
            return resp.json()
        except ValueError:
            raise BadResponse(f"{method} {url} did not answer JSON",
                              hint="check api.base_url; it should end in /v1") from None

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        """The server's own token ids for ``text`` (vLLM ``/tokenize``)."""
        data = await self._call(client, "POST", f"{self.root}/tokenize",
                                {"model": self.model, "prompt": text})
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise BadResponse(f"{self.root}/tokenize answered without a 'tokens' list",
                              hint="set tokenizer.path to count tokens locally")
        return [int(t) for t in tokens]

    async def discover_model(self, client: httpx.AsyncClient) -> str:
        """The first model the server lists at ``/v1/models``."""
        data = await self._call(client, "GET", f"{self.base_url}/models")
        models = [m.get("id") for m in data.get("data", [])] if isinstance(data, dict) else []
        if not models or not isinstance(models[0], str):
            raise BadResponse(f"{self.base_url}/models lists no models",
                              hint="set model.default (or --model) explicitly")
        return models[0]
