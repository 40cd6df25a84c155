"""``ttftscope gateway``: one address for every agent API that sends vLLM token ids;
``ttftscope gateway client-config KIND``: what to paste into an agent to use it."""

from __future__ import annotations

import errno
import json
import os
import socket
from pathlib import Path
from typing import cast

import click
import httpx

from ttftscope.cli.extras import require_extra
from ttftscope.cli.options import CliState, cli_state, config_options
from ttftscope.config.redact import redact_url
from ttftscope.config.schema import GatewaySettings, UpstreamSettings
from ttftscope.errors import ConfigError, TokenizerError
from ttftscope.gateway.clientconfig import (
    CLIENT_KINDS,
    KEY_VAR,
    ClientKind,
    client_config,
    client_key,
    split_notes,
)
from ttftscope.localserver import process
from ttftscope.localserver.model import model_dir as local_model_dir
from ttftscope.tracing.emit import open_emitter, traces_endpoint

__all__ = ["gateway"]


def _one_upstream(url: str, folder: Path | None, mode: str) -> dict[str, UpstreamSettings]:
    try:
        one = UpstreamSettings.model_validate({"base_url": url, "model_dir": folder, "mode": mode})
    except ValueError as exc:
        reason = str(exc).splitlines()[-1] if str(exc) else type(exc).__name__
        raise ConfigError(
            f"--upstream: {reason}", hint="give the API base, like http://127.0.0.1:8000/v1"
        ) from None
    return {"default": one}


def gateway_settings(
    state: CliState, upstream: str | None, folder: Path | None, mode: str | None
) -> GatewaySettings:
    """The configured gateway, with the one-upstream flags (or the local server) applied."""
    gw = state.load().settings.gateway
    if upstream is not None:
        return gw.model_copy(update={"upstreams": _one_upstream(upstream, folder, mode or "ids")})
    if gw.upstreams:
        return gw
    local = process.status()
    if local is None:
        raise ConfigError(
            "the gateway has no upstream: none is configured and no local server runs",
            hint="pass --upstream http://host:8000/v1 --model-dir DIR, add "
            "[gateway.upstreams.NAME] tables to config.toml, or `ttftscope local-server start`",
        )
    return gw.model_copy(
        update={
            "upstreams": _one_upstream(local.base_url, folder or local_model_dir(), mode or "ids")
        }
    )


@click.group(invoke_without_command=True)
@config_options
@click.option("--upstream", help="One upstream's base URL, e.g. http://127.0.0.1:8000/v1")
@click.option(
    "--model-dir",
    type=click.Path(path_type=Path),
    help="The served model's folder (tokenizer + chat template), for --upstream",
)
@click.option("--mode", type=click.Choice(["ids", "text"]), help="ids (default) or text")
@click.option("--host", help="Address to listen on (default 127.0.0.1)")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default 8100)")
@click.pass_context
def gateway(
    ctx: click.Context,
    upstream: str | None,
    model_dir: Path | None,
    mode: str | None,
    host: str | None,
    port: int | None,
) -> None:
    """Serve chat, completions, Anthropic Messages and Responses in, token ids to vLLM:
    no re-tokenizing of the long context per turn.

    With nothing configured it fronts the running local server.
    """
    if ctx.invoked_subcommand is not None:
        return
    require_extra("gateway")
    from ttftscope.gateway.serve import serve

    state = cli_state(ctx)
    settings = gateway_settings(state, upstream, model_dir, mode)
    update = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = settings.model_copy(update=update)
    preflight(settings)
    otlp = state.load().settings.observability.otlp_endpoint
    emitter = open_emitter(otlp, command="gateway")
    names = ", ".join(f"{n} ({u.mode}: {u.base_url})" for n, u in settings.upstreams.items())
    state.err.print(
        f"gateway on http://{settings.host}:{settings.port}/v1 -> {names}; Ctrl-C stops it",
        highlight=False,
    )
    if emitter is not None:
        where = traces_endpoint(otlp, os.environ) or "(exporter)"
        state.err.print(f"traces to {redact_url(where)}", highlight=False)
    serve(settings, emitter)


def preflight(settings: GatewaySettings) -> None:
    """What would stop the gateway, found before it says it is up: an ids upstream without
    a model folder (:class:`TokenizerError`), inbound keys that resolve to none or a taken
    port (:class:`ConfigError`).

    >>> up = UpstreamSettings(base_url="http://127.0.0.1:8000/v1", model_dir="/no/such/dir")
    >>> try:
    ...     preflight(GatewaySettings(upstreams={"coder": up}))
    ... except TokenizerError as exc:
    ...     print(exc.message)
    upstream 'coder': the model folder /no/such/dir does not exist
    """
    preflight_upstreams(settings)
    from ttftscope.gateway.state import inbound_keys  # the [gateway] extra: checked first

    inbound_keys(settings, os.environ)
    _check_port(settings.host, settings.port)


