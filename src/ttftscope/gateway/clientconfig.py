"""What a user pastes into an agent so it talks to the gateway, filled from the gateway.

Claude Code speaks Anthropic Messages (``ANTHROPIC_BASE_URL`` without ``/v1``: it appends
``/v1/messages``); Codex the Responses API (a ``[model_providers.NAME]`` table with
``wire_api = "responses"``); opencode and the OpenAI SDK chat completions. Keys are never
printed: the snippets name the environment variable that holds one.

>>> print(client_config("openai-sdk", "http://127.0.0.1:8100/v1", ["m"], None))
from openai import OpenAI
<BLANKLINE>
client = OpenAI(base_url="http://127.0.0.1:8100/v1", api_key="unused")
# model="m"
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Literal, get_args

ClientKind = Literal["claude-code", "codex", "opencode", "openai-sdk"]
CLIENT_KINDS: tuple[str, ...] = get_args(ClientKind)
# the variable the snippets read a gateway key from (the user sets it to one of the keys)
KEY_VAR = "TTFTSCOPE_GATEWAY_KEY"
_PROVIDER = "ttftscope"


def client_config(
    kind: ClientKind, base_url: str, models: Sequence[str], keys_env: str | None
) -> str:
    """The snippet for ``kind``; ``keys_env`` names the gateway's inbound-key variable
    (None: the gateway takes no key, and the snippets send a placeholder).

    >>> text = client_config("codex", "http://h:8100/v1", ["m"], "GW_KEYS")
    >>> for line in text.splitlines()[:2]:
    ...     print(line)
    # ~/.codex/config.toml (or $CODEX_HOME/config.toml)
    # export TTFTSCOPE_GATEWAY_KEY=<one of $GW_KEYS>
    """
    model = models[0] if models else "MODEL"
    builders = {
        "claude-code": _claude_code,
        "codex": _codex,
        "opencode": _opencode,
        "openai-sdk": _openai_sdk,
    }
    return builders[kind](base_url.rstrip("/"), model, list(models) or [model], keys_env)


def _key_note(keys_env: str | None) -> str:
    if keys_env is None:
        return "the gateway takes no key"
    if keys_env == KEY_VAR:  # the gateway's own variable is not known here: the user's is
        return f"the key is read from ${KEY_VAR}"
    return f"export {KEY_VAR}=<one of ${keys_env}>"


def split_notes(snippet: str) -> tuple[list[str], str]:
    """A snippet's ``//`` comment lines apart from the rest: JSON has no comments, so the
    notes go to the terminal and the JSON itself stays valid when redirected to a file.

    >>> split_notes("// a note\\n{}")
    (['// a note'], '{}')
    >>> split_notes("# toml keeps its comments\\nx = 1")
    ([], '# toml keeps its comments\\nx = 1')
    """
    lines = snippet.splitlines()
    notes = [line for line in lines if line.startswith("//")]
    return notes, "\n".join(line for line in lines if not line.startswith("//"))


def client_key(environ: Mapping[str, str], keys_env: str | None) -> str | None:
    """The gateway key the user has: ``$TTFTSCOPE_GATEWAY_KEY`` (what the snippets read),
    else the first of the gateway's own ``keys_env`` variable; None without either.

    >>> client_key({"TTFTSCOPE_GATEWAY_KEY": " k1 "}, None)
    'k1'
    >>> client_key({"GW_KEYS": "a, b"}, "GW_KEYS"), client_key({}, "GW_KEYS")
    ('a', None)
    """
    own = environ.get(KEY_VAR, "").strip()
    if own:
        return own
    keys = [k.strip() for k in environ.get(keys_env or "", "").split(",") if k.strip()]
    return keys[0] if keys else None


def _claude_code(base: str, model: str, models: list[str], keys_env: str | None) -> str:
    env = {
        "ANTHROPIC_BASE_URL": base.removesuffix("/v1"),
        # Claude Code sends ANTHROPIC_API_KEY as x-api-key, which the gateway accepts
        "ANTHROPIC_API_KEY": "<your gateway key>" if keys_env else "unused",
        "ANTHROPIC_MODEL": model,
        "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
        "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "CLAUDE_CODE_SUBAGENT_MODEL": model,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    }
    head = f"// ~/.claude/settings.json (or .claude/settings.json)\n// {_key_note(keys_env)}"
    return head + "\n" + json.dumps({"env": env}, indent=2)


def _codex(base: str, model: str, models: list[str], keys_env: str | None) -> str:
    lines = [
        "# ~/.codex/config.toml (or $CODEX_HOME/config.toml)",
        f"# {_key_note(keys_env)}",
        f"model = {json.dumps(model)}",
        f'model_provider = "{_PROVIDER}"',
        "",
        f"[model_providers.{_PROVIDER}]",
        'name = "ttftscope gateway"',
        f"base_url = {json.dumps(base)}",
        'wire_api = "responses"',
    ]
    if keys_env is not None:
        lines.append(f'env_key = "{KEY_VAR}"')
    return "\n".join(lines)


def _opencode(base: str, model: str, models: list[str], keys_env: str | None) -> str:
    options = {"baseURL": base}
    if keys_env is not None:
        options["apiKey"] = "{env:" + KEY_VAR + "}"
    provider = {
        "npm": "@ai-sdk/openai-compatible",
        "name": "ttftscope gateway",
        "options": options,
        "models": {m: {"name": m} for m in models},
    }
    config = {"$schema": "https://opencode.ai/config.json", "provider": {_PROVIDER: provider}}
    head = f"// opencode.json or ~/.config/opencode/opencode.json\n// {_key_note(keys_env)}"
    return head + "\n" + json.dumps(config, indent=2)


def _openai_sdk(base: str, model: str, models: list[str], keys_env: str | None) -> str:
    key = f'os.environ["{KEY_VAR}"]' if keys_env is not None else '"unused"'
    lines = ["import os", ""] if keys_env is not None else []
    lines += [
        "from openai import OpenAI",
        "",
        f"client = OpenAI(base_url={json.dumps(base)}, api_key={key})",
        f"# model={json.dumps(model)}",
    ]
    if keys_env is not None:
        lines.insert(0, f"# {_key_note(keys_env)}")
    return "\n".join(lines)
