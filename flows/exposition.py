"""The run's ``/metrics`` endpoint: ``skillstream.metrics.REGISTRY`` over HTTP while a run goes on.

:func:`serving` is what :class:`~skillstream.flows.runner.Runner` wraps a run in when setting
``metrics_addr`` names an address: ``prometheus_client``'s own exposition server (a daemon thread,
``GET /metrics`` in the Prometheus text format) on that address, stopped when the run ends. A bare
port means 127.0.0.1; a host that is not a loopback one is refused unless setting
``metrics_public`` says it is meant: the series hold counts and closed label sets, never a message
or an owner, but the port then opens to the network.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from skillstream.errors import ConfigError, InputError
from skillstream.settings import TelemetrySettings

log = logging.getLogger(__name__)

__all__ = ["host_port", "is_loopback", "serving"]


def host_port(address: str) -> tuple[str, int]:
    """``("127.0.0.1", 9464)`` of ``127.0.0.1:9464`` (brackets of an IPv6 host dropped)."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback one (``localhost``, 127.0.0.0/8,
    ``::1``); a name that does not resolve is not."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(a.split("%", 1)[0]).is_loopback for a in addresses
    )


@contextmanager
def serving(telemetry: TelemetrySettings) -> Iterator[str | None]:
    """Serve the process's metrics on ``telemetry.metrics_addr`` inside the block; yields the
    endpoint's URL (``None`` and nothing served when the setting is empty).

    Raises:
        ConfigError: a host that is not a loopback one without ``metrics_public``.
        InputError: the address cannot be listened on (the port is taken, say).
    """
    address = telemetry.metrics_addr
    if not address:
        yield None
        return
    host, port = host_port(address)
    if not telemetry.metrics_public and not is_loopback(host):
        raise ConfigError(
            f"setting metrics_addr: {host} is not a loopback host; give a bare port (127.0.0.1), "
            "or set metrics_public=true (SKILLSTREAM_METRICS_PUBLIC) to open the metrics port to "
            "the network on purpose"
        )
    from prometheus_client import start_http_server

    from skillstream.metrics import REGISTRY

    try:
        server, thread = start_http_server(port, addr=host, registry=REGISTRY)
    except OSError as e:
        raise InputError(f"cannot serve metrics on {address}: {e.strerror or e}") from None
    url = f"http://{address}/metrics"
    log.info("metrics at %s", url)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
