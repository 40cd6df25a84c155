"""``ttftscope ping``: is the server there, does the key work, is the model served?"""

from __future__ import annotations

import click

from ttftscope.cli.options import cli_state, endpoint_options, run_async
from ttftscope.client.endpoint import Endpoint
from ttftscope.client.ping import ping as do_ping

__all__ = ["ping"]


@click.command()
@endpoint_options
@click.pass_context
def ping(ctx: click.Context) -> None:
    """Send the smallest useful chat request and say what answered."""
    state = cli_state(ctx)
    ep = Endpoint.from_settings(state.load().settings, headers=state.headers)
    result = run_async(
        do_ping(
            base_url=ep.base_url,
            api_key=ep.api_key,
            model=ep.model or None,
            timeout_s=ep.timeout_s,
            headers=ep.headers,
            retries=ep.max_retries,
        )
    )
    click.echo(
        f"ok  base_url={result.base_url}  model={result.model_reported}  "
        f"latency={result.latency_ms:.1f} ms"
    )
