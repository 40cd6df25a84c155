"""Where a bench sends: each target's API and metrics URLs and the credentials it may get.

The configured key and ``--header`` values travel only to targets on the API's own origin
(as everywhere in ttftscope): a gateway on another port gets neither, so a key meant for the
server never leaks to a process that was not configured to hold it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ttftscope.bench.options import TargetSpec
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.schema import derive_metrics_url, same_origin


@dataclass(frozen=True)
class Target:
    """One resolved target.

    >>> Target("gw", "http://h:8100/v1", "http://h:8100/metrics").api_key is None
    True
    """

    name: str
    base_url: str
    metrics_url: str
    api_key: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    scrape_headers: Mapping[str, str] = field(default_factory=dict)


def resolve_targets(ep: Endpoint, specs: tuple[TargetSpec, ...]) -> tuple[Target, ...]:
    """Targets in the order given; ``direct`` is the endpoint itself.

    >>> ep = Endpoint("http://h:8000/v1", "http://h:8000/metrics", api_key="k")
    >>> direct, gw = resolve_targets(ep, (TargetSpec("direct"), TargetSpec("gw", "http://h:81/v1")))
    >>> direct.api_key, gw.api_key, gw.metrics_url
    ('k', None, 'http://h:81/metrics')
    """
    out = []
    for spec in specs:
        if spec.url is None:
            out.append(
                Target(
                    spec.name,
                    ep.base_url,
                    ep.metrics_url,
                    ep.api_key,
                    dict(ep.headers),
                    ep.scrape_headers(),
                )
            )
            continue
        trusted = same_origin(spec.url, ep.base_url)
        metrics = derive_metrics_url(spec.url)
        out.append(
            Target(
                spec.name,
                spec.url,
                metrics,
                ep.api_key if trusted else None,
                dict(ep.headers) if trusted else {},
                _credentials(ep) if trusted else {},
            )
        )
    return tuple(out)


def _credentials(ep: Endpoint) -> dict[str, str]:
    key = {"Authorization": f"Bearer {ep.api_key}"} if ep.api_key else {}
    return {**key, **ep.headers}
