"""No 500 from input (issue 20): deep JSON, ``stream`` values, upstream answer shapes, client ids.

One gateway, three upstreams on one fault server: ``ids`` (chat-ids), ``plain`` (chat-ids, plain
chats translated to completions) and ``text`` (no tokenizer). The ``by_model`` scenario lets
each upstream pass the gateway's probe, then answer a model named like a fault with that fault.
Every request's status is checked against ``ttftscope_gateway_requests_total`` too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.faultserver import FaultOptions, FaultServer
from tests.gateway.gatewayserver import GatewayServer
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.gateway.apis import native
from ttftscope.gateway.apis.chat import endpoint as chat

ROUTES = ("/chat/completions", "/completions", "/messages", "/responses")
KINDS = ("ids", "plain", "text")
SHAPES = ("html", "json_array", "empty_html", "deep_answer", "surrogate", "vllm_bools")
LIMIT = 1024  # the README's JSON depth limit


def _models(kind: str) -> list[str]:
    return [f"m-{kind}", *(f"{shape}@{kind}" for shape in SHAPES)]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FaultServer]:
    models = [m for kind in KINDS for m in _models(kind)]
    with FaultServer(FaultOptions(models=models)) as srv:
        yield srv


@pytest.fixture(scope="module")
def gw(upstream: FaultServer, qwen2_dir: Path) -> Iterator[GatewayServer]:
    url = upstream.base_url("by_model")
    ups = {
        "ids": UpstreamSettings(base_url=url, model_dir=qwen2_dir, models=tuple(_models("ids"))),
        "plain": UpstreamSettings(
            base_url=url,
            model_dir=qwen2_dir,
            models=tuple(_models("plain")),
            plain_chats="completions",
        ),
        "text": UpstreamSettings(base_url=url, mode="text", models=tuple(_models("text"))),
    }
    with GatewayServer(GatewaySettings(upstreams=ups)) as server:
        ids, plain, text = server.gateway.upstreams
        assert (ids.api, plain.api, plain.plain_via_completions) == ("chat-ids", "chat-ids", True)
        assert text.api is None
        yield server


def _body(route: str, model: str, **extra: Any) -> dict[str, Any]:
    message = [{"role": "user", "content": "hello there"}]
    bases: dict[str, dict[str, Any]] = {
        "/chat/completions": {"messages": message, "max_tokens": 5},
        "/completions": {"prompt": "hello there", "max_tokens": 5},
        "/messages": {"messages": message, "max_tokens": 5},
        "/responses": {"input": "hello there"},
    }
    base = bases[route]
    return {"model": model, **base, **extra}


def _post(gw: GatewayServer, route: str, body: dict[str, Any] | bytes) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    headers = {"content-type": "application/json"}
    return httpx.post(gw.base_url + route, content=content, headers=headers, timeout=30)


def _error(route: str, resp: httpx.Response) -> str:
    """The error message in the route's API format (Anthropic's on /messages)."""
    body = resp.json()
    if route == "/messages":
        assert body["type"] == "error" and isinstance(body["error"]["type"], str), body
    else:
        assert set(body["error"]) >= {"message", "type", "code"}, body
    message: str = body["error"]["message"]
    return message


def _counted(gw: GatewayServer) -> Counter[tuple[str, str]]:
    """``requests_total`` by (route label, status)."""
    text = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    out: Counter[tuple[str, str]] = Counter()
    for labels, value in re.findall(
        r"^ttftscope_gateway_requests_total\{(.*)\} (\S+)$", text, re.M
    ):
        fields = dict(re.findall(r'(\w+)="([^"]*)"', labels))
        out[fields["route"], fields["status"]] += int(float(value))
    return out


_ROUTE_LABEL = {route: route.strip("/").split("/")[0] for route in ROUTES}


class _Tally:
    """Requests made and their statuses, to compare with the gateway's own count."""

    def __init__(self, gw: GatewayServer) -> None:
        self.gw, self.before, self.seen = gw, _counted(gw), Counter[tuple[str, str]]()

    def post(self, route: str, body: dict[str, Any] | bytes) -> httpx.Response:
        resp = _post(self.gw, route, body)
        self.seen[_ROUTE_LABEL[route], str(resp.status_code)] += 1
        return resp

    def check(self) -> None:
        assert _counted(self.gw) - self.before == self.seen


