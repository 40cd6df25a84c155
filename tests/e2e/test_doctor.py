"""``ttftscope doctor`` on the real local vLLM: each finding from the condition that causes it.

Each test creates one condition (a timestamp in the system prompt, naive id concatenation,
non-NFC text, a rate-limiting server, long contexts sent as text, more sessions than
``--max-num-seqs``, the prefix cache off) and checks the finding and its numbers; a healthy
short probe produces no warning, nor does the queue watched live on an idle server.
"""

from __future__ import annotations

import asyncio
import json
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from openai import OpenAI

from tests.faultserver import FaultServer
from ttftscope import Settings, instrument, instrumentation
from ttftscope.agenttext import build_context
from ttftscope.bench.options import BenchOptions, TargetSpec
from ttftscope.bench.runner import run_bench
from ttftscope.cli import cli
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import ObservabilitySettings, derive_metrics_url
from ttftscope.localserver.model import model_dir
from ttftscope.localstate import LocalServer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

pytestmark = pytest.mark.e2e


def doctor(tmp: Path, *args: str) -> tuple[int, dict[str, Any]]:
    """Run ``ttftscope doctor --json`` in ``tmp`` (no user config) and parse what it says."""
    result = CliRunner().invoke(
        cli,
        ["doctor", "--json", "--tokenizer", str(model_dir()), *args],
        env={"HOME": str(tmp), "XDG_CONFIG_HOME": str(tmp / "xdg")},
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def findings(report: dict[str, Any], fid: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["id"] == fid]


def facts(finding: dict[str, Any]) -> str:
    return " | ".join(e["fact"] for e in finding["evidence"])


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return load_tokenizer(model_dir())


def _chat(server: LocalServer, body: dict[str, Any]) -> dict[str, Any]:
    resp = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=300)
    resp.raise_for_status()
    data: dict[str, Any] = resp.json()
    return data


