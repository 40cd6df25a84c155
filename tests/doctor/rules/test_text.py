"""Findings from request logs: dynamic prefixes, inexact ids, non-NFC text; gateway counters."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

from ttftscope.doctor.rules.text import TextEvidence, text_findings
from ttftscope.doctor.serverfacts import GatewayFacts
from ttftscope.findings import Finding
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> Tokenizer:
    return load_tokenizer(tiny_dir)


def _log(tmp: Path, bodies: list[dict[str, object]]) -> Path:
    path = tmp / "requests.jsonl"
    path.write_text("".join(json.dumps(b) + "\n" for b in bodies))
    return path


def _run(
    path: Path,
    tok: Tokenizer | None = None,
    block: int | None = None,
    gw: GatewayFacts | None = None,
) -> list[Finding]:
    return text_findings(TextEvidence(logs=[path], tokenizer=tok, block_size=block), gw)


def _turns(stamps: tuple[str, str], context: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    history: list[dict[str, str]] = []
    for i, stamp in enumerate(stamps):
        history.append({"role": "user", "content": f"turn {i}"})
        system = {"role": "system", "content": f"Now: {stamp}\n{context}"}
        out.append({"model": "m", "messages": [system, *history]})
        history.append({"role": "assistant", "content": "done"})
    return out


def test_a_timestamp_early_in_the_system_prompt(tmp_path: Path, tiny: Tokenizer) -> None:
    bodies = _turns(("2026-12-01T10:00:00Z", "2026-12-01T10:01:07Z"), "rules. " * 400)
    (f,) = _run(_log(tmp_path, bodies), tiny, block=128)
    assert f.id == "dynamic-prefix" and "timestamp" in f.title
    facts = " ".join(e.fact for e in f.evidence)
    assert "'2026-12-01T10:00:00Z' → '2026-12-01T10:01:07Z'" in facts
    assert "KV blocks, block size 128)" in facts and "assumed" not in facts
    assert f.evidence[0].source == "requests.jsonl lines 1 → 2"


def test_without_a_tokenizer_characters_are_counted_and_the_block_size_assumed(
    tmp_path: Path,
) -> None:
    bodies = _turns(("2026-12-01T10:00:00Z", "2026-12-01T10:01:07Z"), "rules. " * 50)
    (f,) = _run(_log(tmp_path, bodies))
    assert "characters of the earlier prompt are not reused" in " ".join(e.fact for e in f.evidence)


def test_a_stable_conversation_is_quiet(tmp_path: Path, tiny: Tokenizer) -> None:
    bodies = _turns(("2026-12-01", "2026-12-01"), "rules. " * 50)
    assert _run(_log(tmp_path, bodies), tiny) == []


def test_naively_concatenated_ids_are_inexact(tmp_path: Path, tiny: Tokenizer) -> None:
    a, b = "the pipe", "line runs"
    naive = tiny.encode(a) + tiny.encode(b)
    assert naive != tiny.encode(a + b)  # a BPE merge across the boundary
    exact = tiny.encode("exact text is fine")
    (f,) = _run(_log(tmp_path, [{"prompt": naive}, {"prompt": exact}]), tiny)
    assert f.id == "inexact-token-ids"
    facts = " ".join(e.fact for e in f.evidence)
    assert f"at token {len(tiny.encode(a)) - 1}" in facts and "1 request(s)" in facts


def test_gateway_mismatches_are_reported(tmp_path: Path) -> None:
    gw = GatewayFacts(source="http://gw/metrics", shadow_checks=10, shadow_mismatches=1)
    (f,) = _run(_log(tmp_path, [{"prompt": "hi"}]), gw=gw)
    assert f.id == "inexact-token-ids" and "1 of 10 shadow checks" in f.evidence[0].fact


def test_non_nfc_text_is_named_and_the_remedy_says_whether_ids_change(
    tmp_path: Path, tiny: Tokenizer
) -> None:
    text = unicodedata.normalize("NFD", "café résumé ") * 20
    (f,) = _run(_log(tmp_path, [{"messages": [{"role": "user", "content": text}]}]), tiny)
    assert f.id == "non-ascii-slow-path" and "not in NFC" in f.title
    assert "character 4" in f.evidence[0].fact  # "cafe" then the combining accent
    assert "changes the ids" in f.remedy or "do not change" in f.remedy
