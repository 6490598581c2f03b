"""Metrics and traces where the work happens, at the cost of one lookup when neither is on.

**Metrics.** The series live in :mod:`skillstream.metrics`, on ``prometheus_client``, which takes
about 0.1 s to import. A process records them once that module is loaded: by a run that serves
them (setting ``metrics_addr``), or by a server that mounts its registry. Until then
:func:`metrics` is ``None`` and each call site skips its recording, so ``search``, ``stats`` and a
run without an endpoint never import ``prometheus_client``; every count a scrape can see is
counted, because whoever exposes the registry has imported it first.

**Traces.** :func:`span` starts an OpenTelemetry span through ``opentelemetry-api``'s global
tracer when tracing is on (setting ``tracing``; :func:`set_tracing` turns it on for the process,
as the global tracer provider is the process's), and is a shared no-op context otherwise.
Attributes follow the OpenTelemetry GenAI semantic conventions (:data:`GEN_AI`); no message text,
prompt or owner id is ever put on a span.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from types import ModuleType
from typing import Any

__all__ = ["GEN_AI", "metrics", "set_tracing", "span", "tracing"]

_NO_SPAN: AbstractContextManager[Any] = nullcontext()
_tracing = False
_tracer: Any = None

GEN_AI = {
    "operation": "gen_ai.operation.name",
    "provider": "gen_ai.provider.name",
    "system": "gen_ai.system",
    "model": "gen_ai.request.model",
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "store": "gen_ai.memory.store.id",
}
"""The GenAI semantic-convention attribute names the spans use (``gen_ai.system`` is the older
name of ``gen_ai.provider.name``; both are set, for backends that read either)."""


def metrics() -> ModuleType | None:
    """:mod:`skillstream.metrics` once something in this process loaded it, else ``None``."""
    return sys.modules.get("skillstream.metrics")


def set_tracing(on: bool) -> None:
    """Turn span emission on or off for this process (the run does, from setting ``tracing``)."""
    global _tracing, _tracer
    _tracing = bool(on)
    if _tracing and _tracer is None:
        from opentelemetry import trace

        _tracer = trace.get_tracer("skillstream")


def tracing() -> bool:
    """Whether spans are emitted."""
    return _tracing


def span(
    name: str, attributes: Mapping[str, Any] | None = None, *, client: bool = False
) -> AbstractContextManager[Any]:
    """A context for one unit of work: an OpenTelemetry span, current inside the block, when
    tracing is on (``None`` is bound otherwise).

    Args:
        name: The span's name (``chat gpt-4o-mini``, ``embeddings all-MiniLM-L6-v2``...).
        attributes: Attributes known at the start; set more on the bound span when it is not
            ``None``.
        client: A call to another service (an LLM or embedding endpoint): span kind CLIENT.

    An exception leaving the block is recorded on the span and sets its status to error.
    """
    if not _tracing:
        return _NO_SPAN
    from opentelemetry.trace import SpanKind

    kind = SpanKind.CLIENT if client else SpanKind.INTERNAL
    return _tracer.start_as_current_span(name, kind=kind, attributes=dict(attributes or {}))
