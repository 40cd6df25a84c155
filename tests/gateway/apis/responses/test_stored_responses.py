"""Stored Responses through the gateway: fetched, streamed again, cancelled at the upstream
that created them. Two stand-in upstreams, each with its own store (as vLLM's is: per
process), serve ``POST /v1/responses`` with ``store`` and vLLM's retrieve and cancel routes;
``input_items`` is not served by vLLM (the stand-ins' 404 too)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.faultserver import CapturedRequest, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings

_IDS = itertools.count(1)


class StoreServer(FaultServer):
    """A fault server whose ``/v1/responses`` keeps stored responses, as vLLM's store does."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.store: dict[str, dict[str, Any]] = {}
        routes = [
            Route("/{scenario}/v1/responses", self._create, methods=["POST"]),
            Route("/{scenario}/v1/responses/{rid}", self._get, methods=["GET"]),
            Route("/{scenario}/v1/responses/{rid}/cancel", self._cancel, methods=["POST"]),
        ]
        super().__init__(routes=routes)

    async def _seen(self, request: Request) -> bytes:
        raw = await request.body()
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        self.requests.append(CapturedRequest(request.method, path, dict(request.headers), raw))
        return raw

    async def _create(self, request: Request) -> Response:
        body = json.loads(await self._seen(request))
        rid = f"resp_{self.name}_{next(_IDS)}"
        answer = {"id": rid, "object": "response", "model": body["model"], "status": "queued"}
        answer["store"] = body.get("store", True)
        if answer["store"]:
            self.store[rid] = answer
        if body.get("stream"):
            event = {"type": "response.created", "sequence_number": 0, "response": answer}
            sse = f"event: response.created\ndata: {json.dumps(event)}\n\n"
            return StreamingResponse(iter([sse.encode()]), media_type="text/event-stream")
        return JSONResponse(answer)

    def _missing(self, rid: str) -> JSONResponse:
        error = {"message": f"Response with id '{rid}' not found.", "code": 404}
        return JSONResponse({"error": error}, status_code=404)

    async def _get(self, request: Request) -> Response:
        await self._seen(request)
        rid = request.path_params["rid"]
        if rid not in self.store:
            return self._missing(rid)
        if request.query_params.get("stream") == "true":
            event = {"type": "response.completed", "response": self.store[rid]}
            sse = f"event: response.completed\ndata: {json.dumps(event)}\n\n"
            return StreamingResponse(iter([sse.encode()]), media_type="text/event-stream")
        return JSONResponse(self.store[rid])

    async def _cancel(self, request: Request) -> Response:
        await self._seen(request)
        rid = request.path_params["rid"]
        if rid not in self.store:
            return self._missing(rid)
        self.store[rid] = {**self.store[rid], "status": "cancelled"}
        return JSONResponse(self.store[rid])


@pytest.fixture
def stores() -> Iterator[tuple[StoreServer, StoreServer]]:
    with StoreServer("a") as a, StoreServer("b") as b:
        yield a, b


def _settings(a: StoreServer, b: StoreServer, **kw: Any) -> GatewaySettings:
    ups = {
        "a": UpstreamSettings(base_url=a.base_url(), mode="text", models=("model-a",)),
        "b": UpstreamSettings(base_url=b.base_url(), mode="text", models=("model-b",)),
    }
    return GatewaySettings(upstreams=ups, **kw)


def _create(gw: GatewayServer, **body: Any) -> httpx.Response:
    data = json.dumps({"model": "model-b", "input": "hi", **body}).encode()
    return httpx.post(gw.base_url + "/responses", content=data, timeout=30)


def test_a_response_created_through_the_gateway_is_fetched_from_its_upstream(
    stores: tuple[StoreServer, StoreServer],
) -> None:
    a, b = stores
    with GatewayServer(_settings(a, b)) as gw:
        made = _create(gw, background=True)
        assert made.status_code == 200, made.text
        rid = made.json()["id"]
        a_before = len(a.requests)
        got = httpx.get(f"{gw.base_url}/responses/{rid}", timeout=30)
        assert got.status_code == 200, got.text
        assert got.json() == {**b.store[rid], "status": "queued"}
        again = httpx.get(f"{gw.base_url}/responses/{rid}?stream=true&starting_after=0")
        assert again.headers["content-type"].startswith("text/event-stream")
        assert '"response.completed"' in again.text
        assert b.requests[-1].path == f"/normal/v1/responses/{rid}?stream=true&starting_after=0"
        cancelled = httpx.post(f"{gw.base_url}/responses/{rid}/cancel", timeout=30)
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["status"] == b.store[rid]["status"] == "cancelled"
        items = httpx.get(f"{gw.base_url}/responses/{rid}/input_items", timeout=30)
        assert items.status_code == 404  # vLLM serves no input_items: its own 404 comes back
        assert b.requests[-1].path == f"/normal/v1/responses/{rid}/input_items"
        assert len(a.requests) == a_before  # the owner was known: no other upstream asked


def test_a_streamed_creation_is_remembered_from_its_created_event(
    stores: tuple[StoreServer, StoreServer],
) -> None:
    a, b = stores
    with GatewayServer(_settings(a, b)) as gw:
        made = _create(gw, stream=True)
        assert made.status_code == 200, made.text
        (rid,) = b.store
        a_before = len(a.requests)
        got = httpx.get(f"{gw.base_url}/responses/{rid}", timeout=30)
        assert got.status_code == 200 and got.json()["id"] == rid
        assert len(a.requests) == a_before


def test_an_id_the_gateway_has_not_seen_is_asked_of_each_upstream_in_turn(
    stores: tuple[StoreServer, StoreServer],
) -> None:
    a, b = stores
    rid = "resp_made_elsewhere"
    b.store[rid] = {"id": rid, "object": "response", "model": "model-b", "status": "completed"}
    with GatewayServer(_settings(a, b)) as gw:
        got = httpx.get(f"{gw.base_url}/responses/{rid}", timeout=30)
        assert got.status_code == 200 and got.json() == b.store[rid]
        assert a.requests[-1].path == f"/normal/v1/responses/{rid}"  # asked first: a 404
        missing = httpx.get(f"{gw.base_url}/responses/resp_nowhere", timeout=30)
        assert missing.status_code == 404
        assert "resp_nowhere" in missing.json()["error"]["message"]


def test_stored_responses_need_the_gateway_key(stores: tuple[StoreServer, StoreServer]) -> None:
    a, b = stores
    settings = _settings(a, b, api_keys_env="GW_KEYS")
    with GatewayServer(settings, env={"GW_KEYS": "k1"}) as gw:
        key = {"Authorization": "Bearer k1"}
        made = httpx.post(
            gw.base_url + "/responses",
            content=json.dumps({"model": "model-b", "input": "hi"}).encode(),
            headers=key,
            timeout=30,
        )
        rid = made.json()["id"]
        asked = len(a.requests) + len(b.requests)
        for method, tail in (("GET", ""), ("POST", "/cancel"), ("GET", "/input_items")):
            url = f"{gw.base_url}/responses/{rid}{tail}"
            refused = httpx.request(method, url, headers={"Authorization": "Bearer k2"})
            assert refused.status_code == 401
            assert refused.json()["error"]["type"] == "AuthenticationError"  # OpenAI's shape
            assert "k1" not in refused.text
        assert len(a.requests) + len(b.requests) == asked  # nothing went upstream
        got = httpx.get(f"{gw.base_url}/responses/{rid}", headers=key, timeout=30)
        assert got.status_code == 200
        # the client's key is for the gateway: it never travels upstream
        assert "authorization" not in b.requests[-1].headers
