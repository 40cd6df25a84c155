"""The server we talk to: URLs, credentials, model and sampling settings, and the few
non-streaming calls we need (``/models``, ``/tokenize``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx

from ttftscope.client.http_json import call_json
from ttftscope.client.ping import ModelCard, list_model_cards
from ttftscope.config.schema import Settings, root_url, same_origin
from ttftscope.errors import BadResponse, ModelNotFound


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
    max_tokens: int = 16
    temperature: float = 0.0
    max_retries: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    metrics_auth: bool = False

    @classmethod
    def from_settings(
        cls, settings: Settings, *, headers: dict[str, str] | None = None
    ) -> Endpoint:
        """Build from loaded settings (``load_settings().settings``)."""
        key = settings.api.api_key
        return cls(
            base_url=settings.api.base_url.rstrip("/"),
            metrics_url=settings.api.metrics_url,
            api_key=key.get_secret_value() if key is not None else None,
            timeout_s=float(settings.api.timeout_seconds),
            model=settings.model.default or "",
            max_tokens=settings.model.max_tokens,
            temperature=settings.model.temperature,
            max_retries=settings.api.max_retries,
            metrics_auth=settings.api.metrics_auth,
            headers=dict(headers or {}),
        )

    @property
    def root(self) -> str:
        """Server root for non-OpenAI routes (``/tokenize``, ``/metrics``, ``/health``)."""
        return root_url(self.base_url)

    def scrape_headers(self) -> dict[str, str]:
        """Headers for ``/metrics``: the key and user headers only on the API's own origin.

        A metrics URL on another host or port (a Prometheus proxy, a sidecar) gets neither
        unless ``api.metrics_auth`` says so: credentials travel only where they belong.

        >>> ep = Endpoint("http://h:1/v1", "http://other:9/metrics", api_key="k")
        >>> ep.scrape_headers()
        {}
        >>> Endpoint("http://h:1/v1", "http://h:1/metrics", api_key="k").scrape_headers()
        {'Authorization': 'Bearer k'}
        """
        if not (self.metrics_auth or same_origin(self.base_url, self.metrics_url)):
            return {}
        out = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {**out, **self.headers}

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        """The server's own token ids for ``text`` (vLLM ``/tokenize``)."""
        url = f"{self.root}/tokenize"
        try:
            _, data = await call_json(
                client,
                "POST",
                url,
                api_key=self.api_key,
                timeout_s=self.timeout_s,
                headers=self.headers,
                payload={"model": self.model, "prompt": text},
                retries=self.max_retries,
            )
        except ModelNotFound as exc:
            raise ModelNotFound(
                f"{url} answered 404: this server has no /tokenize route",
                status=404,
                hint="set tokenizer.path to count tokens locally",
            ) from exc
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise BadResponse(
                f"{url} answered without a 'tokens' list",
                hint="set tokenizer.path to count tokens locally",
            )
        return [int(t) for t in tokens]

    async def model_cards(self, client: httpx.AsyncClient) -> list[ModelCard]:
        """The entries the server lists at ``/v1/models``, in its order."""
        return await list_model_cards(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout_s=self.timeout_s,
            headers=self.headers,
            client=client,
            retries=self.max_retries,
        )

    async def list_models(self, client: httpx.AsyncClient) -> list[str]:
        """The model ids the server lists at ``/v1/models``, in its order."""
        return [card.id for card in await self.model_cards(client)]

    async def max_model_len(self, client: httpx.AsyncClient) -> int | None:
        """The context length the server reports for :attr:`model` (None: not reported)."""
        cards = await self.model_cards(client)
        return next((c.max_model_len for c in cards if c.id == self.model), None)

    async def discover_model(self, client: httpx.AsyncClient) -> str:
        """The first model the server lists at ``/v1/models``."""
        models = await self.list_models(client)
        if not models:
            raise BadResponse(
                f"{self.base_url}/models lists no models",
                hint="set model.default (or --model) explicitly",
            )
        return models[0]
