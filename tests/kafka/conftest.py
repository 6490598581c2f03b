"""The subprocess helpers under the name tests/flows/test_sigkill.py and
tests/flows/test_shared_catalog.py import them from; they live in tests/servers/processes.py and
tests/servers/ports.py. The Kafka tests themselves are in the folders of what they test, and the
broker fixture is in tests/conftest.py."""

from __future__ import annotations

from tests.servers.ports import free_port
from tests.servers.processes import cli_env, die_with_parent, skillstream_cmd

__all__ = ["cli_env", "die_with_parent", "free_port", "skillstream_cmd"]
