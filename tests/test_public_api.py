"""The public surface: exactly ``__all__``, one import path per name, each with an example."""

from __future__ import annotations

import inspect
import subprocess
import sys

import ttftscope


def test_all_is_exactly_what_the_package_exports() -> None:
    public = {n for n in dir(ttftscope) if not n.startswith("_")} | {"__version__"}
    assert set(ttftscope.__all__) == public
    assert len(ttftscope.__all__) == len(set(ttftscope.__all__))
    for name in ttftscope.__all__:
        assert getattr(ttftscope, name) is not None


def test_every_public_name_has_a_docstring_example() -> None:
    missing = [
        name
        for name in ttftscope.__all__
        if name != "__version__" and ">>>" not in (inspect.getdoc(getattr(ttftscope, name)) or "")
    ]
    assert missing == []


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
