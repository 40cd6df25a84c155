"""The breakdown fits 80 columns without cutting a cell; A/B lines match the table's rows."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from ttftscope.report.terminal import FOOTNOTE, ab_lines, footnotes, print_probe_summary


def _group(size: int, variant: str, ttft: float) -> dict[str, Any]:
    return {
        "context_tokens": size,
        "variant": variant,
        "n": 12,
        "cold_ttft_ms": 58_912.4,
        "median_ttft_ms": ttft,
        "p90_ttft_ms": ttft * 1.2,
        "median_server_ttft_ms": ttft - 90,
        "median_queue_ms": 12_345.6,
        "median_prefill_ms": 10_550.0,
        "median_server_frontend_ms": 630.2,
        "median_outside_server_ms": 151.7,
        "median_serialize_ms": 4.8,
        "median_tokenize_ms": 498.1,
        "prefix_hit_rate": 0.99212,
        "computed_tokens": 1_234.0,
    }


SUMMARY: dict[str, Any] = {
    "model": "ttftscope-tiny",
    "groups": [
        _group(size, variant, ttft)
        for size in (0, 123_000)
        for variant, ttft in (("chat", 12_000.5), ("text", 11_000.0), ("ids", 9_000.0))
    ],
    "ab": [
        {
            "context_tokens": 123_000,
            "text_median_ttft_ms": 11_000.0,
            "ids_median_ttft_ms": 9_000.0,
            "ttft_ratio_text_over_ids": 11 / 9,
            "text_median_server_frontend_ms": 630.2,
            "ids_median_server_frontend_ms": 30.0,
        },
    ],
}


def _render(width: int, summary: dict[str, Any] = SUMMARY, **kw: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    print_probe_summary(summary, console, **kw)
    return out.getvalue()


def test_at_80_columns_no_cell_is_cut_and_no_line_is_longer() -> None:
    text = _render(80)
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    for value in ("123,000", "58,912", "12,000", "12,346", "0.992", "498"):
        assert value in text


def test_wide_table_has_every_column() -> None:
    text = _render(160, wide=True)
    assert "…" not in text
    assert "p90" in text and "serialize" in text and "computed" in text


def test_footnote_and_ab_line_are_printed() -> None:
    text = " ".join(_render(80).split())
    assert " ".join(FOOTNOTE.split()) in text
    assert ab_lines(SUMMARY["ab"])[0] in text
    assert "123,000 tokens" in ab_lines(SUMMARY["ab"])[0]


def test_the_context_zero_note_prints_only_when_a_context_zero_row_ran() -> None:
    with_zero = " ".join(_render(80).split())
    assert "Context 0 has no synthetic context: the chat rows" in with_zero
    # text and ids at context 0 send one fresh turn alone: the note says why nothing hits
    assert "At context 0 text and ids send a fresh" in with_zero
    without = {**SUMMARY, "groups": [g for g in SUMMARY["groups"] if g["context_tokens"]]}
    text = " ".join(_render(80, without).split())
    assert " ".join(FOOTNOTE.split()) in text
    assert "Context 0" not in text and "context 0" not in text


def test_the_context_zero_note_names_only_the_rows_that_ran() -> None:
    chat_only = footnotes([{"context_tokens": 0, "variant": "chat"}])
    assert len(chat_only) == 2 and "text and ids" not in " ".join(chat_only)
    paths = footnotes([{"context_tokens": 0, "variant": v} for v in ("direct", "gateway")])
    assert "the direct/gateway rows" in paths[1]
