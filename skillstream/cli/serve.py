"""``skillstream serve``: one long-lived process over a home, holding the model.

It answers the JSON API, MCP over streamable HTTP and the pages (see ``skillstream.server``).
"""

from __future__ import annotations

import click

from skillstream.cli.common import settings_from


def parse_addr(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``, on 127.0.0.1; ``[::1]:PORT`` for IPv6)."""
    host, sep, port = addr.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", addr
    host = host.strip("[]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError as e:
        raise click.BadParameter(f"expected HOST:PORT, got {addr!r}") from e
    if not 0 <= number <= 65535:
        raise click.BadParameter(f"port {number} is out of range")
    return host, number


@click.command()
@click.option(
    "--addr",
    default="127.0.0.1:8765",
    show_default=True,
    metavar="HOST:PORT",
    help="Where to listen. Any address but a loopback one needs --token or --tokens.",
)
@click.option(
    "--token",
    "tokens",
    multiple=True,
    envvar="SKILLSTREAM_SERVE_TOKEN",
    help="A bearer token with access to every owner (repeatable; env SKILLSTREAM_SERVE_TOKEN). "
    "Requests then carry 'Authorization: Bearer <token>'.",
)
@click.option(
    "--tokens",
    "tokens_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="A TOML file of tokens, each for every owner or limited to some ([[token]] with value "
    "or sha256, and owners).",
)
@click.option("--no-mcp", is_flag=True, help="Do not serve MCP at /mcp.")
@click.pass_context
def serve(ctx, addr, tokens, tokens_file, no_mcp):
    """Serve the home over HTTP: a JSON API (/v1, described at /openapi.json), MCP at /mcp,
    Prometheus metrics at /metrics and read-only pages at /."""
    import uvicorn

    from skillstream.server.app import build_app
    from skillstream.server.auth import Tokens, is_loopback
    from skillstream.server.home import ServedHome

    host, port = parse_addr(addr)
    accepted = Tokens.load(tokens, tokens_file)
    if not accepted and not is_loopback(host):
        raise click.UsageError(
            f"serving on {host} needs a token: give --token or --tokens (only a loopback address "
            "is served without one)"
        )
    home = ServedHome(settings_from(ctx), accepted)
    home.warm()
    app = build_app(home, host=host, mcp=not no_mcp)
    click.echo(f"serving {home.settings.storage.home} on http://{addr_text(host, port)}", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


def addr_text(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