def preflight_upstreams(settings: GatewaySettings) -> None:
    """Every ids upstream has a model folder that exists."""
    for name, up in settings.upstreams.items():
        if up.mode != "ids":
            continue
        where = f"gateway.upstreams.{name}.model_dir"
        if up.model_dir is None:
            raise ConfigError(
                f"upstream {name!r} is in ids mode but has no model folder",
                hint=f"set {where} (or --model-dir) to the served model's folder, "
                'or mode = "text"',
            )
        folder = Path(up.model_dir).expanduser()
        if not folder.is_dir():
            raise TokenizerError(
                f"upstream {name!r}: the model folder {folder} does not exist",
                hint=f"point {where} (or --model-dir) at the folder with the served model's "
                "tokenizer.json and chat template",
            )


def _check_port(host: str, port: int) -> None:
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is in use (another gateway?)",
                hint="pass --port N (or set gateway.port), or stop what listens there",
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc})",
            hint="set --host / gateway.host to an address of this machine, e.g. 127.0.0.1",
        ) from None


@gateway.command("client-config")
@click.argument("kind", type=click.Choice(CLIENT_KINDS))
@click.option("--url", help="The gateway's base URL (default: from the config, …:8100/v1)")
@click.pass_context
def client_config_command(ctx: click.Context, kind: str, url: str | None) -> None:
    """Print what to paste into Claude Code, Codex, opencode or the OpenAI SDK.

    Filled from the running gateway (its address and served models); keys are never
    printed, only the variable that holds one.
    """
    state = cli_state(ctx)
    gw = state.load().settings.gateway
    host = "127.0.0.1" if gw.host in ("0.0.0.0", "::") else gw.host
    base = (url or f"http://{host}:{gw.port}/v1").rstrip("/")
    own = bool(os.environ.get(KEY_VAR, "").strip())
    key = client_key(os.environ, gw.api_keys_env)
    source = f"${KEY_VAR}" if own else f"the first key of ${gw.api_keys_env}"
    models = _served_models(base, key, source)
    # a key the gateway took, though the config names no key variable: the user's own
    keys_env = gw.api_keys_env or (KEY_VAR if own else None)
    notes, snippet = split_notes(client_config(cast(ClientKind, kind), base, models, keys_env))
    for note in notes:  # stdout stays valid JSON (or TOML, Python) when redirected
        click.echo(note, err=True)
    click.echo(snippet)


def _served_models(base: str, key: str | None, source: str) -> list[str]:
    """The models the gateway at ``base`` serves (its ``/v1/models``, asked with ``key``,
    which the user gave in ``source``)."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        resp = httpx.get(base + "/models", headers=headers, timeout=10)
    except httpx.HTTPError:
        raise ConfigError(
            f"no gateway answers at {base}/models",
            hint="start it with `ttftscope gateway` (another terminal), or pass --url",
        ) from None
    if resp.status_code in (401, 403):
        sent = f"it refused {source}" if key else f"none is set (${KEY_VAR})"
        raise ConfigError(
            f"the gateway at {base} answered {resp.status_code}: it needs a key, and {sent}",
            hint=f"export {KEY_VAR}=<one of the gateway's keys> (its gateway.api_keys_env "
            "variable), then run this again",
        )
    try:
        data = resp.json().get("data") if resp.status_code == 200 else None
    except (ValueError, AttributeError):
        data = None
    if not isinstance(data, list):
        raise ConfigError(
            f"{base}/models answered HTTP {resp.status_code} without a model list: not a "
            "ttftscope gateway?",
            hint="pass --url with the gateway's base URL, like http://127.0.0.1:8100/v1",
        )
    return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


@gateway.command("check")
@click.option("--base-url", help="Check this upstream (its API base, e.g. http://h:8000/v1)")
@click.option(
    "--model-dir",
    type=click.Path(path_type=Path),
    help="The served model's folder (tokenizer + chat template), for --base-url",
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object instead of the table")
@click.pass_context
def check_command(
    ctx: click.Context, base_url: str | None, model_dir: Path | None, as_json: bool
) -> None:
    """Prove each upstream, per API and shape class: ids or text, and why.

    Renders a fixed corpus locally and through the upstream's own rendering, as the
    gateway does at start-up. Exits 1 when nothing would go as ids.
    """
    require_extra("gateway")
    import asyncio

    from ttftscope.gateway.proving.checkreport import (
        check_json,
        check_text,
        check_upstreams,
        ids_anywhere,
    )

    parent = ctx.parent.params if ctx.parent is not None else {}
    url = base_url or parent.get("upstream")
    folder = model_dir or parent.get("model_dir")
    settings = gateway_settings(cli_state(ctx), url, folder, "ids" if url else parent.get("mode"))
    preflight_upstreams(settings)
    checks = asyncio.run(check_upstreams(settings, os.environ))
    if as_json:
        click.echo(json.dumps(check_json(checks), indent=2, ensure_ascii=False))
    else:
        click.echo(check_text(checks))
    if not ids_anywhere(checks):
        ctx.exit(1)
