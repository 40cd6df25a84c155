"""Read each settings layer (files, environment, flags) into entries that know their source.

A file is parsed twice: once by ``tomllib``/``json`` for the values, once by a small
scanner that maps every key path to the line it is written on, because neither
standard parser reports positions of keys.
"""

from __future__ import annotations

import bisect
import difflib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ttftscope.config.schema import ALIASES, ALL_NAMES, SECTIONS, Source, canonical, flag_name
from ttftscope.errors import ConfigError

ENV_PREFIX = "TTFTSCOPE_"
MAX_CONFIG_BYTES = 1 << 20  # settings are short; a larger file is the wrong file
KeyPath = tuple[str, ...]


@dataclass(frozen=True)
class Entry:
    """One value from one layer; ``key`` is canonical, ``written`` is the user's spelling."""

    key: str
    written: str
    value: object
    source: Source


@dataclass(frozen=True)
class ConfigFile:
    path: Path
    shown: str
    data: dict[str, Any]
    lines: dict[KeyPath, int]

    def line(self, keypath: KeyPath) -> int | None:
        """Line of the key, or of its nearest enclosing table (inline tables have no own lines)."""
        for end in range(len(keypath), 0, -1):
            if keypath[:end] in self.lines:
                return self.lines[keypath[:end]]
        return None

    def where(self, keypath: KeyPath) -> str:
        line = self.line(keypath)
        return self.shown if line is None else f"{self.shown}:{line}"


