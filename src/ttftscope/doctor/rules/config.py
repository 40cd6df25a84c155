"""Finding: configuration that did not apply.

A file in the wrong place or under the wrong name (listed with where files are looked for), a
value a higher layer replaced (environment, flag), one key set in two files, a model the
server does not serve or a ``/metrics`` that belongs to another server, and timing flags on
with no records written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ttftscope.config.loader import LoadedSettings, Override
from ttftscope.findings import Evidence, Finding

__all__ = ["ConfigContext", "config_findings", "near_misses"]

# names people give the file that the loader does not read
_NEAR_NAMES = (
    "config.yaml",
    "config.yml",
    "config.json",
    "settings.toml",
    "settings.yaml",
    "ttftscope.toml",
    ".ttftscope.toml",
    "ttftscope.json",
    "Config.toml",
    "config.toml.txt",
    "config.TOML",
)
_SECTIONS = ("[api]", "[model]", "[gateway", "[observability]", '"api"', '"model"')


@dataclass(frozen=True)
class ConfigContext:
    """What the configuration rules look at besides the loaded settings."""

    loaded: LoadedSettings
    cwd: Path
    served_models: tuple[str, ...] | None = None  # /v1/models of api.base_url, if reached
    metrics_models: tuple[str, ...] | None = None  # model_name labels at api.metrics_url


def _looks_like_ours(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")[:20_000]
    except OSError:
        return False
    return any(s in text for s in _SECTIONS)


def near_misses(ctx: ConfigContext) -> list[Path]:
    """Files that look like ttftscope configuration but are not where or named as read.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); _ = (d / "config.yaml").write_text("[api]")
    >>> from ttftscope.config.loader import load_settings
    >>> ctx = ConfigContext(load_settings(env={"HOME": str(d)}, cwd=d), d)
    >>> [p.name for p in near_misses(ctx)]
    ['config.yaml']
    """
    folders = list(dict.fromkeys(p.parent for p in ctx.loaded.searched))
    found = [f / n for f in folders for n in _NEAR_NAMES if (f / n).is_file()]
    # a config.toml one or two folders up: run from a subdirectory of the project
    for parent in list(ctx.cwd.parents)[:2]:
        if parent in folders or parent == Path.home():
            continue
        found += [parent / n for n in ("config.toml", "settings.json") if (parent / n).is_file()]
    return [p for p in found if _looks_like_ours(p)]


def _misplaced(ctx: ConfigContext) -> list[Finding]:
    missed = near_misses(ctx)
    if not missed:
        return []
    looked = ", ".join(str(p) for p in ctx.loaded.searched)
    return [
        Finding(
            id="config-not-applied",
            severity="warning",
            title=f"{missed[0]} looks like configuration but is never read",
            evidence=[Evidence(fact=f"found {p}", source="file system") for p in missed]
            + [Evidence(fact=f"files are read only from: {looked}", source="config loader")],
            remedy="rename or move it to ./config.toml (or ~/.config/ttftscope/config.toml), "
            "or pass --config PATH; check with `ttftscope config show`",
        )
    ]


def _shadow_fact(o: Override) -> str:
    return f"{o.key} = {o.shown} ({o.source}) is replaced by {o.winner_shown} ({o.winner})"


def _shadowed(loaded: LoadedSettings) -> list[Finding]:
    out: list[Finding] = []
    by_layer = [o for o in loaded.overridden if o.differs and o.source.kind == "file"]
    shadowed = [o for o in by_layer if o.winner.kind in ("env", "flag")]
    twice = [o for o in by_layer if o.winner.kind == "file" and o.winner.path != o.source.path]
    if shadowed:
        out.append(
            Finding(
                id="config-not-applied",
                severity="warning",
                title=f"{len(shadowed)} value(s) in a config file are overridden",
                evidence=[Evidence(fact=_shadow_fact(o), source="config layers") for o in shadowed],
                remedy="unset the environment variable or drop the flag if the file is meant "
                "to win; `ttftscope config show` lists every value's source",
            )
        )
    if twice:
        out.append(
            Finding(
                id="config-not-applied",
                severity="warning",
                title="the same key is set in two config files with different values",
                evidence=[Evidence(fact=_shadow_fact(o), source="config files") for o in twice],
                remedy="keep each key in one file (the later file wins: cwd over user dir, "
                "config.toml over settings.json)",
            )
        )
    return out


def _model_mismatch(ctx: ConfigContext) -> list[Finding]:
    s = ctx.loaded.settings
    model = s.model.default
    facts: list[str] = []
    if model and ctx.served_models is not None and model not in ctx.served_models:
        facts.append(
            f"model.default = {model!r} ({ctx.loaded.sources['model.default']}), but "
            f"{s.api.base_url}/models serves: {', '.join(ctx.served_models) or 'nothing'}"
        )
    served = set(ctx.served_models or ())
    metered = set(ctx.metrics_models or ())
    if served and metered and not served & metered:
        facts.append(
            f"{s.api.metrics_url} reports model(s) {', '.join(sorted(metered))}, the API "
            f"serves {', '.join(sorted(served))}: the metrics belong to another server"
        )
    if not facts:
        return []
    return [
        Finding(
            id="config-not-applied",
            severity="warning",
            title="the configured model or metrics URL does not match the server",
            evidence=[Evidence(fact=f, source="live: /v1/models and /metrics") for f in facts],
            remedy="set model.default (or --model) to a served name, and api.metrics_url "
            "(--metrics-url) to this server's /metrics",
        )
    ]


def _records_missing(loaded: LoadedSettings) -> list[Finding]:
    obs = loaded.settings.observability
    on = obs.record_ttft or obs.record_queue_ms or obs.record_tokenize_ms
    folder = obs.records_dir
    if not on or folder is None:
        return []
    if folder.is_dir() and any(f.stat().st_size > 0 for f in folder.glob("instrument*.jsonl")):
        return []
    return [
        Finding(
            id="config-not-applied",
            severity="warning",
            title="timing is switched on but no records were written",
            evidence=[
                Evidence(
                    fact=f"observability.records_dir = {folder} holds no instrument records",
                    source=str(loaded.sources["observability.records_dir"]),
                )
            ],
            remedy="wrap the client: `client = ttftscope.instrument(OpenAI(...))` in the "
            "process that makes the calls, run from the folder the setting is relative to",
        )
    ]


def config_findings(ctx: ConfigContext) -> list[Finding]:
    """Every configuration finding, in the order a reader fixes them."""
    return [
        *_misplaced(ctx),
        *_shadowed(ctx.loaded),
        *_model_mismatch(ctx),
        *_records_missing(ctx.loaded),
    ]
