"""Settings.

One frozen ``Settings`` object holds every knob. Precedence, highest first:

1. an explicit argument (``Settings.load(span_tokens=256)`` or a CLI option),
2. an environment variable ``SKILLSTREAM_<FIELD>`` (upper case, e.g. ``SKILLSTREAM_SPAN_TOKENS``),
3. the config file ``<home>/skillstream.toml`` (keys are field names),
4. the default written below.

Store locations are URIs (a local path, ``s3://bucket/prefix``, ``memory://``) and default to
folders under the home. Secrets (API keys) are read from the environment only and never stored in
this object's ``repr`` or written anywhere.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from skillstream.errors import ConfigError

ENV_PREFIX = "SKILLSTREAM_"
DEFAULT_HOME = "./.skillstream"


def _doc(text: str, default: Any, **kw: Any) -> Any:
    if default in (dict, list):
        return field(default_factory=default, metadata={"doc": text}, **kw)
    return field(default=default, metadata={"doc": text}, **kw)


@dataclass(frozen=True)
class Settings:
    """Every setting of skillstream; see the module docstring for precedence."""

    home: str = _doc("Folder or URI holding the default stores. SKILLSTREAM_HOME.", DEFAULT_HOME)
    lancedb_uri: str = _doc("LanceDB URI. SKILLSTREAM_LANCEDB_URI; default <home>/lancedb.", "")
    catalog_path: str = _doc(
        "DuckDB catalog file (always local). SKILLSTREAM_CATALOG_PATH; default <home>/catalog.duckdb, "
        "for a remote home ./.skillstream/remote/<scheme>/<bucket>/<prefix>/catalog.duckdb.",
        "",
    )
    artifacts_uri: str = _doc(
        "fsspec URI of the artifact store. SKILLSTREAM_ARTIFACTS_URI; default <home>/artifacts.", ""
    )
    storage_options: dict[str, str] = _doc(
        "Options for LanceDB and fsspec (JSON in SKILLSTREAM_STORAGE_OPTIONS).", dict
    )
    embed_model: str = _doc(
        "Sentence-transformers model: 'minilm' (the bundled offline all-MiniLM-L6-v2) or a local "
        "path. SKILLSTREAM_EMBED_MODEL.",
        "minilm",
    )
    embed_batch: int = _doc("Texts per embedding batch. SKILLSTREAM_EMBED_BATCH.", 64)
    llm: str = _doc("LLM backend: 'rules' (offline) or 'openai'. SKILLSTREAM_LLM.", "rules")
    llm_base_url: str = _doc(
        "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1. SKILLSTREAM_LLM_BASE_URL "
        "(OPENAI_BASE_URL is read too).",
        "",
    )
    llm_model: str = _doc("Model name sent to the endpoint. SKILLSTREAM_LLM_MODEL.", "gpt-4o-mini")
    llm_temperature: float = _doc("Sampling temperature. SKILLSTREAM_LLM_TEMPERATURE.", 0.0)
    llm_timeout_s: float = _doc("Per-request timeout in seconds. SKILLSTREAM_LLM_TIMEOUT_S.", 60.0)
    llm_max_retries: int = _doc(
        "Retries of a failed or unparsable request before the span is marked failed. "
        "SKILLSTREAM_LLM_MAX_RETRIES.",
        3,
    )
    llm_concurrency: int = _doc(
        "Requests in flight at once per process. SKILLSTREAM_LLM_CONCURRENCY.", 8
    )
    llm_response_format: str = _doc(
        "Structured output: 'json_schema', 'json_object' (schema sent inside, for llama.cpp) or "
        "'text'. SKILLSTREAM_LLM_RESPONSE_FORMAT.",
        "json_schema",
    )
    llm_cache: bool = _doc(
        "Cache responses by request in <home>/llm-cache.sqlite. SKILLSTREAM_LLM_CACHE.", True
    )
    span_tokens: int = _doc("Token budget of a span. SKILLSTREAM_SPAN_TOKENS.", 512)
    idle_gap_s: float = _doc(
        "Event-time gap (seconds) that closes a span and a task segment. SKILLSTREAM_IDLE_GAP_S.",
        1800.0,
    )
    max_message_chars: int = _doc(
        "Longer messages go to the dead letters. SKILLSTREAM_MAX_MESSAGE_CHARS.", 20000
    )
    retrieve_k: int = _doc(
        "Memories retrieved per span for the extractor. SKILLSTREAM_RETRIEVE_K.", 20
    )
    shards: int = _doc(
        "Key shards of the extraction step; owners of one shard are processed concurrently. "
        "0 means one shard per worker. SKILLSTREAM_SHARDS.",
        0,
    )
    concurrency: int = _doc(
        "Owners processed at the same time per worker (LLM calls in flight). SKILLSTREAM_CONCURRENCY.",
        8,
    )
    default_scope: str = _doc("Scope of new memories. SKILLSTREAM_DEFAULT_SCOPE.", "private")
    default_confidence: float = _doc(
        "Confidence of a new memory. SKILLSTREAM_DEFAULT_CONFIDENCE.", 0.7
    )
    epoch_interval_s: float = _doc(
        "Bytewax epoch (snapshot) interval in seconds. SKILLSTREAM_EPOCH_INTERVAL_S.", 5.0
    )

    # ------------------------------------------------------------------ memory skills (issue 3)
    memory_skill_selection: str = _doc(
        "How the controller picks memory skills per span: 'auto' (every skill for the rules "
        "backend, 'top_k' for an LLM), 'all', 'top_k' (deterministic) or 'gumbel' (Gumbel-Top-K "
        "sampling seeded by memory_skill_seed). SKILLSTREAM_MEMORY_SKILL_SELECTION.",
        "auto",
    )
    memory_skill_k: int = _doc(
        "Memory skills selected per span (K of Top-K). SKILLSTREAM_MEMORY_SKILL_K.", 3
    )
    memory_skill_fusion: str = _doc(
        "How the retrieved memories' embeddings are fused into the controller state: 'mean' or "
        "'weighted' (softmax of their similarity to the span). SKILLSTREAM_MEMORY_SKILL_FUSION.",
        "mean",
    )
    memory_skill_scorer: str = _doc(
        "Checkpoint of the trained torch scorer of the controller; empty scores by cosine "
        "similarity of the state to the skill descriptions. SKILLSTREAM_MEMORY_SKILL_SCORER.",
        "",
    )
    memory_skill_seed: int = _doc(
        "Seed of Gumbel-Top-K exploration. SKILLSTREAM_MEMORY_SKILL_SEED.", 0
    )
    extract_max_tokens: int = _doc(
        "Completion token limit of one extraction call. SKILLSTREAM_EXTRACT_MAX_TOKENS.", 1024
    )

    # ------------------------------------------------------------------ lifecycle (issue 5)
    memory_capacities: dict[str, int] = _doc(
        "Live memories per owner and memory type, over the defaults WorkingMemory 20, "
        "LongTermMemory 1500, UserMemory 480, SkillMemory 500 (0: no limit); over capacity the "
        "oldest, least valuable are archived. JSON in SKILLSTREAM_MEMORY_CAPACITIES.",
        dict,
    )
    merge_threshold: float = _doc(
        "Cosine similarity at or above which a new memory merges into an existing one "
        "(near-duplicate); above 1 turns merging off. SKILLSTREAM_MERGE_THRESHOLD.",
        0.92,
    )
    contradiction_confidence_gap: float = _doc(
        "Confidence gap that decides a contradiction when recency does not. "
        "SKILLSTREAM_CONTRADICTION_CONFIDENCE_GAP.",
        0.3,
    )
    contradiction_escalate_after_s: float = _doc(
        "Age (event time, seconds) after which `skillstream contradictions` lists an unresolved "
        "contradiction. SKILLSTREAM_CONTRADICTION_ESCALATE_AFTER_S.",
        7 * 86400.0,
    )
    decay_after_s: float = _doc(
        "A memory not created, reinforced or accessed for this long (event time, seconds) starts "
        "to lose confidence. SKILLSTREAM_DECAY_AFTER_S.",
        90 * 86400.0,
    )
    decay_period_s: float = _doc(
        "One decay step per period after decay_after_s. SKILLSTREAM_DECAY_PERIOD_S.", 30 * 86400.0
    )
    decay_step: float = _doc(
        "Confidence lost per decay step; at 0 the memory expires. SKILLSTREAM_DECAY_STEP.", 0.1
    )
    maintenance_interval_s: float = _doc(
        "Event-time interval of the flow's maintenance ticks per owner (decay, expiry, capacity, "
        "session summaries); 0 turns in-flow maintenance off. SKILLSTREAM_MAINTENANCE_INTERVAL_S.",
        86400.0,
    )
    policies: dict[str, Any] = _doc(
        "Memory policies by agent id ('*' is the default): readable_scopes, writable_scopes, "
        "default_scope, max_items_per_scope, default_expiry, sensitive_patterns. JSON in "
        "SKILLSTREAM_POLICIES, or [policies.<agent>] tables in skillstream.toml.",
        dict,
    )
    rank_weights: dict[str, float] = _doc(
        "Search ranking weights over the defaults relevance 0.6, confidence 0.2, recency 0.1, "
        "reinforcement 0.1. JSON in SKILLSTREAM_RANK_WEIGHTS.",
        dict,
    )
    recency_half_life_s: float = _doc(
        "Age (event time, seconds) at which a memory's recency score halves. "
        "SKILLSTREAM_RECENCY_HALF_LIFE_S.",
        30 * 86400.0,
    )
    lesson_confidence: float = _doc(
        "Confidence of a lesson learned from an outcome record. SKILLSTREAM_LESSON_CONFIDENCE.", 0.6
    )
    session_summaries: bool = _doc(
        "Write one summary memory per closed session. SKILLSTREAM_SESSION_SUMMARIES.", True
    )

    # ------------------------------------------------------------------ Kafka (issue 6)
    kafka_config: dict[str, str] = _doc(
        "librdkafka properties for the Kafka source, the event sink and `produce` (security, "
        "SASL, fetch tuning); JSON in SKILLSTREAM_KAFKA_CONFIG, `--kafka-config KEY=VALUE` adds.",
        dict,
        repr=False,
    )
    kafka_events_partitions: int = _doc(
        "Partitions of a memory-event topic that `--events-to` creates. "
        "SKILLSTREAM_KAFKA_EVENTS_PARTITIONS.",
        3,
    )

    # ------------------------------------------------------------------ task skills (issue 4)
    distill: bool = _doc(
        "Distil task skills from closed sessions in `run`. SKILLSTREAM_DISTILL.", True
    )
    distill_full: bool = _doc(
        "Full mode: also generate scripts, the tool list and reference documents (more LLM "
        "calls). SKILLSTREAM_DISTILL_FULL.",
        False,
    )
    distill_min_steps: int = _doc(
        "Procedural sentences a task segment needs before anything is distilled from it (0: no "
        "gate). SKILLSTREAM_DISTILL_MIN_STEPS.",
        2,
    )
    distill_merge_threshold: float = _doc(
        "Rules distiller: fit (cosine to the skill's centroid blended with step overlap) at which "
        "a segment updates a recalled task skill instead of creating one. "
        "SKILLSTREAM_DISTILL_MERGE_THRESHOLD.",
        0.55,
    )
    distill_shift_threshold: float = _doc(
        "Rules distiller: a new request below this similarity to the current task opens a new "
        "task segment. SKILLSTREAM_DISTILL_SHIFT_THRESHOLD.",
        0.2,
    )
    distill_recall_k: int = _doc(
        "Related task skills recalled per segment. SKILLSTREAM_DISTILL_RECALL_K.", 5
    )
    skills_uri: str = _doc(
        "fsspec URI where task-skill zips are published (local folder, s3://, oss://). "
        "SKILLSTREAM_SKILLS_URI; default <artifacts>/task-skills.",
        "",
    )
    skills_storage_options: dict[str, str] = _doc(
        "Storage options for skills_uri when they differ from storage_options (JSON in "
        "SKILLSTREAM_SKILLS_STORAGE_OPTIONS).",
        dict,
        repr=False,
    )

    # ------------------------------------------------------------------ derived locations
    @property
    def lancedb(self) -> str:
        return self.lancedb_uri or _join(self.home, "lancedb")

    @property
    def catalog(self) -> str:
        if self.catalog_path:
            return self.catalog_path
        if _is_remote(self.home):
            return str(_local_mirror(self.home) / "catalog.duckdb")
        return str(Path(self.home) / "catalog.duckdb")

    @property
    def artifacts(self) -> str:
        return self.artifacts_uri or _join(self.home, "artifacts")

    @property
    def idle_gap(self) -> timedelta:
        return timedelta(seconds=self.idle_gap_s)

    # ------------------------------------------------------------------ loading
    @classmethod
    def load(cls, **explicit: Any) -> Settings:
        """Build settings from explicit values, the environment, the config file and defaults."""
        explicit = {k: v for k, v in explicit.items() if v is not None}
        unknown = set(explicit) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ConfigError(f"unknown settings: {sorted(unknown)}")
        env = _from_env(cls)
        home = explicit.get("home") or env.get("home") or DEFAULT_HOME
        values: dict[str, Any] = {}
        values.update(_from_file(cls, home))
        values.update(env)
        values.update(explicit)
        values["home"] = home
        try:
            return cls(**values)
        except TypeError as e:  # pragma: no cover - guarded by the unknown check
            raise ConfigError(str(e)) from e

    def describe(self) -> dict[str, Any]:
        """Every field with its value, for ``skillstream config``.

        Option maps (storage options, Kafka properties) may carry credentials: values under keys
        that name a password, secret, token or key are masked.
        """
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = mask_secrets(value) if isinstance(value, dict) else value
        return out


_SECRET_KEY = re.compile(
    r"pass(word)?|secret|token|credential|api[_.-]?key|access[_.-]?key|private|jaas", re.I
)


def mask_secrets(options: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` with the values of credential-like keys replaced by ``***``."""
    return {
        k: "***" if _SECRET_KEY.search(str(k)) and v not in (None, "") else v
        for k, v in options.items()
    }