def display_path(path: Path, cwd: Path) -> str:
    """Short form of ``path`` for messages: relative to ``cwd`` when inside it.

    >>> display_path(Path("/a/b/config.toml"), Path("/a"))
    'b/config.toml'
    """
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def read_config_file(path: Path, shown: str) -> ConfigFile:
    """Parse a ``.toml`` or ``.json`` settings file; syntax errors name file, line and column."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{shown}: {path.stat().st_size:,} bytes is too large for a config file "
                f"(at most {MAX_CONFIG_BYTES:,})",
                hint="check that this is the file you meant",
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{shown}: cannot read config file ({exc.__class__.__name__}: {exc})",
            hint="check the path and that the file is readable UTF-8 text",
        ) from None
    if path.suffix.lower() == ".json":
        return ConfigFile(path, shown, _parse_json(text, shown), _json_key_lines(text))
    if path.suffix.lower() == ".toml":
        return ConfigFile(path, shown, _parse_toml(text, shown), _toml_key_lines(text))
    raise ConfigError(
        f"{shown}: unsupported config file type {path.suffix!r}",
        hint="name the file *.toml or *.json",
    )


def _unreadable(shown: str, kind: str, exc: Exception) -> ConfigError:
    # int() refuses 4,300+ digit numbers and the parsers recurse per nesting level
    what = "a number with too many digits" if isinstance(exc, ValueError) else "nesting too deep"
    return ConfigError(
        f"{shown}: cannot be read as {kind}: {what} ({type(exc).__name__})",
        hint="a settings file holds short values; check that this is the file you meant",
    )


def _parse_toml(text: str, shown: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        last = max(1, len(text.splitlines()))
        where = f"{shown}:{m.group(1)}:{m.group(2)}" if m else f"{shown}:{last}"
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        if "end of document" in msg:
            reason += " (the file ended too early)"
        raise ConfigError(
            f"{where}: malformed TOML: {reason}",
            hint="fix the syntax there (strings need quotes, tables look like [api])",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _unreadable(shown, "TOML", exc) from None


def _parse_json(text: str, shown: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{shown}:{exc.lineno}:{exc.colno}: malformed JSON: {exc.msg}",
            hint="fix the syntax there (JSON needs double quotes and no trailing commas)",
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _unreadable(shown, "JSON", exc) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{shown}:1: the top level must be a JSON object",
            hint='write e.g. {"api": {"base_url": "http://127.0.0.1:8000/v1"}}',
        )
    return data


_KEYPART = r"""[A-Za-z0-9_-]+|"(?:[^"\\]|\\.)*"|'[^']*'"""
_DOTTED = rf"(?:{_KEYPART})(?:\s*\.\s*(?:{_KEYPART}))*"
_HEADER = re.compile(rf"^\s*\[\[?\s*({_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_KEYLINE = re.compile(rf"^\s*({_DOTTED})\s*=(.*)$")


def _split_dotted(text: str) -> KeyPath:
    parts: list[str] = []
    for m in re.finditer(_KEYPART, text):
        tok = m.group(0)
        if tok.startswith('"'):
            try:
                tok = str(json.loads(tok))
            except json.JSONDecodeError:
                tok = tok[1:-1]
        elif tok.startswith("'"):
            tok = tok[1:-1]
        parts.append(tok)
    return tuple(parts)


def _toml_key_lines(text: str) -> dict[KeyPath, int]:
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    closing: str | None = None  # delimiter of an open multi-line string
    for number, raw in enumerate(text.splitlines(), start=1):
        if closing is not None:
            if closing in raw:
                closing = None
            continue
        if header := _HEADER.match(raw):
            table = _split_dotted(header.group(1))
            lines.setdefault(table, number)
        elif keyline := _KEYLINE.match(raw):
            full = table + _split_dotted(keyline.group(1))
            for end in range(len(table) + 1, len(full) + 1):
                lines.setdefault(full[:end], number)
            rest = keyline.group(2).strip()
            for delim in ('"""', "'''"):
                if rest.startswith(delim) and delim not in rest[3:]:
                    closing = delim
    return lines


def _json_key_lines(text: str) -> dict[KeyPath, int]:
    """Walk already-valid JSON and note the line of every object key."""
    starts = [i for i, ch in enumerate(text) if ch == "\n"]
    lines: dict[KeyPath, int] = {}
    decoder = json.JSONDecoder()
    ws = re.compile(r"[ \t\n\r]*")

    def skip(i: int) -> int:
        m = ws.match(text, i)
        return m.end() if m else i

    def value(i: int, path: KeyPath) -> int:
        i = skip(i)
        if text[i] in "{[":
            close = "}" if text[i] == "{" else "]"
            i, index = skip(i + 1), 0
            while text[i] != close:
                if close == "}":
                    key, j = decoder.raw_decode(text, i)
                    lines[(*path, key)] = bisect.bisect_left(starts, i) + 1
                    i = value(skip(j) + 1, (*path, key))
                else:
                    i, index = value(i, (*path, str(index))), index + 1
                i = skip(i)
                if text[i] == ",":
                    i = skip(i + 1)
            return i + 1
        return int(decoder.raw_decode(text, i)[1])

    value(0, ())
    return lines


def _did_you_mean(name: str, choices: list[str]) -> str:
    match = difflib.get_close_matches(name, choices, n=1, cutoff=0.6)
    known = "known: " + ", ".join(choices)
    return f"did you mean {match[0]!r}? ({known})" if match else f"remove or rename it ({known})"


def _label(prefix: KeyPath) -> str:
    return f"[{'.'.join(prefix)}]" if prefix else "the top level"


def check_structure(cf: ConfigFile) -> None:
    """Reject unknown sections and keys anywhere in the file, profiles included."""
    _check_scope(cf, cf.data, ())
    profiles = cf.data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise ConfigError(
            f"{cf.where(('profiles',))}: 'profiles' must be a table",
            hint="write each profile as a table, e.g. [profiles.fast]",
        )
    for name, body in profiles.items():
        if not isinstance(body, dict):
            raise ConfigError(
                f"{cf.where(('profiles', name))}: profile {name!r} must be a table",
                hint=f"write it as [profiles.{name}] with sections such as [profiles.{name}.api]",
            )
        _check_scope(cf, body, ("profiles", name))
    for profile in (None, *profiles):
        file_entries(cf, profile)  # rejects both alias forms in one table, in every profile


def _check_scope(cf: ConfigFile, scope: dict[str, Any], prefix: KeyPath) -> None:
    allowed = list(SECTIONS) + ([] if prefix else ["profiles"])
    for section, body in scope.items():
        if section == "profiles" and not prefix:
            continue
        where = cf.where((*prefix, section))
        if section not in SECTIONS:
            hint = _did_you_mean(section, allowed)
            if section in ALL_NAMES:
                part, _, field = section.partition(".")
                hint = f"nest it: put {field!r} inside the {part!r} table"
            raise ConfigError(
                f"{where}: unknown section {section!r} in {_label(prefix)}", hint=hint
            )
        if not isinstance(body, dict):
            raise ConfigError(
                f"{where}: {section!r} must be a table of keys, not {type(body).__name__}",
                hint=f"write it as [{'.'.join((*prefix, section))}] followed by key = value lines",
            )
        fields = list(SECTIONS[section].model_fields)
        fields += [a.split(".")[1] for a in ALIASES if a.startswith(section + ".")]
        for field in body:
            if field not in fields:
                raise ConfigError(
                    f"{cf.where((*prefix, section, field))}: unknown key {field!r} in "
                    f"{_label((*prefix, section))}",
                    hint=_did_you_mean(field, fields),
                )


def profile_names(cf: ConfigFile) -> list[str]:
    """Names of the ``[profiles.NAME]`` tables in a checked file."""
    return list(cf.data.get("profiles", {}))


def file_entries(cf: ConfigFile, profile: str | None) -> list[Entry]:
    """Entries of the top level, or of ``[profiles.<profile>]`` when ``profile`` is given."""
    scope = cf.data if profile is None else cf.data.get("profiles", {}).get(profile, {})
    prefix: KeyPath = () if profile is None else ("profiles", profile)
    tag = "" if profile is None else f" [profiles.{profile}]"
    entries: list[Entry] = []
    for section, body in scope.items():
        if section == "profiles" and profile is None:
            continue
        for field, value in body.items():
            keypath = (*prefix, section, field)
            source = Source("file", cf.where(keypath) + tag, cf.path, cf.line(keypath), profile)
            entries.append(Entry(canonical(f"{section}.{field}"), field, value, source))
    _reject_alias_pairs(entries, f"{cf.shown}{tag}")
    return entries


def _reject_alias_pairs(entries: list[Entry], where: str) -> None:
    seen: dict[str, Entry] = {}
    for entry in entries:
        first = seen.setdefault(entry.key, entry)
        if first is not entry:
            raise ConfigError(
                f"{entry.source}: {entry.key} is given twice in {where}, as "
                f"{first.written!r} ({first.source}) and as {entry.written!r}",
                hint=f"keep only one of them, preferably {entry.key.split('.')[1]!r}",
            )


def env_name(key: str) -> str:
    """The environment variable for a dotted key.

    >>> env_name("api.base_url")
    'TTFTSCOPE_API__BASE_URL'
    """
    return ENV_PREFIX + key.replace(".", "__").upper()


def env_entries(env: Mapping[str, str]) -> tuple[list[Entry], list[str]]:
    """Entries from ``OPENAI_*`` then ``TTFTSCOPE_<SECTION>__<KEY>`` (later ones win)."""
    entries: list[Entry] = []
    warnings: list[str] = []
    for var, key in (("OPENAI_BASE_URL", "api.base_url"), ("OPENAI_API_KEY", "api.api_key")):
        if env.get(var):
            entries.append(Entry(key, var, env[var], Source("env", f"env {var}")))
    ours: list[Entry] = []
    single = {env_name(n).replace("__", "_"): env_name(n) for n in sorted(ALL_NAMES)}
    for var in sorted(env):
        if var in single:
            warnings.append(f"env {var} is ignored: the scheme is {single[var]} (two underscores)")
        if not var.startswith(ENV_PREFIX) or "__" not in var or not env[var]:
            continue
        section, _, field = var[len(ENV_PREFIX) :].partition("__")
        dotted = f"{section.lower()}.{field.lower()}"
        if dotted not in ALL_NAMES:
            names = [env_name(n) for n in sorted(ALL_NAMES)]
            raise ConfigError(
                f"env {var}: unknown setting", hint="unset it, or " + _did_you_mean(var, names)
            )
        ours.append(Entry(canonical(dotted), var, env[var], Source("env", f"env {var}")))
    _reject_alias_pairs(ours, "the environment")
    return entries + ours, warnings


def flag_entries(flags: Mapping[str, object]) -> list[Entry]:
    """Entries from command-line flags given as dotted keys; ``None`` means "not given"."""
    entries: list[Entry] = []
    for name, value in flags.items():
        if value is None:
            continue
        if name not in ALL_NAMES:
            raise ConfigError(
                f"flag key {name!r} is not a setting", hint=_did_you_mean(name, sorted(ALL_NAMES))
            )
        key = canonical(name)
        entries.append(Entry(key, name, value, Source("flag", f"flag {flag_name(key)}")))
    _reject_alias_pairs(entries, "the command-line flags")
    return entries
