"""The start-up conformance check, one branch per test, against a stand-in vLLM (``vllmfake``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.gateway.reference import reference_ids
from tests.gateway.vllmfake import MODEL, FakeOptions, FakeVllm
from ttftscope.config.schema import UpstreamSettings
from ttftscope.gateway.pipeline.shapes import SHAPES, NativeApi, ShapeTable, shape_classes
from ttftscope.gateway.pipeline.upstreams import Upstream
from ttftscope.gateway.proving.conformance import check_upstream, recheck, summary_line
from ttftscope.gateway.proving.corpus import CORPUS, corpus_body

ALWAYS_TEXT: tuple[NativeApi, ...] = ("chat", "messages", "responses")  # their image class


@contextmanager
def _fake(model_dir: Path, **kw: Any) -> Iterator[FakeVllm]:
    with FakeVllm(FakeOptions(model_dir=model_dir, **kw)) as srv:
        yield srv


async def _started(srv: FakeVllm, model_dir: Path) -> Upstream:
    up = Upstream("u", UpstreamSettings(base_url=srv.base_url, model_dir=model_dir))
    await up.start(cache_bytes=1 << 20, shadow_every=0, env={})
    return up


def test_every_corpus_body_has_its_own_shape_class() -> None:
    for api, bodies in CORPUS.items():
        assert set(bodies) == set(SHAPES[api])
        for shape in bodies:
            assert shape in shape_classes(api, corpus_body(api, shape, "m")), (api, shape)


def test_shape_classes_of_plain_requests_are_plain_only() -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "o"}]}
    assert shape_classes("chat", chat) == {"plain"}
    assert shape_classes("messages", {"messages": chat["messages"]}) == {"plain"}
    assert shape_classes("responses", {"input": "hi"}) == {"plain"}


def test_a_table_gates_on_every_class() -> None:
    from ttftscope.gateway.pipeline.passthrough import PassThrough
    from ttftscope.gateway.pipeline.shapes import Verdict

    table = ShapeTable({("chat", "plain"): Verdict(True, "render: equal", "render")})
    table.gate("chat", {"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(PassThrough) as caught:
        table.gate("chat", {"messages": [{"role": "tool", "content": "x"}]})
    assert caught.value.reason == "unproven_shape" and "tool_results" in caught.value.detail


@pytest.mark.asyncio
async def test_render_routes_prove_each_class_and_a_difference_keeps_it_text(
    qwen2_dir: Path,
) -> None:
    with _fake(qwen2_dir, wrong=frozenset({"tools"})) as srv:
        up = await _started(srv, qwen2_dir)
        found = await check_upstream(up)
    table = found.table
    assert table.get("chat", "plain").ids and table.get("chat", "plain").oracle == "render"
    assert table.get("responses", "untyped_items").ids  # 0.34 accepts them
    wrong = table.get("chat", "tools")
    assert not wrong.ids and "differs at token" in wrong.why
    assert not any(p == "/tokenize" for p in srv.seen.paths)  # render answered everything
    for api in ALWAYS_TEXT:  # the gateway sends images as text itself
        assert table.get(api, "image").oracle == "local" and not table.get(api, "image").ids


@pytest.mark.asyncio
async def test_plain_chat_ids_equal_an_independent_rendering(qwen2_dir: Path) -> None:
    body = corpus_body("chat", "plain", MODEL)
    with _fake(qwen2_dir) as srv:
        assert srv.ids("chat", body) == reference_ids(qwen2_dir, body["messages"])


@pytest.mark.asyncio
async def test_only_tokenize_served_each_render_route_is_asked_once(qwen2_dir: Path) -> None:
    with _fake(qwen2_dir, render=False) as srv:
        up = await _started(srv, qwen2_dir)
        found = await check_upstream(up)
    plain = found.table.get("messages", "plain")
    assert plain.ids and plain.oracle == "tokenize"
    renders = [p for p in srv.seen.paths if p.endswith("/render")]
    assert sorted(renders) == sorted(
        ["/v1/chat/completions/render", "/v1/messages/render", "/v1/responses/render"]
    )


@pytest.mark.asyncio
@pytest.mark.parametrize("uses_ids", [True, False])
async def test_only_a_probe_proves_ids_were_used(qwen2_dir: Path, uses_ids: bool) -> None:
    with _fake(qwen2_dir, render=False, tokenize=False, uses_ids=uses_ids) as srv:
        up = await _started(srv, qwen2_dir)
        found = await check_upstream(up)
    plain = found.table.get("chat", "plain")
    if uses_ids:
        assert plain.ids and plain.oracle == "probe"
        assert srv.seen.paths.count("/tokenize") == 1  # asked once, remembered as not served
    else:  # the chat-ids probe fails at start: no ids channel at all
        assert found.api is None and found.table.ids_count() == 0


@pytest.mark.asyncio
async def test_garbage_answers_leave_every_class_text_named(qwen2_dir: Path) -> None:
    with _fake(qwen2_dir, hostile="garbage", tokenize=False, uses_ids=False) as srv:
        up = await _started(srv, qwen2_dir)
        up.api = "chat-ids"  # as if the channel were proven: the check alone decides
        found = await check_upstream(up)
    plain = found.table.get("chat", "plain")
    assert not plain.ids and plain.oracle == "probe", plain
    assert "not JSON" in plain.why or "counted 7" in plain.why


@pytest.mark.asyncio
async def test_a_newer_release_is_checked_and_logged_in_one_line(
    qwen2_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _fake(qwen2_dir, version="0.35.0") as srv:
        up = await _started(srv, qwen2_dir)
        with caplog.at_level(logging.INFO, "ttftscope.gateway"):
            found = await check_upstream(up)
            logging.getLogger("ttftscope.gateway").info("%s", summary_line(found))
    assert found.profile == "0.35 (as 0.34)" and found.table.get("chat", "plain").ids
    line = caplog.records[-1].getMessage()
    assert line.startswith("upstream u: vLLM 0.35.0, profile 0.35 (as 0.34), front end python")


@pytest.mark.asyncio
@pytest.mark.parametrize("version", ["0.31.2", None, "nginx"])
async def test_old_or_unknown_servers_stay_text_unasked(
    qwen2_dir: Path, version: str | None
) -> None:
    with _fake(qwen2_dir, version=version) as srv:
        up = await _started(srv, qwen2_dir)
        found = await check_upstream(up)
    assert found.table.ids_count() == 0 and "not vLLM 0.32 or newer" in found.reason
    assert srv.seen.paths == []  # neither probed nor rendered


@pytest.mark.asyncio
async def test_a_version_change_turns_text_then_rechecks(qwen2_dir: Path) -> None:
    with _fake(qwen2_dir) as srv:
        up = await _started(srv, qwen2_dir)
        await check_upstream(up)
        assert up.shapes is not None and up.shapes.ids_count() > 0
        assert await recheck(up) is None  # unchanged: nothing asked again
        srv.options.version = "0.31.0"
        found = await recheck(up)
    assert found is not None and found.version == "0.31.0"
    assert up.api is None and up.shapes.ids_count() == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("uses_ids", [True, False])
async def test_a_rust_front_end_gets_ids_only_where_a_probe_proves_them(
    qwen2_dir: Path, uses_ids: bool
) -> None:
    with _fake(qwen2_dir, rust="0.1.0", uses_ids=uses_ids) as srv:
        up = await _started(srv, qwen2_dir)
        found = await check_upstream(up)
    assert found.frontend == "0.1.0"
    assert not [p for p in srv.seen.paths if p.endswith(("/render", "/tokenize"))]
    plain = found.table.get("chat", "plain")
    assert plain.ids == uses_ids
    if uses_ids:
        assert plain.oracle == "probe"
    assert "front end rust 0.1.0" in summary_line(found)
