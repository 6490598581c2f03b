"""Owner shards are spread over the workers: each shard's state key lands, in a real Bytewax run,
on the worker ``shard % workers``."""

from __future__ import annotations

import bytewax.operators as op
import pytest
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource, cluster_main

from skillstream.flows.shards import shard_key, worker_of


def placed(keys: list[str], workers: int) -> dict[str, int]:
    """The worker Bytewax runs each key's state on (one process, ``workers`` threads)."""
    seen: dict[str, int] = {}
    flow = Dataflow("placement")
    keyed = op.key_on("key", op.input("in", flow, TestingSource(keys)), lambda k: k)
    mapped = op.stateful_map("state", keyed, lambda state, v: (state, v))

    def record(_step: str, item: tuple[str, str], _epoch: int, worker: int) -> None:
        seen[item[0]] = worker

    op.inspect_debug("where", mapped, record)
    cluster_main(flow, [], 0, worker_count_per_proc=workers)
    return seen


@pytest.mark.parametrize("workers", [2, 3, 4])
def test_each_shard_runs_on_its_own_worker(workers):
    shards = [str(i) for i in range(2 * workers)]
    keys = [shard_key(s, workers) for s in shards]
    where = placed(keys, workers)
    assert [where[k] for k in keys] == [int(s) % workers for s in shards]


def test_the_routing_hash_is_bytewaxs():
    """Plain numbers land where ``worker_of`` says, uneven as that is (both of two shards on the
    second of two workers, which is why the keys carry a suffix when needed)."""
    keys = [str(i) for i in range(12)] + [f"store-{i:05d}" for i in range(4)]
    where = placed(keys, 2)
    assert where == {k: worker_of(k, 2) for k in keys}
    assert where["0"] == where["1"] == 1


def test_a_key_is_the_shard_number_when_it_already_lands_right():
    assert shard_key("1", 2) == "1" and shard_key("0", 2) == "0~1"
    assert all(shard_key(str(i), 1) == str(i) for i in range(5))