def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


# -- JSON nesting -----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    route=st.sampled_from(ROUTES),
    kind=st.sampled_from(KINDS),
    depth=st.integers(4, LIMIT + 60) | st.sampled_from([254, 255, 256, LIMIT, LIMIT + 1]),
    in_message=st.booleans(),
)
def test_any_nesting_orjson_reads_goes_upstream_exactly_and_deeper_is_a_400_naming_the_limit(
    gw: GatewayServer, upstream: FaultServer, route: str, kind: str, depth: int, in_message: bool
) -> None:
    """``depth`` counts the body's own object; the value sits in a top-level field or in the
    first message (chat, messages)."""
    body = _body(route, f"m-{kind}")
    tally = _Tally(gw)
    nested = in_message and "messages" in body
    value = _deep(depth - (3 if nested else 1))  # a message sits 3 levels down
    marker = b'"x":"marker"'
    raw = orjson.dumps(body)
    if nested:
        raw = raw.replace(b'"role":"user"', b'"role":"user",' + marker, 1)
    else:
        raw = raw[:-1] + b"," + marker + b"}"
    raw = raw.replace(b'"marker"', value, 1)
    sent_before = len(upstream.requests)
    resp = tally.post(route, raw)
    if depth <= LIMIT:
        assert resp.status_code == 200, resp.text
        # a plain chat goes as completions ids: vLLM's chat ignores unknown message keys
        translated = kind == "plain" and route == "/chat/completions" and nested
        assert translated or value in upstream.last_request.body  # the value, byte for byte
    else:
        assert resp.status_code == 400
        assert f"deeper than {LIMIT} levels" in _error(route, resp)
        assert len(upstream.requests) == sent_before
    tally.check()


# what vLLM's parser (Python's json) reads and orjson does not: a lone surrogate escape (an
# agent's tool output cut inside an emoji), NaN, a byte order mark
_LENIENT = [
    (b'"hello there"', b'"cut \\udc80 here"'),
    (b'"hello there"', b'"\\ud83d"'),
    (b'"max_tokens":5', b'"max_tokens":5,"temperature":NaN'),
]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("old", "new"), _LENIENT, ids=["lone_low", "lone_high", "nan"])
def test_json_only_vllms_parser_reads_goes_upstream_as_it_came(
    gw: GatewayServer, upstream: FaultServer, route: str, kind: str, old: bytes, new: bytes
) -> None:
    tally = _Tally(gw)
    raw = orjson.dumps(_body(route, f"m-{kind}"))
    # responses has no max_tokens: its NaN goes at the end
    raw = raw.replace(old, new, 1) if old in raw else raw[:-1] + b',"temperature":NaN}'
    resp = tally.post(route, raw)
    assert resp.status_code == 200, resp.text  # the upstream's answer, not the gateway's 400
    assert upstream.last_request.body == raw  # byte for byte: as text, no ids
    tally.check()


def test_a_bom_is_read_as_vllm_reads_it(gw: GatewayServer, upstream: FaultServer) -> None:
    raw = b"\xef\xbb\xbf" + orjson.dumps(_body("/chat/completions", "m-ids"))
    assert _post(gw, "/chat/completions", raw).status_code == 200
    assert upstream.last_request.body == raw


# -- stream ------------------------------------------------------------------------------------

