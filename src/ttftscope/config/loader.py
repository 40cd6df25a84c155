"""Layered settings: every effective value knows where it came from.

Layers, lowest to highest precedence::

    defaults < settings.json < config.toml < [profiles.NAME] < environment < command-line flags

Files. ``--config PATH`` (``config_path``) reads exactly that file, TOML or JSON by suffix; a
missing explicit file is an error. Without it, these are read when present, lowest first:
``$XDG_CONFIG_HOME/ttftscope/`` (or ``~/.config/ttftscope/``) ``settings.json`` then
``config.toml``, then ``./settings.json`` then ``./config.toml``. So the current directory
overrides the user directory, and TOML overrides JSON in the same directory. Both formats
have the same schema: sections ``api``, ``model``, ``debug``, ``observability``,
``tokenizer`` and optional ``profiles.NAME`` tables holding the same sections.

Profiles. ``profile=`` (``--profile``) or ``TTFTSCOPE_PROFILE`` selects a profile; its values
override the top level of every file (but not env or flags). An unknown profile is an error.

Environment. One scheme: ``TTFTSCOPE_<SECTION>__<KEY>`` with two underscores, e.g.
``TTFTSCOPE_API__BASE_URL``, ``TTFTSCOPE_API__TIMEOUT_SECONDS``, ``TTFTSCOPE_MODEL__DEFAULT``
(aliases work too: ``TTFTSCOPE_API__TIMEOUT``, ``TTFTSCOPE_MODEL__NAME``). The OpenAI
ecosystem's ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL`` are honoured, and ``TTFTSCOPE_`` variables
win over them. Empty variables count as unset. An unknown ``TTFTSCOPE_X__Y`` is an error.

Flags. ``flags`` maps dotted keys to values (``{"api.base_url": "http://h:8000/v1"}``);
``None`` means the flag was not given. Sources show the flag name from ``FLAG_NAMES``.

Aliases: ``api.timeout`` = ``api.timeout_seconds``, ``model.name`` = ``model.default``; giving
both forms in one table (or one layer) is an error. ``api.metrics_url`` defaults to the
base URL with a trailing ``/v1`` replaced by ``/metrics``. A relative ``tokenizer.path`` in a
file is relative to that file's directory; from env or flags, to ``cwd``.

Secrets: ``api.api_key`` is a ``SecretStr``; show it only through :func:`redact`, and pass
any text that might contain it through :func:`redact_text`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, ValidationError

from ttftscope.config.git import git_warnings
from ttftscope.config.redact import redact, redact_url
from ttftscope.config.schema import (
    EXPECTED,
    KEYS,
    SECRET_KEYS,
    SECTIONS,
    URL_KEYS,
    Settings,
    Source,
)
from ttftscope.config.sources import (
    ConfigFile,
    Entry,
    check_structure,
    display_path,
    env_entries,
    file_entries,
    flag_entries,
    profile_names,
    read_config_file,
)
from ttftscope.errors import ConfigError

__all__ = ["LoadedSettings", "Override", "load_settings"]

_NAMES = ("settings.json", "config.toml")  # lowest first, in each folder
_DEFAULT = Source("default", "default")
_DERIVED = Source("default", "default (derived from api.base_url)")


@dataclass(frozen=True)
class Override:
    """A value one layer set and a higher layer replaced; values shown as ``config show``.

    >>> o = Override("model.default", "a", Source("file", "config.toml:2"), "b",
    ...              Source("env", "env TTFTSCOPE_MODEL__DEFAULT"))
    >>> o.differs
    True
    """

    key: str
    shown: str
    source: Source
    winner_shown: str
    winner: Source

    @property
    def differs(self) -> bool:
        """Whether the replacing value is another value (not the same one repeated)."""
        return self.shown != self.winner_shown


@dataclass
class LoadedSettings:
    """Effective settings plus the source of every value, warnings and the files read.

    >>> loaded = load_settings(env={"TTFTSCOPE_MODEL__DEFAULT": "m"}, cwd=Path("/nonexistent"))
    >>> loaded.value("model.default"), str(loaded.sources["model.default"])
    ('m', 'env TTFTSCOPE_MODEL__DEFAULT')
    """

    settings: Settings
    sources: dict[str, Source]
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    profile: str | None = None
    # every value a higher layer replaced, lowest first: what `doctor` calls shadowed
    overridden: list[Override] = field(default_factory=list)
    # where config files were looked for (not only where they were found)
    searched: list[Path] = field(default_factory=list)

    def value(self, key: str) -> Any:
        """The effective value of a dotted key, e.g. ``loaded.value("api.base_url")``."""
        section, name = key.split(".")
        return getattr(getattr(self.settings, section), name)

    def table(self) -> list[tuple[str, str, str]]:
        """Rows ``(dotted key, display value, source)``; secrets are redacted.

        >>> LoadedSettings(Settings(), {}).table()[1]
        ('api.api_key', '(not set)', 'default')
        """
        return [
            (key, _display(key, self.value(key)), str(self.sources.get(key, _DEFAULT)))
            for key in KEYS
        ]

    def rows(self) -> list[dict[str, Any]]:
        """JSON-ready rows ``{"key", "value", "source"}``; secrets are redacted strings."""
        out: list[dict[str, Any]] = []
        for key in KEYS:
            value = self.value(key)
            if key in SECRET_KEYS:
                value = None if value is None else redact(value.get_secret_value())
            elif isinstance(value, Path):
                value = str(value)
            elif isinstance(value, dict):
                value = _plain(value)
            out.append({"key": key, "value": value, "source": str(self.sources.get(key, _DEFAULT))})
        return out

    def secrets(self) -> list[str]:
        """Secret values to hand to :func:`redact_text`."""
        key = self.settings.api.api_key
        return [] if key is None else [key.get_secret_value()]


def _display(key: str, value: Any) -> str:
    if key in SECRET_KEYS:
        return redact(None if value is None else value.get_secret_value())
    if value is None:
        return "(not set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return json.dumps(_plain(value)) if value else "(none)"
    return str(value)


def _plain(value: Any) -> Any:
    """JSON-ready form of a value holding nested settings (the gateway's upstreams)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_defaults=True)
    return value


def load_settings(
    *,
    config_path: Path | None = None,
    profile: str | None = None,
    env: Mapping[str, str] | None = None,
    flags: Mapping[str, object] | None = None,
    cwd: Path | None = None,
    discovered: Mapping[str, object] | None = None,
    discovered_from: str = "discovered",
) -> LoadedSettings:
    """Load defaults, files, profile, environment and flags (see the module docstring).

    ``discovered`` holds dotted keys found by looking around (a running local server), just
    above the defaults: anything configured wins over them. ``discovered_from`` is shown as
    their source.

    >>> load_settings(env={}, cwd=Path("/nonexistent")).sources["api.base_url"].kind
    'default'
    >>> local = {"api.base_url": "http://127.0.0.1:8000/v1"}
    >>> str(load_settings(env={}, cwd=Path("/nonexistent"), discovered=local,
    ...                   discovered_from="local server").sources["api.base_url"])
    'local server'
    """
    env = dict(os.environ) if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    files = [read_config_file(p, display_path(p, cwd)) for p in _find_files(config_path, env, cwd)]
    for cf in files:
        check_structure(cf)
    profile = _choose_profile(files, profile, env)
    env_layer, warnings = env_entries(env)
    found = Source("local", discovered_from)
    entries = [Entry(k, k, v, found) for k, v in (discovered or {}).items()]
    entries += [e for cf in files for e in file_entries(cf, None)]
    if profile is not None:
        entries += [e for cf in files for e in file_entries(cf, profile)]
    entries += env_layer + flag_entries(flags or {})
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    overridden: list[Override] = []
    for entry in entries:
        value = _validate(entry, cwd)
        if entry.key in sources and sources[entry.key].kind != "local":
            overridden.append(
                Override(
                    entry.key,
                    _display(entry.key, values[entry.key]),
                    sources[entry.key],
                    _display(entry.key, value),
                    entry.source,
                )
            )
        values[entry.key] = value
        sources[entry.key] = entry.source
    sources = {key: sources.get(key, _DEFAULT) for key in KEYS}
    if "api.metrics_url" not in values:
        sources["api.metrics_url"] = _DERIVED
    nested: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        section, name = key.split(".")
        nested.setdefault(section, {})[name] = value
    warnings += git_warnings(files)
    return LoadedSettings(
        Settings.model_validate(nested),
        sources,
        warnings,
        [cf.path for cf in files],
        profile,
        overridden,
        _searched(config_path, env, cwd),
    )


def _searched(config_path: Path | None, env: Mapping[str, str], cwd: Path) -> list[Path]:
    if config_path is not None:
        return [config_path if config_path.is_absolute() else cwd / config_path]
    return [folder / name for folder in (_user_dir(env), cwd) for name in _NAMES]


def _user_dir(env: Mapping[str, str]) -> Path:
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "ttftscope"
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return home / ".config" / "ttftscope"


def _find_files(config_path: Path | None, env: Mapping[str, str], cwd: Path) -> list[Path]:
    if config_path is not None:
        path = config_path if config_path.is_absolute() else cwd / config_path
        if not path.is_file():
            raise ConfigError(
                f"config file {display_path(path, cwd)} does not exist",
                hint="check the --config path, or leave --config out to use ./config.toml, "
                "./settings.json or ~/.config/ttftscope/",
            )
        return [path]
    found: list[Path] = []
    for folder in (_user_dir(env), cwd):
        for name in _NAMES:
            path = folder / name
            if path.is_file() and all(path.resolve() != p.resolve() for p in found):
                found.append(path)
    return found


def _choose_profile(
    files: list[ConfigFile], profile: str | None, env: Mapping[str, str]
) -> str | None:
    origin = "--profile"
    if not profile:
        profile, origin = env.get("TTFTSCOPE_PROFILE") or None, "env TTFTSCOPE_PROFILE"
    if profile is None:
        return None
    known = list(dict.fromkeys(n for cf in files for n in profile_names(cf)))
    if profile in known:
        return profile
    read = ", ".join(cf.shown for cf in files) or "no config file found"
    hint = (
        f"defined profiles: {', '.join(known)}"
        if known
        else "no profiles are defined; add a [profiles.NAME] table to config.toml"
    )
    raise ConfigError(f"profile {profile!r} (from {origin}) is not defined in: {read}", hint=hint)


def _is_path(section: str, name: str) -> bool:
    """Whether a field holds a path (TOML and JSON write paths as strings)."""
    annotation = SECTIONS[section].model_fields[name].annotation
    return annotation is Path or Path in get_args(annotation)


def _validate(entry: Entry, cwd: Path) -> Any:
    section, name = entry.key.split(".")
    raw = entry.value
    # Files carry typed values: `timeout = true` or `log_request_timing = "yes"` is a mistake
    # there, so they validate strictly; environment and flags are text and coerce.
    strict = entry.source.kind == "file" and not isinstance(raw, dict)  # tables: paths are str
    if strict and isinstance(raw, str) and _is_path(section, name):
        raw = Path(raw)
    try:
        value = getattr(SECTIONS[section].model_validate({name: raw}, strict=strict), name)
    except ValidationError as exc:
        raise _invalid(entry, exc) from None
    if isinstance(value, Path):
        try:
            value = value.expanduser()
        except RuntimeError:  # "~someone" naming no user of this machine
            raise ConfigError(
                f"{entry.source}: {entry.key} = {str(value)!r} starts with a ~user that does "
                "not exist on this machine",
                hint="write the path out, or use ~/ for your own home folder",
            ) from None
        if not value.is_absolute():
            base = entry.source.path.parent if entry.source.path else cwd
            value = base / value
    return value


def _invalid(entry: Entry, exc: ValidationError) -> ConfigError:
    err = exc.errors()[0]
    if len(err["loc"]) > 1:  # inside a table of tables: name the inner key, not the whole
        inner = ".".join(str(part) for part in err["loc"][1:])
        reason = str(err.get("ctx", {}).get("error", err["msg"]))
        return ConfigError(
            f"{entry.source}: {entry.key}.{inner}: {reason}",
            hint=f"expected {EXPECTED[entry.key]}",
        )
    if entry.key in SECRET_KEYS:
        shown = f"a {type(entry.value).__name__} (hidden)"
    elif entry.key in URL_KEYS and isinstance(entry.value, str):
        shown = json.dumps(redact_url(entry.value))  # user info or a query may hold a key
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
    else:
        shown = json.dumps(entry.value, default=str)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
    fix = {"file": "fix the value in the file", "env": "fix or unset the variable"}.get(
        entry.source.kind, "fix the flag value"
    )
    if err["type"] == "value_error":
        reason = str(err.get("ctx", {}).get("error", err["msg"]))
        if entry.key == "api.base_url":
            fix = 'give the API base only, like "http://host:8000/v1"'
        return ConfigError(f"{entry.source}: {entry.key} = {shown} {reason}", hint=fix)
    return ConfigError(
        f"{entry.source}: {entry.key} = {shown} has the wrong type or range: "
        f"expected {EXPECTED[entry.key]}",
        hint=fix,
    )
