"""uvicorn is pinned to the releases whose private httptools protocol ``bounds`` extends.

``gateway.bounds.BoundedHttpTools`` subclasses ``HttpToolsProtocol`` and reads its internals
(``cycle``, ``scope``, ``url``, ``timeout_keep_alive``, ``STATUS_LINE``); nothing outside
uvicorn promises them. Another uvicorn must fail here, by name, before it fails a request.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from uvicorn.protocols.http import httptools_impl

# the releases bounds.py was read against; widening it means reading httptools_impl again
READ_AGAINST = SpecifierSet(">=0.55,<0.56")
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def _pinned() -> SpecifierSet:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    reqs = [Requirement(r) for r in extras["gateway"]]
    return next(r.specifier for r in reqs if r.name == "uvicorn")


def test_pyproject_pins_uvicorn_to_the_range_bounds_was_read_against() -> None:
    assert _pinned() == READ_AGAINST, (
        f"pyproject.toml's gateway extra pins uvicorn{_pinned()}, but gateway/transport/bounds.py "
        f"was read against uvicorn{READ_AGAINST}: re-read uvicorn's httptools_impl, then move both"
    )


def test_the_installed_uvicorn_is_in_the_pinned_range() -> None:
    installed = Version(importlib.metadata.version("uvicorn"))
    assert installed in READ_AGAINST, (
        f"uvicorn {installed} is installed, but gateway/transport/bounds.py extends the private "
        f"httptools protocol of uvicorn{READ_AGAINST} only: install uvicorn{READ_AGAINST}, "
        "or re-read uvicorn/protocols/http/httptools_impl.py and widen the pin"
    )


def test_the_private_protocol_still_has_what_bounds_overrides() -> None:
    proto = httptools_impl.HttpToolsProtocol
    overridden = (
        "connection_made connection_lost data_received send_400_response on_message_begin "
        "on_url on_header on_headers_complete on_message_complete"
    ).split()
    missing = [name for name in overridden if not callable(getattr(proto, name, None))]
    assert not missing, f"uvicorn's HttpToolsProtocol lost {missing}: bounds.py overrides them"
    init = inspect.getsource(proto.__init__) + inspect.getsource(proto.on_message_begin)
    for attribute in ("self.timeout_keep_alive", "self.app", "self.cycle", "self.url"):
        assert attribute in init, f"uvicorn's HttpToolsProtocol no longer sets {attribute}"
    assert {408, 431} <= set(httptools_impl.STATUS_LINE), "STATUS_LINE lost 408 or 431"
