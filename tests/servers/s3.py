"""A real S3 API server (moto) on loopback, shared by the storage, task-skill and S3-home tests."""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from tests.servers.ports import free_port

CREDENTIALS = {
    "aws_access_key_id": "testing",
    "aws_secret_access_key": "testing",
    "region": "us-east-1",
}


@contextmanager
def moto_server() -> Iterator[str]:
    """Run moto's S3 server on a free 127.0.0.1 port; yields its endpoint URL."""
    from moto.server import ThreadedMotoServer

    for name in ("werkzeug", "moto"):
        logging.getLogger(name).setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def fresh_bucket(endpoint: str, bucket: str) -> dict[str, str]:
    """Empty the server, create ``bucket``; returns storage options (LanceDB and fsspec style)."""
    req = urllib.request.Request(f"{endpoint}/moto-api/reset", method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    import s3fs

    fs = s3fs.S3FileSystem(
        key="testing", secret="testing", endpoint_url=endpoint, skip_instance_cache=True
    )
    fs.mkdir(bucket)
    return {**CREDENTIALS, "endpoint": endpoint, "allow_http": "true"}
