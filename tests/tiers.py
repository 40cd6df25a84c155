"""Which tier each test file belongs to, by folder or by name (applied in ``tests/conftest.py``).

Tiers, as markers (``--strict-markers``: a marker not in ``pyproject.toml`` is an error):

- ``e2e``: ``tests/e2e/``, against the real local vLLM; ``oracle``: ``tests/oracle/``, against
  each vLLM release's render server. Both need ``scripts/test.sh``'s installs.
- ``slow``: benchmarks run as scripts and the sweeps that start the CLI as a subprocess per
  command or per case; left out of a bare ``pytest`` (the unit tier), run by ``scripts/test.sh``.
- ``smoke``: a handful of fast files per area, the sub-minute loop (``pytest -m smoke``).

A bare ``pytest`` runs everything else: the unit tier (``-m 'not e2e and not oracle and not
slow'`` in ``pyproject.toml``); ``scripts/test.sh`` passes ``-m ""`` and runs every tier.

>>> marks_for("tests/e2e/test_gateway.py"), marks_for("tests/test_benchmarks.py")
(['e2e'], ['slow'])
>>> marks_for("tests/gateway/test_doors.py"), marks_for("tests/gateway/test_no_500.py")
(['smoke'], [])
"""

from __future__ import annotations

FOLDERS: dict[str, str] = {"tests/e2e/": "e2e", "tests/oracle/": "oracle"}

SLOW: frozenset[str] = frozenset(
    {
        "tests/test_benchmarks.py",  # each benchmark script run end to end
        "tests/test_secret_leaks.py",  # every command, every way to give a key, as a subprocess
        "tests/cli/test_eighty_columns.py",  # report, doctor, config show in an 80-column pty
        "tests/cli/test_first_hour.py",  # a new user's first commands, as subprocesses
        "tests/cli/test_extras.py",  # each command in an interpreter without the extras
        "tests/cli/test_main.py",  # exit codes through the real entry point
    }
)

_SMOKE_BY_AREA: dict[str, tuple[str, ...]] = {
    "": (
        "test_decompose",
        "test_stats",
        "test_records",
        "test_records_compat",
        "test_agenttext",
        "test_public_api",
        "test_readme_zh",
    ),
    "config": ("test_checks", "test_errors", "test_loader", "test_redact"),
    "client": ("test_events", "test_classify", "test_agent_events", "test_http_json"),
    "metrics": ("test_metrics_hostile", "test_metrics_engines", "test_metrics_prom"),
    "tokenization": ("test_tiktoken_convert", "test_shadow", "test_read_horizon"),
    "probe": ("test_summary", "test_trace_headers"),
    "bench": ("test_options",),
    "bench/output": ("test_bench_summary", "test_table"),
    "bench/plan": ("test_bodies", "test_preparation"),
    "bench/send": ("test_pacing",),
    "doctor": ("test_abtest", "test_diagnose"),
    "doctor/rules": ("test_livequeue", "test_path", "test_server", "test_tokenize"),
    "report": ("test_compare", "test_terminal", "test_timeline", "test_waterfall"),
    "results": ("test_files", "test_parts", "test_runs"),
    "gateway": ("test_doors",),
    "gateway/apis/chat": ("test_translate",),
    "gateway/pipeline": ("test_profiles", "test_vllm_chat", "test_sessions_eviction"),
    "gateway/runtime": ("test_workpool", "test_host_restore"),
    "gateway/transport": ("test_idsbody", "test_hop", "test_uvicorn_pin"),
    "localserver": ("test_install",),
    "tracing": ("test_join", "test_store", "test_vllmspan", "test_context"),
    "sdkinstrument": ("test_trace_headers",),
    "cli": ("test_progress", "test_bench_progress", "test_client_config", "test_config_show"),
}

SMOKE: frozenset[str] = frozenset(
    f"tests/{area + '/' if area else ''}{name}.py"
    for area, names in _SMOKE_BY_AREA.items()
    for name in names
)


def marks_for(path: str) -> list[str]:
    """The tier markers of the test file at ``path`` (relative to the repository root)."""
    marks = [mark for folder, mark in FOLDERS.items() if path.startswith(folder)]
    if path in SLOW:
        marks.append("slow")
    if path in SMOKE:
        marks.append("smoke")
    return marks