_STREAMS = [True, 1, 1.0, "true", "yes", "ON", "t", "1"]
_NOT_STREAMS = [False, None, 0, 0.0, "false", "no", "off", "F", "0"]
_REFUSED = ["maybe", 2, -1, 0.5, "", " true", [], {}]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
def test_stream_takes_what_vllm_takes_and_refuses_the_rest_as_vllm_does(
    gw: GatewayServer, upstream: FaultServer, route: str, kind: str
) -> None:
    tally = _Tally(gw)
    model = f"vllm_bools@{kind}"  # the upstream reads stream as vLLM does
    for value in _STREAMS:
        resp = tally.post(route, _body(route, model, stream=value))
        assert resp.status_code == 200, (value, resp.text)
        assert resp.headers["content-type"].startswith("text/event-stream"), value
        assert resp.text.startswith(("data: ", "event: ")), value
    for value in _NOT_STREAMS:
        resp = tally.post(route, _body(route, model, stream=value))
        assert resp.status_code == 200, (value, resp.text)
        assert isinstance(resp.json(), dict), value
    sent = len(upstream.requests)
    for value in _REFUSED:
        resp = tally.post(route, _body(route, model, stream=value))
        assert resp.status_code == 400, (value, resp.text)
        assert _error(route, resp).startswith("stream: Input should be a valid boolean"), value
    assert len(upstream.requests) == sent  # refused before the upstream, as vLLM refuses
    tally.check()


# -- upstream answer shapes ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["html", "json_array", "empty_html"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", KINDS)
def test_a_200_that_is_no_api_answer_is_a_502_in_the_routes_format(
    gw: GatewayServer, route: str, kind: str, shape: str
) -> None:
    tally = _Tally(gw)
    for stream in (False, True):
        resp = tally.post(route, _body(route, f"{shape}@{kind}", stream=stream))
        assert resp.status_code == 502, (stream, resp.text)
        assert f"upstream {kind!r} answered 200 with" in _error(route, resp)
    tally.check()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", ["/chat/completions", "/completions"])
def test_deep_answers_are_relayed_or_translated_to_the_end(
    gw: GatewayServer, route: str, kind: str
) -> None:
    """Each event (and the whole answer) nested 1000 deep: the chat translation reads its
    events with ``json``, which stops near there; what it cannot read goes on unchanged."""
    tally = _Tally(gw)
    whole = tally.post(route, _body(route, f"deep_answer@{kind}"))
    assert whole.status_code == 200 and isinstance(orjson.loads(whole.content), dict)
    streamed = tally.post(route, _body(route, f"deep_answer@{kind}", stream=True))
    assert streamed.status_code == 200
    assert streamed.text.endswith("data: [DONE]\n\n")
    tally.check()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("route", ["/chat/completions", "/completions"])
def test_a_lone_surrogate_is_a_502_whole_and_stays_escaped_in_a_stream(
    gw: GatewayServer, route: str, kind: str
) -> None:
    tally = _Tally(gw)
    whole = tally.post(route, _body(route, f"surrogate@{kind}"))
    assert whole.status_code == 502 and "not JSON" in _error(route, whole)
    streamed = tally.post(route, _body(route, f"surrogate@{kind}", stream=True))
    assert streamed.status_code == 200
    text = streamed.content.decode("utf-8")  # valid UTF-8: the escape was not decoded into it
    assert "\\ud800" in text and text.endswith("data: [DONE]\n\n")
    tally.check()


# -- token ids from the client ---------------------------------------------------------------

_BAD_IDS = [
    (b"[1, true]", "[1] is true"),
    (b"[1, -1]", "[1] is -1"),
    (b"[1, 2.0]", "[1] is 2.0"),
    (b"[1, 123456789012345678901234567890]", "[1] is 1.2345678901234568e+29"),
    (b"[1, 9999999]", "[1] is 9999999"),
    (b'[1, "2"]', "[1] is '2'"),
]


@pytest.mark.parametrize(("ids", "named"), _BAD_IDS)
@pytest.mark.parametrize("kind", ["ids", "plain"])  # the upstreams whose tokenizer is loaded
def test_client_ids_outside_the_vocabulary_are_refused_before_the_upstream(
    gw: GatewayServer, upstream: FaultServer, kind: str, ids: bytes, named: str
) -> None:
    tally = _Tally(gw)
    sent = len(upstream.requests)
    model = kind.encode()
    cases = [
        ("/completions", b'{"model":"m-%s","prompt":%s}' % (model, ids)),
        ("/completions", b'{"model":"m-%s","prompt":[[1],%s]}' % (model, ids)),
    ]
    for route in ("/chat/completions", "/messages", "/responses"):
        body = orjson.dumps(_body(route, f"m-{kind}", kv_transfer_params={"prompt_token_ids": 0}))
        cases.append((route, body.replace(b'"prompt_token_ids":0', b'"prompt_token_ids":' + ids)))
    for route, body in cases:
        resp = tally.post(route, body)
        assert resp.status_code == 400, (route, resp.text)
        assert named in _error(route, resp) and "not a token id" in _error(route, resp)
    assert len(upstream.requests) == sent
    tally.check()


