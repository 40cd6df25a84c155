"""The live queue rule: waiting above 0 in at least half of three or more scrapes."""

from __future__ import annotations

from ttftscope.doctor.rules.limits import UNREAD
from ttftscope.doctor.rules.livequeue import live_queue_findings
from ttftscope.doctor.sampling import Gauges, LiveSamples
from ttftscope.doctor.serverfacts import ServerFacts
from ttftscope.findings import Finding

URL = "http://h:8000/metrics"


def _samples(
    waiting: list[float], running: float = 4, queue_ms: float | None = 210.0
) -> LiveSamples:
    gauges = tuple(Gauges(waiting=w, running=running, kv_usage=0.3) for w in waiting)
    return LiveSamples(URL, 5.0, gauges, mean_queue_ms=queue_ms, finished=3)


def _server(max_num_seqs: int | None = None) -> ServerFacts:
    return ServerFacts(
        source=URL,
        engine="vllm-v1",
        kv_cache_tokens=81920,
        kv_max_concurrency=2.5,
        max_num_seqs=max_num_seqs,
    )


def _one(found: list[Finding]) -> Finding:
    (f,) = found
    return f


def test_a_waiting_gauge_that_stays_at_6_is_queueing_with_the_sampled_figures() -> None:
    f = _one(live_queue_findings(_samples([6] * 11), _server()))
    assert f.id == "queueing" and f.severity == "warning"
    assert f.title == "requests wait in the server's queue now (100% of 11 /metrics scrapes)"
    facts = [e.fact for e in f.evidence]
    assert facts[0] == (
        "waiting 6 / 6 / 6 (min / median / max) over 11 scrapes in 5.0 s; above 0 in 100%"
    )
    assert "running 4 / 4 / 4 (min / median / max)" in facts
    assert "KV cache usage peaked at 30%" in facts
    assert "3 request(s) finished in the window after a mean 210 ms in the queue" in facts
    assert all(e.source == URL for e in f.evidence)
    assert f.saving_ms == 210.0


def test_an_idle_queue_is_not_queueing() -> None:
    assert live_queue_findings(_samples([0] * 11), _server()) == []


def test_one_scrape_above_zero_is_not_a_queue_that_stays() -> None:
    assert live_queue_findings(_samples([0, 0, 0, 0, 0, 6, 0, 0, 0, 0, 0]), _server()) == []


def test_half_the_scrapes_is_enough_and_fewer_than_three_scrapes_never_is() -> None:
    assert live_queue_findings(_samples([6, 0, 6, 0]), None)
    assert not live_queue_findings(_samples([6, 0, 0, 0, 6]), None)  # 40%
    assert not live_queue_findings(_samples([6, 6]), None)


def test_the_servers_own_limits_are_reported_and_an_unseen_max_num_seqs_is_said_plainly() -> None:
    f = _one(live_queue_findings(_samples([6] * 5), _server()))
    limits = [e.fact for e in f.evidence if e.fact.startswith("the server's limits")]
    assert limits == [
        "the server's limits: KV cache 81,920 tokens, 2.5 requests of its max_model_len at "
        "once (vllm:cache_config_info); --max-num-seqs not exported"
    ]
    assert UNREAD in f.remedy and "start command" in f.remedy and "256" not in f.remedy
    assert f.remedy.startswith("not a tokenization problem (token ids will not fix it): ")


def test_running_at_the_read_limit_says_raise_it_or_add_a_replica() -> None:
    # 4 ran and 6 waited: 10 would have run at once
    f = _one(live_queue_findings(_samples([6] * 5, running=4), _server(max_num_seqs=4)))
    assert "--max-num-seqs 4 (/server_info)" in " ".join(e.fact for e in f.evidence)
    assert "the server ran up to its --max-num-seqs 4 (from /server_info)" in f.remedy
    assert "start it with --max-num-seqs 10 or more if the KV cache" in f.remedy
    assert "add a replica" in f.remedy and UNREAD not in f.remedy


def test_running_below_the_read_limit_blames_what_held_requests_instead() -> None:
    f = _one(live_queue_findings(_samples([6] * 5, running=2), _server(max_num_seqs=256)))
    assert "requests waited while 2 ran, below its --max-num-seqs 256" in f.remedy
    assert "start it with" not in f.remedy


def test_without_the_queue_histogram_there_is_no_saving_claimed() -> None:
    f = _one(live_queue_findings(_samples([6] * 5, queue_ms=None), None))
    assert f.saving_ms is None


def test_without_server_facts_the_limit_is_still_named_as_unseen() -> None:
    f = _one(live_queue_findings(_samples([6] * 5), None))
    assert "the server's limits: --max-num-seqs not exported" in [e.fact for e in f.evidence]
