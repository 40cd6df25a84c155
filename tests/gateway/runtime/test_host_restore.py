"""A gateway gives its process back as it found it: collector unfrozen, switch interval."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from ttftscope.config.schema import GatewaySettings
from ttftscope.gateway.proving.conformance import StartupChecks
from ttftscope.gateway.runtime.workpool import SWITCH_INTERVAL_S
from ttftscope.gateway.state import Gateway

pytestmark = pytest.mark.asyncio

HOST_INTERVAL = 0.0123  # a value no one else sets: the one the host had


@pytest.fixture
def host() -> Iterator[None]:
    before = sys.getswitchinterval()
    gc.unfreeze()
    sys.setswitchinterval(HOST_INTERVAL)
    yield
    gc.unfreeze()
    sys.setswitchinterval(before)


async def test_stop_restores_the_switch_interval_and_unfreezes(host: None) -> None:
    gateway = Gateway(GatewaySettings(), {}, prover=StartupChecks(0))
    await gateway.start()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)
    assert gc.get_freeze_count() > 0
    await gateway.close()
    assert sys.getswitchinterval() == pytest.approx(HOST_INTERVAL)
    assert gc.get_freeze_count() == 0


async def test_overlapping_gateways_restore_when_the_last_stops(host: None) -> None:
    first, second = (
        Gateway(GatewaySettings(), {}, prover=StartupChecks(0)),
        Gateway(GatewaySettings(), {}, prover=StartupChecks(0)),
    )
    await first.start()
    await second.start()
    await first.close()
    assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S)  # second still runs
    assert gc.get_freeze_count() > 0
    await second.close()
    assert sys.getswitchinterval() == pytest.approx(HOST_INTERVAL)
    assert gc.get_freeze_count() == 0


async def test_a_host_freeze_stays_and_a_gateway_never_started_changes_nothing(
    host: None,
) -> None:
    gc.freeze()  # the host froze its own objects before the gateway came
    frozen = gc.get_freeze_count()
    await Gateway(
        GatewaySettings(), {}, prover=StartupChecks(0)
    ).close()  # closed without a start: nothing to give back
    assert sys.getswitchinterval() == pytest.approx(HOST_INTERVAL)
    gateway = Gateway(GatewaySettings(), {}, prover=StartupChecks(0))
    await gateway.start()
    await gateway.close()
    assert sys.getswitchinterval() == pytest.approx(HOST_INTERVAL)
    assert gc.get_freeze_count() >= frozen  # not unfrozen under the host