def test_client_ids_in_the_vocabulary_go_as_they_came(
    gw: GatewayServer, upstream: FaultServer
) -> None:
    raw = b'{"model":"m-ids","prompt":[[1,2],[151643]],"max_tokens":3}'
    assert _post(gw, "/completions", raw).status_code == 200
    assert upstream.last_request.body == raw


# -- numbers beyond 64 bits ------------------------------------------------------------------

_BIG = b"123456789012345678901234567890"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("kind", ["ids", "plain"])
def test_integers_beyond_64_bits_reach_the_upstream_exactly(
    gw: GatewayServer, upstream: FaultServer, route: str, kind: str
) -> None:
    """orjson reads them as doubles: a body re-written around ids would carry another number,
    so such a body goes as it came (counted as a pass-through)."""
    raw = orjson.dumps(_body(route, f"m-{kind}"))[:-1] + b',"extra":{"n":[' + _BIG + b"]}}"
    resp = _post(gw, route, raw)
    assert resp.status_code == 200, resp.text
    assert upstream.last_request.body == raw
    metrics = httpx.get(f"http://127.0.0.1:{gw.port}/metrics").text
    assert f'reason="inexact_number",upstream="{kind}"' in metrics


# -- the gateway's own failures ---------------------------------------------------------------


def test_a_failure_of_the_gateways_own_is_a_counted_500_in_the_routes_format(
    gw: GatewayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(chat, "_chat", broken)
    monkeypatch.setattr(native, "_with_ids", broken)
    tally = _Tally(gw)
    for route in ("/chat/completions", "/messages", "/responses"):
        resp = tally.post(route, _body(route, "m-ids"))
        assert resp.status_code == 500
        assert "the gateway failed on this request" in _error(route, resp)
    tally.check()


_FIELDS = (
    "tools", "tool_choice", "response_format", "stop", "logit_bias", "metadata", "echo", "n",
    "max_tokens", "chat_template_kwargs", "kv_transfer_params", "stream_options", "documents",
    "add_generation_prompt", "truncate_prompt_tokens", "thinking", "system", "instructions",
    "input", "prompt", "messages", "logprobs", "seed", "user", "reasoning_effort", "model",
)  # fmt: skip


_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats()
_values = st.recursive(
    _scalars | st.text(max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["type", "role", "content", "text", "name", "a"]), inner)
    ),
    max_leaves=8,
)  # wrong types of every kind, small


@settings(max_examples=80, deadline=None)
@given(
    route=st.sampled_from(ROUTES),
    kind=st.sampled_from(KINDS),
    field=st.sampled_from(_FIELDS),
    value=st.builds(_deep, st.integers(1, LIMIT - 2) | st.sampled_from([253, 254, 999]))
    | st.builds(orjson.dumps, _values),
)
@example(route="/chat/completions", kind="ids", field="reasoning_effort", value=b"[]")
@example(route="/messages", kind="ids", field="tool_choice", value=b'{"type":[]}')
@example(route="/chat/completions", kind="plain", field="response_format", value=_deep(1000))
def test_a_deep_or_odd_value_in_any_field_the_gateway_reads_is_never_a_500(
    gw: GatewayServer, route: str, kind: str, field: str, value: bytes
) -> None:
    tally = _Tally(gw)
    body = orjson.dumps({**_body(route, f"m-{kind}"), field: "marker"})
    resp = tally.post(route, body.replace(b'"marker"', value, 1))
    assert resp.status_code in (200, 400), resp.text  # 400: the gateway's own check or vLLM's
    if resp.status_code == 400:
        assert _error(route, resp)
    tally.check()