def _log(path: Path, bodies: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return path


def test_a_healthy_short_probe_gives_no_warning(
    vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, report = doctor(tmp_path, "--base-url", vllm.base_url, "--context-tokens", "0,500")
    assert code == 0, report["findings"]
    assert not [f for f in report["findings"] if f["severity"] != "info"]
    assert any("server metrics" in c for c in report["checked"])
    assert any("request records" in c for c in report["checked"])  # the short probe ran


def test_live_on_an_idle_server_no_queue_and_the_limits_it_can_and_cannot_see(
    vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The queue watched for 2 s (five scrapes) on a server nobody uses: no queueing; the KV
    cache's size is read from vllm:cache_config_info, and --max-num-seqs, which vLLM 0.32
    exports nowhere in /metrics (no VLLM_SERVER_DEV_MODE here), is said to be unseen."""
    monkeypatch.chdir(tmp_path)
    code, report = doctor(
        tmp_path, "--base-url", vllm.base_url, "--no-probe", "--sample-seconds", "2"
    )
    assert code == 0 and not findings(report, "queueing"), report["findings"]
    checked = report["checked"]
    assert any(c.startswith("the server's queue, 5 /metrics scrapes in") for c in checked)
    (limits,) = [c for c in checked if c.startswith("the server's limits: ")]
    assert "--max-num-seqs not exported" in limits
    assert "KV cache " in limits and "(vllm:cache_config_info)" in limits
    assert not [n for n in report["notes"] if "waiting" in n or "scrape failed" in n]


def test_long_contexts_sent_as_text_are_tokenization_bound(
    vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The finding rests on what ids measurably save (text vs ids at the largest context), not
    on the front end's share of TTFT, which shrinks as load stretches prefill. ~96K tokens sent
    as text cost the server ~100 ms of rendering and tokenizing (the README's A/B: 361 vs
    235 ms at 103K), five times the rule's 20 ms (MIN_SAVING_MS); at 32K it was twice."""
    monkeypatch.chdir(tmp_path)
    code, report = doctor(
        tmp_path,
        "--base-url",
        vllm.base_url,
        "--context-tokens",
        "2000,32000,96000",
        "--probe-seconds",  # 96K tokens on CPU: past the short probe's default minute
        "900",
    )
    # the server's front end (the doctor's own probe times no client tokenization)
    found = next(f for f in findings(report, "tokenization-bound") if "server-side" in f["title"])
    assert code == 1 and found["severity"] == "warning"
    text = facts(found)
    assert "ms per 1K tokens" in text and "hit rate" in text and " vs ids " in text
    assert found["saving_ms"] > 0 and "gateway" in found["remedy"]


def _count(tok: Tokenizer) -> Callable[[str], int]:
    return lambda text: len(tok.encode(text))


def test_a_timestamp_in_the_system_prompt_is_a_dynamic_prefix(
    vllm: LocalServer, tok: Tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent (the openai SDK, instrumented) that writes the time into its system prompt."""
    monkeypatch.chdir(tmp_path)
    context = build_context(3000, _count(tok), seed=7)
    settings = Settings(observability=ObservabilitySettings(log_requests=True))
    client = instrument(
        OpenAI(api_key="EMPTY", base_url=vllm.base_url, max_retries=0),
        settings=settings,
        records=tmp_path / "recs",
    )
    history: list[Any] = []
    for turn, stamp in enumerate(("2026-12-01T10:00:00Z", "2026-12-01T10:00:41Z")):
        system = f"You are a coding agent. Current time: {stamp}.\n{context}"
        history.append({"role": "user", "content": f"step {turn}: run the tests"})
        reply = client.chat.completions.create(
            model=vllm.model,
            messages=[{"role": "system", "content": system}, *history],
            max_tokens=2,
            temperature=0,
        )
        history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
    assert instrumentation(client).close(timeout=60)
    code, report = doctor(
        tmp_path, "--base-url", vllm.base_url, "--records", str(tmp_path / "recs"), "--no-probe"
    )
    (found,) = findings(report, "dynamic-prefix")
    text = facts(found)
    assert code == 1 and "timestamp" in found["title"]
    assert "block size 128" in text  # from vllm:cache_config_info, not assumed
    assert "tokens recomputed per request" in text
    assert any("request log" in c for c in report["checked"])


def _boundary_pair(tok: Tokenizer) -> tuple[str, str]:
    for a, b in (("the pipe", "line runs"), ("data", "base rows"), ("hello wor", "ld again")):
        if tok.encode(a) + tok.encode(b) != tok.encode(a + b):
            return a, b
    pytest.fail("no BPE merge across the boundary among the candidates")


def test_naive_id_concatenation_is_inexact(
    vllm: LocalServer, tok: Tokenizer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    a, b = _boundary_pair(tok)
    head = build_context(1000, _count(tok), seed=3) + " " + a
    naive = tok.encode(head) + tok.encode(b)
    body = {"model": vllm.model, "prompt": naive, "max_tokens": 2, "temperature": 0}
    resp = httpx.post(f"{vllm.base_url}/completions", json=body, timeout=120)
    assert resp.status_code == 200  # the server takes inexact ids without a word
    log = _log(tmp_path / "requests.jsonl", [body])
    code, report = doctor(
        tmp_path, "--base-url", vllm.base_url, "--records", str(log), "--no-probe"
    )
    (found,) = findings(report, "inexact-token-ids")
    # the first id that differs is the last piece of the head (merged with b when exact)
    at = len(tok.encode(head)) - 1
    assert code == 1 and f"at token {at:,}" in facts(found)


def test_non_nfc_input_is_named(
    vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    text = unicodedata.normalize("NFD", "Résumé of the café migration: naïve façade. ") * 40
    body = {"model": vllm.model, "max_tokens": 2, "messages": [{"role": "user", "content": text}]}
    _chat(vllm, body)
    log = _log(tmp_path / "requests.jsonl", [body])
    code, report = doctor(
        tmp_path, "--base-url", vllm.base_url, "--records", str(log), "--no-probe"
    )
    (found,) = findings(report, "non-ascii-slow-path")
    assert code == 1 and "not in NFC" in facts(found)
    assert "NFC" in found["remedy"]


def _bench(server: LocalServer, out: Path, targets: tuple[TargetSpec, ...], sessions: int) -> Path:
    ep = Endpoint(
        base_url=server.base_url,
        metrics_url=derive_metrics_url(server.base_url),
        model=server.model,
        timeout_s=300,
        max_tokens=8,
    )
    opts = BenchOptions(
        sessions=sessions,
        scale=0.02,
        num_prompts=2 * sessions,
        think_time_s=0.0,
        seed=time.time_ns() % 2**32,
        targets=targets,
        duration_s=120,
        num_warmups=0,
        max_tokens=8,  # short answers: the bench's own default is the traces' 216
    )
    asyncio.run(run_bench(ep, opts, result_dir=out))
    return out


def test_a_rate_limiting_server_is_flagged(
    vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with FaultServer() as limiting:
        targets = (TargetSpec("direct"), TargetSpec("limited", limiting.base_url("rate_limited")))
        out = _bench(vllm, tmp_path / "bench", targets, sessions=2)
    code, report = doctor(tmp_path, "--no-live", "--records", str(out))
    (found,) = findings(report, "rate-limited")
    assert code == 1 and "answered 429" in facts(found)
    assert "separate API key" in found["remedy"]


def test_more_sessions_than_max_num_seqs_queue_and_the_cache_is_off(
    constrained_vllm: LocalServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    out = _bench(constrained_vllm, tmp_path / "bench", (TargetSpec("direct"),), sessions=6)
    summary = json.loads((out / "bench-summary.json").read_text())
    # bench sees the queue: more sessions than the server's --max-num-seqs
    assert summary["peak_waiting"] > 0 and summary["mean_waiting"] > 0
    assert summary["targets"]["direct"]["peak_waiting"] > 0
    assert summary["server_mean_queue_ms"] > 0
    code, report = doctor(
        tmp_path, "--base-url", constrained_vllm.base_url, "--records", str(out), "--no-probe"
    )
    (queue,) = findings(report, "queueing")
    assert code == 1 and "waiting queue > 0" in facts(queue)
    assert "--max-num-seqs" in queue["remedy"] and "not a tokenization problem" in queue["remedy"]
    (off,) = findings(report, "prefix-cache-off")
    assert "enable_prefix_caching" in facts(off)