def _is_remote(uri: str) -> bool:
    return "://" in uri and not uri.startswith("file://")


def _local_mirror(uri: str) -> Path:
    """The local folder of a remote home's local files (issue 6): one per home, so two homes on
    S3 never share a catalog (and its span ledger).

    ``s3://bucket/prefix`` -> ``./.skillstream/remote/s3/bucket/prefix``.
    """
    scheme, _, rest = uri.partition("://")
    parts = [p for p in rest.split("/") if p not in ("", ".", "..")]
    return Path(DEFAULT_HOME, "remote", scheme or "remote", *parts)


def _join(base: str, name: str) -> str:
    if _is_remote(base):
        return base.rstrip("/") + "/" + name
    return str(Path(base) / name)


def _coerce(f: dataclasses.Field, raw: Any) -> Any:
    factory: Any = f.default_factory
    default = f.default if f.default is not dataclasses.MISSING else factory()
    try:
        if isinstance(default, bool):
            if isinstance(raw, bool):
                return raw
            return str(raw).strip().lower() in ("1", "true", "yes", "on")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, dict):
            return dict(json.loads(raw) if isinstance(raw, str) else raw)
        return str(raw)
    except (ValueError, TypeError) as e:
        raise ConfigError(
            f"setting {f.name!r}: cannot read {raw!r} as {type(default).__name__}"
        ) from e


def _from_env(cls: type) -> dict[str, Any]:
    out = {}
    for f in dataclasses.fields(cls):
        raw = os.environ.get(ENV_PREFIX + f.name.upper())
        if raw is None and f.name == "llm_base_url":
            raw = os.environ.get("OPENAI_BASE_URL")
        if raw is not None and raw != "":
            out[f.name] = _coerce(f, raw)
    return out


def _from_file(cls: type, home: str) -> dict[str, Any]:
    if _is_remote(home):
        return {}
    path = Path(home) / "skillstream.toml"
    if not path.exists():
        return {}
    with path.open("rb") as fh:
        try:
            data = tomllib.load(fh)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{path}: not valid TOML: {e}") from e
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        raise ConfigError(
            f"{path}: unknown keys {sorted(unknown)}; known keys are field names of Settings"
        )
    return {k: _coerce(fields[k], v) for k, v in data.items()}
