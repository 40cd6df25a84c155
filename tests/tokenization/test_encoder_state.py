"""An encoder's state moved to another encoder (another process, in the gateway): the ids
it hands back and every later call are those of an encoder that never moved."""

from __future__ import annotations

import pickle
from array import array
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tokenization.exact import Exact
from tests.tokenizer_fixtures.fixtures import FAMILIES
from ttftscope.agenttext import agent_turn
from ttftscope.tokenization.encoder_state import EncoderState
from ttftscope.tokenization.incremental import IncrementalEncoder
from ttftscope.tokenization.loader import Tokenizer

# appends with the seams the cuts must handle: spaces, newlines, digits, non-ASCII, emoji
_PIECE = st.text(alphabet=st.sampled_from(list(" \n\tab1Zé中😀.(_")), min_size=1, max_size=40)


@pytest.mark.parametrize("family", FAMILIES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.integers(0, 20), appends=st.lists(_PIECE, min_size=1, max_size=4))
def test_an_adopted_state_serves_the_next_turns_exactly(
    family: str, load_family: Callable[[str], Tokenizer], start: int, appends: list[str]
) -> None:
    tok = load_family(family)
    text = "".join(agent_turn(start + i, seed=start, chars=300) for i in range(3))
    worker = IncrementalEncoder(tok)
    ids = worker.encode(text)
    moved = pickle.loads(pickle.dumps(worker.snapshot()))  # as it crosses a process boundary
    here = IncrementalEncoder(tok)
    assert here.adopt(moved, worker.stats) == ids == tok.encode(text)
    assert here.stats.path == "full" and here.utf8 == text.encode()
    check = Exact(here, tok, last=text)  # each next text by the path it must take
    for piece in appends:
        text += piece
        check(text)


def test_ids_only_leave_nothing_cached(load_family: Callable[[str], Tokenizer]) -> None:
    """A worker that served a text by a plain full encode sends ids only: they are handed
    out, and the next call encodes in full (no state to splice into)."""
    tok = load_family("o200k")
    ids = tok.encode("hello world")
    here = IncrementalEncoder(tok)
    _ = here.encode("something else entirely")
    assert here.adopt(EncoderState(b"", array("I", ids).tobytes(), None)) == ids
    assert here.utf8 == b""
    assert here.encode("hello world!") == tok.encode("hello world!")
    assert here.stats.path == "full"


@pytest.mark.parametrize("family", FAMILIES)
def test_a_worker_starting_from_a_sent_state_hands_back_an_exact_one(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    """The gateway's fork path: the state of another conversation goes to the worker, which
    encodes a text sharing only its start, and the result goes on from here exactly."""
    tok = load_family(family)
    shared = "".join(agent_turn(i, seed=21, chars=400) for i in range(3))
    here = IncrementalEncoder(tok)
    here.encode(shared + agent_turn(9, seed=21, chars=300))
    worker = IncrementalEncoder(tok)
    worker.adopt(pickle.loads(pickle.dumps(here.snapshot())))
    other = shared + agent_turn(10, seed=22, chars=900)
    ids = worker.encode(other)
    assert ids == tok.encode(other) and worker.stats.path == "edit"
    back = IncrementalEncoder(tok)
    assert back.adopt(pickle.loads(pickle.dumps(worker.snapshot())), worker.stats) == ids
    Exact(back, tok, last=other)(other + agent_turn(11, seed=22, chars=200))
