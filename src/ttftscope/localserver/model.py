"""Build the tiny random-weight demo model with a real cl100k tokenizer, once, cached."""

from __future__ import annotations

import json
import os
import time
from importlib import resources
from pathlib import Path

from ttftscope.assets import cache_dir, package_file
from ttftscope.errors import LocalServerError
from ttftscope.localserver.install import ensure_vllm_venv, venv_python
from ttftscope.localserver.progress import Progress, run_with_progress, say_stderr

MODEL_NAME = "ttftscope-tiny-cl100k"
# bump when the model or tokenizer recipe changes (2: tool template; 3: max_new_tokens 64)
MODEL_BUILD_VERSION = "3"
BPE_OPENAI = ("bpe-openai", "0.1.4", "data/cl100k_base.tiktoken.gz")


def model_dir() -> Path:
    """Where the tiny model lives.

    >>> model_dir().name
    'ttftscope-tiny-cl100k'
    """
    return cache_dir() / "models" / MODEL_NAME


def ensure_tiny_model(venv: Path | None = None, progress: Progress | None = None) -> Path:
    """Build (once) the random-weight Llama with the real cl100k tokenizer; return its folder.

    Runs ``localserver/data/build_model.py`` with the vLLM venv's python (it has torch and
    transformers). The script checks its token ids against tiktoken before it returns.

    Needs the vLLM venv, so not run as a test::

        (ensure_tiny_model() / "tokenizer.json").exists()  # True
    """
    say = progress or say_stderr
    out = model_dir()
    marker = out / "build.ok"
    if marker.exists() and json.loads(marker.read_text()).get("recipe") == MODEL_BUILD_VERSION:
        return out
    venv = venv or ensure_vllm_venv(progress)
    ranks = package_file(*BPE_OPENAI)
    out.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    log = out.parent / f"{MODEL_NAME}.build.log"
    log.write_text("", encoding="utf-8")
    announce = f"building the tiny model in {out} (about 20 s; log: {log})"
    t0 = time.monotonic()
    script = resources.files("ttftscope").joinpath("localserver/data/build_model.py")
    with resources.as_file(script) as path:
        cmd = [str(venv_python(venv)), str(path), "--out", str(out), "--ranks", str(ranks)]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        code = run_with_progress(
            cmd, log, "building the tiny model", say, env=env, announce=announce
        )
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-20:])
        raise LocalServerError(
            f"building the tiny model failed (exit {code}); log: {log}\n{tail}",
            hint=f"delete {out} and retry; report the log if it fails again",
        )
    marker.write_text(
        json.dumps({"recipe": MODEL_BUILD_VERSION, "seconds": round(time.monotonic() - t0, 1)}),
        encoding="utf-8",
    )
    return out
