"""What the gateway learns about an upstream from the served model's folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ttftscope.config.schema import UpstreamSettings
from ttftscope.gateway.pipeline.upstreams import Upstream


@pytest.mark.parametrize(
    ("generation_config", "limit"),
    [
        (None, 4096),  # no file: vLLM has no cap to apply either
        ('{"eos_token_id": 2}', 4096),
        ('{"max_new_tokens": 256}', None),  # applied unless --generation-config vllm
        ("{not json", 4096),
    ],
)
def test_chat_default_max_tokens_is_known_only_without_a_generation_cap(
    tmp_path: Path, qwen2_dir: Path, generation_config: str | None, limit: int | None
) -> None:
    folder = tmp_path / "model"
    shutil.copytree(qwen2_dir, folder)
    (folder / "generation_config.json").unlink(missing_ok=True)
    if generation_config is not None:
        (folder / "generation_config.json").write_text(generation_config)
    up = Upstream("u", UpstreamSettings(base_url="http://127.0.0.1:1/v1", model_dir=folder))
    up._load_tokenizer(cache_bytes=1 << 20, shadow_every=0)
    up.max_model_len = {"m": 4096}
    assert up.chat_default_limit("m") == limit
    assert up.chat_default_limit("other") is None
