"""``stream`` read as vLLM's pydantic reads it; client token ids checked against the vocabulary."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from ttftscope.gateway.pipeline.inputpolicy import (
    InvalidField,
    client_ids,
    lax_bool,
    max_token_id,
    stream_of,
    token_ids_problem,
)
from ttftscope.tokenization.loader import load_tokenizer

# vLLM 0.32's request models declare ``stream: bool | None`` and FastAPI validates the parsed
# JSON in pydantic's lax python mode: pydantic itself is the reference
_VLLM_STREAM = TypeAdapter(bool | None)
_WORDS = ["true", "false", "yes", "no", "on", "off", "t", "f", "y", "n", "1", "0"]
_words = st.sampled_from(_WORDS).flatmap(
    lambda w: st.sampled_from([w, w.upper(), w.title(), f" {w}", f"{w} ", w + w])
)
_json_values: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1.0, 0.5])
    | _words
    | st.text(max_size=6)
    | st.lists(st.booleans(), max_size=2)
    | st.dictionaries(st.text(max_size=2), st.booleans(), max_size=1)
)


@given(_json_values)
def test_stream_is_read_exactly_as_vllms_pydantic_reads_it(value: Any) -> None:
    try:
        want: bool | None = _VLLM_STREAM.validate_python(value)
    except ValidationError:
        with pytest.raises(InvalidField, match="stream: Input should be a valid boolean"):
            stream_of({"stream": value})
        return
    assert lax_bool(value) is want
    assert stream_of({"stream": value}) is (want is True)


def test_no_stream_field_is_no_stream() -> None:
    assert stream_of({}) is False


def test_a_deep_value_is_described_not_written_out() -> None:
    deep: list[Any] = []
    for _ in range(5000):  # past what json.dumps writes
        deep = [deep]
    with pytest.raises(InvalidField, match=r"\(got a list;"):
        stream_of({"stream": deep})
    assert token_ids_problem("prompt", [deep], 9) is not None


@pytest.mark.parametrize(
    ("path", "body", "want"),
    [
        ("/v1/completions", {"prompt": [1, 2]}, [("prompt", [1, 2])]),
        ("/v1/completions", {"prompt": [[1], [2, 3]]}, [("prompt[0]", [1]), ("prompt[1]", [2, 3])]),
        ("/v1/completions", {"prompt": "text"}, []),
        ("/v1/completions", {"prompt": ["a", "b"]}, []),
        ("/v1/chat/completions", {"prompt": [1, 2]}, []),  # not a field of chat
        (
            "/v1/messages",
            {"kv_transfer_params": {"prompt_token_ids": [5]}},
            [("kv_transfer_params.prompt_token_ids", [5])],
        ),
    ],
)
def test_the_ids_a_client_sends_are_found_where_vllm_reads_them(
    path: str, body: dict[str, Any], want: list[tuple[str, list[Any]]]
) -> None:
    assert client_ids(path, body) == want


@pytest.mark.parametrize(
    ("ids", "bad"),
    [
        ([1, True], "prompt[1] is true"),
        ([1, -1], "prompt[1] is -1"),
        ([1, 1.0], "prompt[1] is 1.0"),
        ([1.2e29], "prompt[0] is 1.2e+29"),
        ([100], "prompt[0] is 100"),
        (["1"], "prompt[0] is '1'"),
        ([[[1]]], "prompt[0] is a list"),
        ([None], "prompt[0] is null"),
    ],
)
def test_ids_that_are_not_in_the_vocabulary_are_named(ids: list[Any], bad: str) -> None:
    problem = token_ids_problem("prompt", ids, 99)
    assert problem is not None and problem.startswith(bad) and "0 to 99" in problem


def test_ids_in_the_vocabulary_pass() -> None:
    assert token_ids_problem("prompt", [0, 5, 99], 99) is None
    assert token_ids_problem("prompt", [], 99) is None


def test_the_largest_id_is_the_tokenizers_or_the_models_whichever_is_larger(
    qwen2_dir: Path, tmp_path: Path
) -> None:
    tok = load_tokenizer(qwen2_dir)  # the fixture's folder has no config.json
    largest = max(tok.hf.get_vocab(with_added_tokens=True).values())
    assert max_token_id(tok) == largest
    # a model whose embedding has more rows than the tokenizer has ids (Qwen's padding)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(qwen2_dir / name, tmp_path / name)
    (tmp_path / "config.json").write_text(json.dumps({"vocab_size": largest + 100}))
    assert max_token_id(load_tokenizer(tmp_path)) == largest + 99
