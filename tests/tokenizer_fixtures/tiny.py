"""The tiny model's tokenizer files, built the way the tiny model builds them, without vLLM.

``ttftscope local-server install`` builds the whole tiny model (random weights need torch,
so it runs ``localserver/data/build_model.py`` in vLLM's venv). The unit tests need only its
``tokenizer.json`` and ``tokenizer_config.json`` (cl100k with ChatML specials, the tool chat
template), which that same script makes from the same rank file with ``tokenizers`` alone:
this module runs those functions of it, checks the ids against tiktoken as the script does,
and caches the folder beside the other fixtures (``cache_dir()/tokenizers/tiny-cl100k``).

>>> (tiny_tokenizer_dir() / "tokenizer_config.json").is_file()
True
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from importlib import resources
from pathlib import Path
from types import ModuleType

from tests.tokenizer_fixtures.fixtures import fixture_root
from ttftscope.assets import package_file
from ttftscope.localserver.model import BPE_OPENAI, MODEL_BUILD_VERSION

NAME = "tiny-cl100k"
MARKER = ".tiny.json"


def _build_model_script() -> ModuleType:
    """``localserver/data/build_model.py`` as a module (it is package data, not a module)."""
    script = resources.files("ttftscope").joinpath("localserver/data/build_model.py")
    spec = importlib.util.spec_from_file_location("ttftscope_build_model", str(script))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _valid(folder: Path) -> bool:
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return record == {"recipe": MODEL_BUILD_VERSION} and (folder / "tokenizer.json").is_file()


def tiny_tokenizer_dir() -> Path:
    """A folder with the tiny model's tokenizer files (built once, verified, cached)."""
    final = fixture_root() / NAME
    if _valid(final):
        return final
    script = _build_model_script()
    ranks = script.load_ranks(package_file(*BPE_OPENAI))
    tok = script.build_tokenizer(ranks)
    script.verify(tok, ranks)  # its ids are tiktoken's, or SystemExit
    tmp = final.with_name(f".{NAME}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    script.write_tokenizer_files(tmp, tok)
    (tmp / MARKER).write_text(json.dumps({"recipe": MODEL_BUILD_VERSION}), encoding="utf-8")
    shutil.rmtree(final, ignore_errors=True)
    try:
        tmp.rename(final)
    except OSError:  # another process finished first; its copy is equally valid
        shutil.rmtree(tmp, ignore_errors=True)
    return final
