"""Optional extras: the core imports none of their modules, and a command that needs a
missing one says which extra to install (exit 18) instead of raising an ImportError.

An install without an extra is simulated in a fresh interpreter by ``sys.modules[name] =
None`` for the extra's modules: ``import name`` then fails and ``find_spec`` finds nothing,
as when the package is absent.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ttftscope.cli.extras import EXTRAS, Extra, require_extra
from ttftscope.errors import MissingExtra

ROOT = Path(__file__).parents[2]
EXTRA_MODULES = sorted({m for modules in EXTRAS.values() for m in modules})


def _python(code: str, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter in ``cwd``, with no user configuration."""
    home = {"HOME": str(cwd), "XDG_CONFIG_HOME": str(cwd / "xdg")}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env={**os.environ, **home},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _cli_without(
    modules: list[str], args: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """Run the CLI in a fresh interpreter where ``modules`` cannot be imported."""
    code = (
        "import sys\n"
        f"sys.modules.update(dict.fromkeys({modules!r}))\n"
        "from ttftscope.cli import main\n"
        f"main({args!r})\n"
    )
    return _python(code, cwd=cwd)


# distributions whose import name is not their project name
_IMPORT_NAMES = {
    "opentelemetry_sdk": "opentelemetry.sdk",
    "opentelemetry_exporter_otlp_proto_http": "opentelemetry.exporter.otlp.proto.http",
    "opentelemetry_proto": "opentelemetry.proto",
    "protobuf": "google.protobuf",
}


def _requirement_name(req: str) -> str:
    name = re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0].lower().replace("-", "_")
    return _IMPORT_NAMES.get(name, name)


def test_the_extras_match_pyproject() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    declared = {name: sorted(map(_requirement_name, extras[name])) for name in EXTRAS}
    assert declared == {name: sorted(modules) for name, modules in EXTRAS.items()}
    assert extras["all"] == [f"ttftscope[{','.join(sorted(EXTRAS))}]"]
    core = set(map(_requirement_name, project["dependencies"]))
    assert core.isdisjoint(EXTRA_MODULES)


@pytest.mark.parametrize(
    "imports",
    [
        "import ttftscope",
        "from ttftscope import instrument, Instrumentation",
        "import ttftscope.cli",
    ],
)
def test_the_core_imports_no_module_of_an_extra(imports: str, tmp_path: Path) -> None:
    code = f"import json, sys\n{imports}\nprint(json.dumps(sorted(sys.modules)))"
    proc = _python(code, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    loaded = {name.partition(".")[0] for name in json.loads(proc.stdout)}
    assert "ttftscope" in loaded
    assert loaded.isdisjoint(EXTRA_MODULES), sorted(loaded & set(EXTRA_MODULES))


def test_help_and_core_commands_work_without_any_extra(tmp_path: Path) -> None:
    helped = _cli_without(EXTRA_MODULES, ["--help"], tmp_path)
    assert helped.returncode == 0, helped.stderr
    assert "bench" in helped.stdout and "gateway" in helped.stdout
    for command in (["bench", "--help"], ["gateway", "--help"], ["config", "show"]):
        proc = _cli_without(EXTRA_MODULES, command, tmp_path)
        assert proc.returncode == 0, (command, proc.stderr)


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["bench"], "bench"),
        (["gateway", "--upstream", "http://127.0.0.1:9/v1", "--model-dir", "."], "gateway"),
        (["report", "no-such-dir"], "report"),
    ],
)
def test_a_command_without_its_extra_names_it(
    args: list[str], extra: Extra, tmp_path: Path
) -> None:
    proc = _cli_without(list(EXTRAS[extra]), args, tmp_path)
    assert proc.returncode == MissingExtra.exit_code == 18, proc.stderr
    assert f"pip install 'ttftscope[{extra}]'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_require_extra_names_only_the_missing_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httptools", None)
    with pytest.raises(MissingExtra) as info:
        require_extra("gateway")
    assert info.value.extra == "gateway" and info.value.missing == ("httptools",)
    require_extra("bench")  # everything here is installed
