"""A small dataflow that writes span results through ResultSink (used by the multi-process test).

Run with ``python -m bytewax.run tests.storage.flow_app:flow``; the home folder comes from the
``STORE_TEST_HOME`` environment variable.
"""

from __future__ import annotations

import os

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import TestingSource

from skillstream.settings import Settings
from skillstream.storage.sinks import ResultSink

from .conftest import DIM, make_dead_letter, make_result

OWNERS = ["u1", "u'2", "u3", "u4"]


def items() -> list:
    out: list = []
    for owner in OWNERS:
        for n in range(3):
            out.append((owner, make_result(n, owner)))
    out += [("dead", make_dead_letter(i)) for i in range(2)]
    return out


def build(settings: Settings, source_items: list) -> Dataflow:
    flow = Dataflow("store_sink_test")
    stream = op.input("inp", flow, TestingSource(source_items))
    op.output("store", stream, ResultSink(settings, DIM))
    return flow


flow = build(
    Settings.from_keys(home=os.environ.get("STORE_TEST_HOME", "./.skillstream-test")), items()
)
