"""skillstream: turn agent conversations into memory with Bytewax, LanceDB and DuckDB.

The Python API (loaded on first use, so ``import skillstream`` stays cheap):

* ``skillstream.open(home, **settings)`` -> ``Home``: ``run(source)`` (a backfill),
  ``add(messages)`` (store a few messages now), ``search(query, owner=, k=)``, ``sql(query)``,
  ``history(memory_id)`` and ``task_skills`` (list, show, save, patch, delete, export, search);
* ``Result``: what ``search``, ``sql`` and ``history`` return (Arrow; ``.pl()`` for Polars);
* ``Runner``: one run of the memory flow on a home (``skillstream.flows.runner``), whose
  ``parts()`` are the components the operators take;
* ``admit_messages``, ``extract_memories``, ``distil_task_skills`` and ``store``: Bytewax
  operators for a dataflow of your own (``skillstream.flows.operators``);
* ``Settings``: the settings of a home (``skillstream.settings``).

Example (the README runs a longer one as a doctest):
    >>> import skillstream
    >>> home = skillstream.open("/tmp/skillstream-example", owner="ana")  # doctest: +SKIP
    >>> home.search("where does Ana live", k=3).pl()  # doctest: +SKIP
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from skillstream.api import Added, Home, Result, TaskSkills, open
    from skillstream.flows.operators import (
        admit_messages,
        distil_task_skills,
        extract_memories,
        store,
    )
    from skillstream.flows.runner import Runner
    from skillstream.settings import Settings

_LAZY = {
    "open": "skillstream.api",
    "Home": "skillstream.api",
    "Result": "skillstream.api",
    "Added": "skillstream.api",
    "TaskSkills": "skillstream.api",
    "Runner": "skillstream.flows.runner",
    "Settings": "skillstream.settings",
    "admit_messages": "skillstream.flows.operators",
    "extract_memories": "skillstream.flows.operators",
    "distil_task_skills": "skillstream.flows.operators",
    "store": "skillstream.flows.operators",
}
"""Public name -> the module that defines it (imported on first use)."""

__all__ = [
    "Added",
    "Home",
    "Result",
    "Runner",
    "Settings",
    "TaskSkills",
    "__version__",
    "admit_messages",
    "distil_task_skills",
    "extract_memories",
    "open",
    "store",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'skillstream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
