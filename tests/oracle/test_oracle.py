"""The gateway's ids for every corpus body equal each vLLM version's own render server's.

For each version (0.32, 0.33, 0.34) and API (chat, messages, responses), each body is
rendered twice: by the gateway (:func:`~ttftscope.gateway.proving.converts.local_prompt` on an
offline upstream with that version's profile, encoded with the model's tokenizer) and by
that version's ``/v1/.../render`` route (the reference: real vLLM code). Where vLLM renders
and the gateway takes the body, the ids must be equal; a mismatch names the first differing
token and both sides' text around it. Where vLLM rejects the body (any non-200), the gateway
must pass it through as text (vLLM then answers the client itself). Where the gateway passes
through a body vLLM renders, nothing is compared: it goes as text (counted in the summary).
"""

from __future__ import annotations

import copy
from typing import Any

import httpx
import pytest

from tests.oracle.conftest import client_for
from tests.oracle.corpus_chat import chat_corpus
from tests.oracle.corpus_messages import messages_corpus
from tests.oracle.corpus_responses import responses_corpus
from tests.oracle.outcomes import REPORT, Outcome, describe, first_difference
from ttftscope.gateway.pipeline.passthrough import PassThrough
from ttftscope.gateway.pipeline.shapes import NativeApi
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.proving.converts import local_prompt
from ttftscope.localserver.process import SERVED_MODEL
from ttftscope.localserver.render import RENDER_VERSIONS

pytestmark = pytest.mark.oracle

ROUTES: dict[NativeApi, str] = {
    "chat": "/v1/chat/completions/render",
    "messages": "/v1/messages/render",
    "responses": "/v1/responses/render",
}
CORPUS: dict[NativeApi, list[tuple[str, dict[str, Any]]]] = {
    "chat": chat_corpus(),
    "messages": messages_corpus(),
    "responses": responses_corpus(),
}
CASES = [
    (version, api, name, body)
    for version in RENDER_VERSIONS
    for api, bodies in CORPUS.items()
    for name, body in bodies
]


def test_the_corpus_is_large_enough() -> None:
    assert sum(len(b) for b in CORPUS.values()) >= 300
    assert all(len(b) >= 100 for b in CORPUS.values())


def vllm_render(client: httpx.Client, api: NativeApi, body: dict[str, Any]) -> httpx.Response:
    """vLLM's answer to ``body`` on ``api``'s render route.

    After an answer of 500 (an exception in vLLM's handler) vLLM closes the connection without
    saying so, and the next request on it is reset: sent once more on a new connection.
    """
    payload = {**copy.deepcopy(body), "model": SERVED_MODEL}
    try:
        return client.post(ROUTES[api], json=payload)
    except (httpx.ReadError, httpx.RemoteProtocolError):
        return client.post(ROUTES[api], json=payload)


def gateway_ids(up: Upstream, api: NativeApi, body: dict[str, Any]) -> list[int]:
    """The ids the gateway sends for ``body`` (PassThrough: it sends text)."""
    assert up.tok is not None
    _, prompt = local_prompt(up, api, copy.deepcopy({**body, "model": SERVED_MODEL}))
    return up.tok.encode(prompt)


@pytest.mark.parametrize(
    ("version", "api", "name", "body"),
    CASES,
    ids=[f"{v}-{a}-{n}" for v, a, n, _ in CASES],
)
def test_gateway_ids_equal_vllms_render(
    version: str,
    api: NativeApi,
    name: str,
    body: dict[str, Any],
    oracle_clients: dict[str, httpx.Client | str],
    upstreams: dict[str, Upstream],
) -> None:
    client = client_for(oracle_clients, version)
    up = upstreams[version]
    answer = vllm_render(client, api, body)
    try:
        ours: list[int] | None = gateway_ids(up, api, body)
        why = ""
    except PassThrough as exc:
        ours, why = None, exc.reason
    outcome = judge(up, (version, api, name), answer, ours, why)
    REPORT.outcomes.append(outcome)
    assert outcome.verdict not in ("mismatch", "rejected_but_ids"), outcome.detail


def judge(
    up: Upstream,
    key: tuple[str, str, str],
    answer: httpx.Response,
    ours: list[int] | None,
    why: str,
) -> Outcome:
    """The verdict on one body from vLLM's answer and the gateway's ids (None: text)."""
    if answer.status_code != 200:
        said = f"vLLM {answer.status_code}: {answer.text[:300]}"
        if ours is None:
            return Outcome(*key, "rejected_passed_through", why, said)
        return Outcome(*key, "rejected_but_ids", f"HTTP {answer.status_code}", said)
    if ours is None:
        return Outcome(*key, "passed_through", why)
    theirs = answer.json()["token_ids"]
    at = first_difference(ours, theirs)
    if at is None:
        return Outcome(*key, "equal")
    assert up.tok is not None
    return Outcome(*key, "mismatch", "", describe(up.tok, ours, theirs, at))
