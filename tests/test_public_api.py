"""The public surface: exactly ``__all__``, one import path per name, each with an example."""

from __future__ import annotations

import doctest
import importlib
import io
import pickle
import subprocess
import sys
from collections.abc import Callable

import pytest

import ttftscope
from tests.doctests import DoctestEnv, defining_module


def test_all_is_exactly_what_the_package_exports() -> None:
    public = {n for n in dir(ttftscope) if not n.startswith("_")} | {"__version__"}
    assert set(ttftscope.__all__) == public
    assert len(ttftscope.__all__) == len(set(ttftscope.__all__))
    for name in ttftscope.__all__:
        assert getattr(ttftscope, name) is not None


def test_every_public_name_has_examples_that_run(
    doctest_env: DoctestEnv, record_property: Callable[[str, object], None]
) -> None:
    # the examples are run here, not counted: a skipped example, or one that fails, does not
    # count (the module doctests run them too; this says which public name lacks one)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failures: list[str] = []
    without: list[str] = []
    for name in ttftscope.__all__:
        if name == "__version__":
            continue
        examples = 0
        for test in _doctests(name, doctest_env):
            report = io.StringIO()
            result = runner.run(test, out=report.write, clear_globs=True)
            examples += result.attempted
            if result.failed:
                failures.append(report.getvalue())
        if examples == 0:
            without.append(name)
    record_property("public_doctest_examples", runner.tries)
    print(f"ran {runner.tries} docstring examples of {len(ttftscope.__all__) - 1} public names")
    assert failures == []
    assert without == []


def _doctests(name: str, env: DoctestEnv) -> list[doctest.DocTest]:
    """The docstring tests of a public name and its methods, with the doctest globals."""
    obj = getattr(ttftscope, name)
    home = defining_module(obj)
    assert home is not None, f"ttftscope.{name} does not present itself as ttftscope.{name}"
    module = importlib.import_module(home)
    tests = doctest.DocTestFinder().find(obj, f"ttftscope.{name}", module=module)
    for test in tests:
        test.globs.update(env.globals_for(test.examples))
    return [test for test in tests if test.examples]


def test_public_names_are_not_re_exported_by_subpackages() -> None:
    import ttftscope.client
    import ttftscope.config
    import ttftscope.metrics
    import ttftscope.probe
    import ttftscope.tokenization

    for pkg in (
        ttftscope.client,
        ttftscope.config,
        ttftscope.metrics,
        ttftscope.probe,
        ttftscope.tokenization,
    ):
        exported = [n for n in ttftscope.__all__ if vars(pkg).get(n) is getattr(ttftscope, n)]
        assert exported == [], (pkg.__name__, exported)


def test_error_names_do_not_shadow_httpx() -> None:
    import httpx

    assert not {n for n in ttftscope.__all__ if hasattr(httpx, n) and not n.startswith("_")}


def test_import_is_lazy() -> None:
    heavy = "('tokenizers', 'httpx', 'rich')"
    code = f"import sys, ttftscope; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_subpackage_shadows_a_public_name() -> None:
    # importing ttftscope.X sets the attribute X on the package: a subpackage named like a
    # public function (instrument) would replace it for every later caller
    code = (
        "import pkgutil, importlib, ttftscope\n"
        "for m in pkgutil.iter_modules(ttftscope.__path__):\n"
        "    if m.name != 'cli': importlib.import_module('ttftscope.' + m.name)\n"
        "print(sorted(n for n in ttftscope.__all__ if type(getattr(ttftscope, n)).__name__ "
        "== 'module'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_names_present_themselves_as_ttftscope() -> None:
    shown = {name: getattr(ttftscope, name) for name in ttftscope.__all__ if name != "__version__"}
    assert {n: v.__module__ for n, v in shown.items() if v.__module__ != "ttftscope"} == {}
    assert repr(ttftscope.IncrementalEncoder) == "<class 'ttftscope.IncrementalEncoder'>"


def test_each_public_name_is_its_definition() -> None:
    # defined under its public name, in the module _LAZY names: nothing renames it on import
    for name in ttftscope.__all__:
        if name == "__version__":
            continue
        value = getattr(ttftscope, name)
        home = importlib.import_module(f"ttftscope.{ttftscope._LAZY.get(name, 'errors')}")
        assert (value.__name__, value.__qualname__) == (name, name)
        assert vars(home)[name] is value, (name, home.__name__)


def test_errors_and_records_survive_pickling() -> None:
    error = ttftscope.RateLimited("too many requests", hint="slow down", retry_after="7")
    back = pickle.loads(pickle.dumps(error))
    assert (type(back), str(back), back.hint) == (ttftscope.RateLimited, str(error), "slow down")
    assert back.retry_after == "7"
    record = ttftscope.RequestRecord(run_id="r", index=3, variant="chat", phase="warm", ok=True)
    assert pickle.loads(pickle.dumps(record)) == record
    code = "import pickle, sys; print(repr(pickle.loads(sys.stdin.buffer.read())))"
    out = subprocess.run(
        [sys.executable, "-c", code], input=pickle.dumps(error), capture_output=True, check=True
    )
    assert out.stdout.decode().strip() == repr(error)


@pytest.mark.parametrize(
    "old", ["ProbeRecord", "parse", "delta", "scrape", "ascrape", "breakdown", "summarize"]
)
def test_no_old_name_is_importable(old: str) -> None:
    # one import path per public name: names renamed before the first release are gone
    assert old not in dir(ttftscope)
    with pytest.raises(AttributeError, match=rf"no attribute '{old}'"):
        getattr(ttftscope, old)
