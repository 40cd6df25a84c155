"""Text vs ids is judged on the pairs the probe sent, and only on them.

Another client's traffic (a shared server) marks some requests, which are then left out: the
comparison must neither pair requests of different pairs nor fall back to the share of the
one form's leftover requests (tests/e2e/test_doctor.py's healthy probe, seen failing both
ways on a loaded machine: a ~26 ms "saving" from one text request, no ids request beside it).
"""

from __future__ import annotations

from pathlib import Path

from tests.report.fixtures import Parts, record, write_probe_dir
from ttftscope.doctor.rules.tokenize import server_tokenization_findings
from ttftscope.findings import Finding
from ttftscope.records import RequestRecord, Variant
from ttftscope.results.runs import load_runs

SIZE = 500


def _findings(tmp: Path, recs: list[RequestRecord]) -> list[Finding]:
    write_probe_dir(tmp, recs)
    (run,) = load_runs([tmp])
    return server_tokenization_findings(run)


def _ab(pairs: list[tuple[float, float]], start: int = 0) -> list[RequestRecord]:
    """Pairs as the probe sends them (text first, then ids first, alternating), pair k's
    text taking ``pairs[k][0]`` ms and its ids ``pairs[k][1]``."""
    recs: list[RequestRecord] = []
    for k, ttfts in enumerate(pairs):
        order: tuple[Variant, Variant] = ("text", "ids") if k % 2 == 0 else ("ids", "text")
        for variant in order:
            ttft = ttfts[0] if variant == "text" else ttfts[1]
            parts = Parts(frontend=ttft - 60.0, prefill=50.0, outside=10.0)
            recs.append(record(start + len(recs), parts, variant=variant, size=SIZE))
    return recs


def _sent_in_pairs(ttfts: list[float]) -> list[RequestRecord]:
    """Pairs whose two requests take the same time: ids save nothing."""
    return _ab([(t, t) for t in ttfts])


def _marked(recs: list[RequestRecord], variant: str, pairs: set[int]) -> list[RequestRecord]:
    """``recs`` with the ``variant`` request of each pair in ``pairs`` marked shared."""
    return [
        r.model_copy(update={"contaminated": r.variant == variant and r.index // 2 in pairs})
        for r in recs
    ]


def test_a_left_out_request_does_not_shift_the_pairs(tmp_path: Path) -> None:
    # the machine slows down pair by pair; within a pair text and ids take the same time
    recs = _marked(_sent_in_pairs([100.0, 160.0, 220.0, 280.0, 340.0, 400.0]), "text", {0})
    found = _findings(tmp_path, recs)
    # k-th measured text against k-th ids read the drift as ids saving 60 ms in every pair
    assert not [f for f in found if f.saving_ms], found


def test_no_measured_pair_decides_nothing_whatever_the_leftover_share(tmp_path: Path) -> None:
    recs = _marked(_sent_in_pairs([66.0] * 5), "ids", {0, 1, 2, 3, 4})  # every ids request
    recs = [  # text: front end 26 of 66 ms (39%), as the e2e run measured
        r.model_copy(update={"server_frontend_ms": 26.0, "prefill_ms": 30.0})
        if r.variant == "text"
        else r
        for r in recs
    ]
    (found,) = _findings(tmp_path, recs)
    assert found.severity == "info" and found.saving_ms is None, found
    assert found.remedy.startswith("not decided: run `ttftscope probe --ab ids --repeat")
    assert "text vs ids at ~1,000 tokens: no pair had both requests measured" in [
        e.fact for e in found.evidence
    ]


def _with_tokens(recs: list[RequestRecord], variant: str, tokens: int) -> list[RequestRecord]:
    return [
        r.model_copy(update={"prompt_tokens": tokens}) if r.variant == variant else r for r in recs
    ]


def test_the_ab_fact_states_the_ab_prompts_size_not_the_judged_series(tmp_path: Path) -> None:
    """The demo's "median TTFT text 50 ms vs ids 41 ms at ~21,073 tokens": the text/ids
    prompts at the 16,000-token context were ~16,400 tokens; 21,073 was the chat-shaped
    series' grown conversation."""
    chat = [record(i, Parts(frontend=40.0, prefill=40.0, outside=10.0)) for i in range(5)]
    # ids 9 ms faster in four pairs, 9 ms slower in one: not decided
    ab = _ab([(100.0, 91.0)] * 4 + [(100.0, 109.0)], start=5)
    ab = _with_tokens(ab, "ids", 8500)
    recs = _with_tokens(chat, "chat", 21073) + _with_tokens(ab, "text", 8500)
    recs = [r.model_copy(update={"context_tokens_target": 8000}) for r in recs]
    (found,) = _findings(tmp_path, recs)
    facts = " ".join(e.fact for e in found.evidence)
    assert "(chat)" in found.title and "at ~8,500 tokens; text − ids per pair" in facts, facts


def test_a_probes_direct_arm_is_not_judged_beside_its_chat_series(tmp_path: Path) -> None:
    """The demo's "TTFT is 33% server-side tokenization (direct)" where the chat series, the
    same requests to the same server, measured 21%: the direct arm ran between the in-process
    gateway's requests."""
    chat = [record(i, Parts(frontend=19.0, prefill=50.0, outside=21.0)) for i in range(5)]
    direct = [
        record(5 + i, Parts(frontend=21.0, prefill=21.0, outside=21.0), variant="direct")
        for i in range(5)
    ]
    assert not _findings(tmp_path, chat + direct)
