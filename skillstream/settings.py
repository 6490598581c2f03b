"""Settings, in groups, parsed strictly.

``Settings`` holds one frozen group per concern: ``storage``, ``embedding``, ``llm``, ``spans``,
``extraction``, ``flow``, ``lifecycle``, ``distillation``, ``kafka`` and ``telemetry``. A component
takes its own group (``make_backend(settings.llm, home)``), never the whole object.

Every setting has one flat *key* (``span_tokens``, ``llm_base_url``, ``llm`` for the backend name),
and the key is what the user writes. Precedence, highest first:

1. an explicit value (``Settings.load(span_tokens=256)`` or a CLI option),
2. the environment variable ``SKILLSTREAM_<KEY>`` (upper case, e.g. ``SKILLSTREAM_SPAN_TOKENS``;
   an empty variable counts as unset; ``OPENAI_BASE_URL`` stands in for an unset
   ``SKILLSTREAM_LLM_BASE_URL``),
3. the activated controller, ``<home>/controller.json`` (written by ``skillstream memory-skills
   activate``): ``memory_skill_scorer`` is its checkpoint, ``memory_skill_selection`` is
   ``top_k`` and ``memory_skill_k`` the K it was trained with,
4. the file ``<home>/skillstream.toml``: flat keys, plus ``[policies.<agent>]`` tables,
5. the default.

Why the activated controller sits there: activating is a deliberate act on this home, done after
the file was written and instead of editing it, so it is the home's current choice of controller
and beats the file; an environment variable or an option is set for one invocation, so it beats
the activation (``--memory-skill-k 5`` runs once with K=5). The layer counts as a whole: a
checkpoint and its K and selection belong together, so when any other layer (the file included)
names a ``memory_skill_scorer``, that checkpoint is used and the activation adds nothing. A remote
home has no local ``controller.json``, and ``memory-skills activate`` refuses one.

Parsing is strict: booleans are true/false, 1/0, yes/no or on/off (any case); numbers are finite
and in range; names come from a closed list; locations are text without control characters (the
home is not empty, and not a file); the LLM endpoint is an http(s) URL; an unknown key is an error
that names the closest known key; map settings given in the environment are JSON objects. An
environment variable ``SKILLSTREAM_...`` that names no setting (nor one of ``OTHER_ENV``) is
logged as a warning with the likely name: a typo there would otherwise be ignored. Every error is a
:class:`~skillstream.errors.ConfigError` that names the setting as it was written (the environment
variable, or the file and key) and what is accepted.

Store locations are URIs (a local path, ``s3://bucket/prefix``, ``memory://``) and default to
folders under the home. Secrets (API keys) are read from the environment by the code that uses
them, never kept here.

Example:
    >>> s = Settings.from_keys(home="/tmp/h", span_tokens=256)
    >>> s.spans.span_tokens, s.storage.lancedb
    (256, '/tmp/h/lancedb')
    >>> s.with_keys(llm="openai").llm.backend
    'openai'
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
import tomllib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.fields import FieldInfo

from skillstream.admit import TimeWindow
from skillstream.errors import ConfigError
from skillstream.vocab import MemoryType

ENV_PREFIX = "SKILLSTREAM_"
DEFAULT_HOME = "./.skillstream"
CONFIG_FILE = "skillstream.toml"
CONTROLLER_FILE = "controller.json"
"""File in a local home naming the activated controller checkpoint (``memory-skills activate``)."""
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"
API_KEY_ENV = ("SKILLSTREAM_LLM_API_KEY", "OPENAI_API_KEY")
"""Where the LLM API key is read, first set wins; a secret, so never part of ``Settings``."""
EMBED_API_KEY_ENV = ("SKILLSTREAM_EMBED_API_KEY", *API_KEY_ENV)
"""Where the embedding endpoint's API key is read, first set wins; never part of ``Settings``."""
OTHER_ENV = (
    "SKILLSTREAM_LLM_API_KEY",
    "SKILLSTREAM_EMBED_API_KEY",
    "SKILLSTREAM_OWNER",
    "SKILLSTREAM_SOURCE",
    "SKILLSTREAM_WHEEL_CACHE",
)
"""``SKILLSTREAM_`` variables that are not settings: the two API keys, the owner of the task-skill
commands (``--owner``), the source of ``get_flow`` under ``python -m bytewax.run``, and the wheel
cache of ``scripts/install_llama.sh``. Any other ``SKILLSTREAM_`` name that is no setting is
reported as a likely typo (:func:`unknown_env`)."""

log = logging.getLogger(__name__)

BOOL_WORDS = {"true": True, "false": False, "1": True, "0": False}
BOOL_WORDS.update({"yes": True, "no": False, "on": True, "off": False})
BOOL_ACCEPTED = "true/false, 1/0, yes/no or on/off (any case)"


# ---------------------------------------------------------------------- value parsers
def _bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in BOOL_WORDS:
        return BOOL_WORDS[value.strip().lower()]
    raise ValueError("not a boolean")


def _number(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a number")
    if isinstance(value, str):
        return value.strip()
    return value


def _name(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _mapping(value: Any) -> Any:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError("not JSON") from e
    if not isinstance(value, Mapping):
        raise ValueError("not an object")
    return dict(value)


def _prices(value: Any) -> Any:
    """``{model: {"input": USD, "output": USD}}`` per million tokens, both finite and >= 0."""
    value = _mapping(value)
    out = {}
    for model, price in value.items():
        if not isinstance(price, Mapping) or set(price) != {"input", "output"}:
            raise ValueError("each model needs exactly input and output")
        pair = {}
        for side in ("input", "output"):
            v = price[side]
            if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v < float("inf"):
                raise ValueError("a price is a finite number >= 0")
            pair[side] = float(v)
        out[str(model)] = pair
    return out


def _address(value: Any) -> Any:
    """``PORT`` (loopback), ``HOST:PORT`` or ``[IPv6]:PORT`` as ``HOST:PORT``; empty stays empty."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise ValueError("not text")
    text = value.strip()
    if not text:
        return ""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or _CONTROL.search(host) or " " in host:
        raise ValueError("no host")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("not a port")
    return f"[{host}]:{int(port)}" if ":" in host else f"{host}:{int(port)}"


def _location(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("not text")
    if _CONTROL.search(value):
        raise ValueError("holds a control character")
    return value.strip()


def _url(value: Any) -> Any:
    value = _location(value)
    if value and not _HTTP_URL.match(value):
        raise ValueError("not an http(s) URL")
    return value


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HTTP_URL = re.compile(r"https?://[^\s/?#]+", re.I)
LOCATION_ACCEPTED = "a folder path or URI (text without control characters)"
URL_ACCEPTED = "an http:// or https:// URL, or empty"


def _instant(value: Any) -> Any:
    """An ISO 8601 time as UTC text (naive means UTC); empty text stays empty."""
    if isinstance(value, datetime):
        ts = value
    elif isinstance(value, str):
        if not value.strip():
            return ""
        try:
            ts = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError("not an ISO 8601 time, e.g. 2000-01-01T00:00:00Z") from None
    else:
        raise ValueError("not an ISO 8601 time, e.g. 2000-01-01T00:00:00Z")
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    return ts.isoformat()


Bool = Annotated[bool, BeforeValidator(_bool)]
Int = Annotated[int, BeforeValidator(_number)]
Float = Annotated[float, BeforeValidator(_number)]
Map = Annotated[dict[str, Any], BeforeValidator(_mapping)]
Prices = Annotated[dict[str, dict[str, float]], BeforeValidator(_prices)]
"""Model -> ``{"input": ..., "output": ...}``, per million tokens."""
Address = Annotated[str, BeforeValidator(_address)]
"""``HOST:PORT`` or empty; a bare port means the loopback host."""
Location = Annotated[str, BeforeValidator(_location)]
"""A folder, file or URI; ``accepted`` says ``LOCATION_ACCEPTED``."""
Url = Annotated[str, BeforeValidator(_url)]
"""An endpoint URL or empty; ``accepted`` says ``URL_ACCEPTED``."""

LAKE_PREFIX = "ducklake:postgres://"
_LAKE = re.compile(
    r"ducklake:postgres://(?P<user>[A-Za-z0-9_.-]+)@(?P<host>[A-Za-z0-9_.-]+)"
    r":(?P<port>[0-9]{1,5})/(?P<dbname>[A-Za-z0-9_.-]+)"
)
CATALOG_ACCEPTED = (
    "a local DuckDB file path, or ducklake:postgres://USER@HOST:PORT/DB (the PostgreSQL password, "
    "if any, comes from PGPASSWORD or ~/.pgpass, never from the setting)"
)


def lake_parts(spec: str) -> dict[str, str] | None:
    """``user``, ``host``, ``port``, ``dbname`` of a DuckLake catalog spec (``None``: a file)."""
    m = _LAKE.fullmatch(spec)
    return m.groupdict() if m else None


def _catalog(value: Any) -> Any:
    value = _location(value)
    if value.lower().startswith("ducklake:"):
        if lake_parts(value) is None:
            raise ValueError("not a DuckLake catalog")
        return value
    if is_remote(value):
        raise ValueError("a DuckDB catalog file is local")
    return str(local_path(value)) if value else value


CatalogSpec = Annotated[str, BeforeValidator(_catalog)]

Backend = Literal["rules", "openai"]
EmbedBackend = Literal["local", "openai"]
ResponseFormat = Literal["json_schema", "json_object", "text"]
Selection = Literal["auto", "all", "top_k", "gumbel"]
Hemisphere = Literal["north", "south"]
Fusion = Literal["mean", "weighted"]
Scope = Literal["private", "fleet", "session"]
DecayRule = Literal["seed", "idle"]
RankRule = Literal["product", "weighted"]
VectorIndex = Literal["ivf_flat", "ivf_pq", "ivf_hnsw_sq"]


def _key(key: str, default: Any, doc: str, *, shown: str = "", **limits: Any) -> Any:
    """A field stored under its flat ``key`` (the alias), documented by ``doc``.

    ``doc`` says what the setting does; its environment variable and its default are not
    repeated there: :func:`help_text` and :func:`settings_markdown` derive them from ``key`` and
    ``default``. ``shown`` is the default in words when the declared one is a stand-in (an empty
    location that means ``<home>/lancedb``).
    """
    if isinstance(default, float):
        limits["allow_inf_nan"] = False
    if shown:
        extra = dict(limits.pop("json_schema_extra", None) or {})
        limits["json_schema_extra"] = {**extra, "shown_default": shown}
    if default is dict:
        return Field(default_factory=dict, alias=key, description=doc, **limits)
    return Field(default, alias=key, description=doc, **limits)


class _Group(BaseModel):
    """A frozen group of settings; fields are stored by their flat key (the alias)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def keys(self) -> dict[str, Any]:
        """The group's values by flat key."""
        return {info.alias or name: getattr(self, name) for name, info in _fields(type(self))}


def _fields(group: type[BaseModel]) -> list[tuple[str, FieldInfo]]:
    return list(group.model_fields.items())


# ---------------------------------------------------------------------- the groups
class StorageSettings(_Group):
    """Where the stores of a home are."""

    home: Location = _key(
        "home",
        DEFAULT_HOME,
        "Folder or URI holding the default stores.",
        min_length=1,
    )
    lancedb_uri: Location = _key("lancedb_uri", "", "LanceDB URI.", shown="<home>/lancedb")
    catalog_spec: CatalogSpec = _key(
        "catalog",
        "",
        "The catalog: a local DuckDB file path (one writing process), or "
        "ducklake:postgres://USER@HOST:PORT/DB (DuckLake, metadata in PostgreSQL, many writers); "
        "empty uses the DuckDB file catalog_path.",
    )
    catalog_path: Location = _key(
        "catalog_path",
        "",
        "DuckDB catalog file (always local), used when catalog is empty.",
        shown="<home>/catalog.duckdb; for a remote home "
        "./.skillstream/remote/<scheme>/<bucket>/<prefix>/catalog.duckdb",
    )
    catalog_data: Location = _key(
        "catalog_data",
        "",
        "Where a DuckLake catalog keeps its Parquet data files: a folder or an s3:// URI.",
        shown="<home>/catalog_data",
    )
    catalog_threads: Int = _key(
        "catalog_threads",
        1,
        "DuckDB threads of a process's writing connection to a DuckLake catalog (its commits are "
        "small; one thread each keeps writers on several cores from crowding each other out). 0: "
        "DuckDB's own (one per core).",
        ge=0,
    )
    artifacts_uri: Location = _key(
        "artifacts_uri",
        "",
        "fsspec URI of the artifact store.",
        shown="<home>/artifacts",
    )
    storage_options: Map = _key(
        "storage_options",
        dict,
        "Options for LanceDB and fsspec (a JSON object in the environment).",
        repr=False,
    )
    index_scalar_rows: Int = _key(
        "index_scalar_rows",
        20_000,
        "Rows of the memories table from which its key (id, for upserts) and filter columns "
        "(owner_id, status, scope, session_id, event_ts) get scalar indexes; below, filters scan. "
        "0: never.",
        ge=0,
    )
    index_vector_rows: Int = _key(
        "index_vector_rows",
        100_000,
        "Rows of the memories table from which its vectors get an approximate (ANN) index for "
        "searches across many owners; below, and for searches within one owner, vector search is "
        "exact. 0: never.",
        ge=0,
    )
    index_vector_type: Annotated[VectorIndex, BeforeValidator(_name)] = _key(
        "index_vector_type",
        "ivf_flat",
        "The ANN index of the memories' vectors: 'ivf_flat' (partitions of full vectors: quick to "
        "build, exact distances, as large as the vectors), 'ivf_pq' (product-quantised: small, "
        "slower to build, re-ranked by exact distance) or 'ivf_hnsw_sq'.",
    )
    lance_cache_mb: Int = _key(
        "lance_cache_mb",
        512,
        "Megabytes a process gives LanceDB's caches of opened indexes and file metadata, shared "
        "by all its reads (without them every search would load the indexes again).",
        ge=1,
    )
    skills_uri: Location = _key(
        "skills_uri",
        "",
        "fsspec URI where task-skill zips are published (local folder, s3://, oss://).",
        shown="<artifacts>/task-skills",
    )
    skills_storage_options: Map = Field(
        default_factory=dict,
        alias="skills_storage_options",
        description="Storage options for skills_uri when they differ from storage_options (a JSON "
        "object in the environment).",
        repr=False,
    )

    @property
    def lancedb(self) -> str:
        """The LanceDB URI: ``lancedb_uri`` or ``<home>/lancedb``."""
        return self.lancedb_uri or _join(self.home, "lancedb")

    @property
    def catalog(self) -> str:
        """The catalog: ``catalog`` if set, else the DuckDB file (``catalog_path``, or a file under
        the home; a remote home keeps it in a local folder of its own)."""
        if self.catalog_spec:
            return self.catalog_spec
        if self.catalog_path:
            return self.catalog_path
        if self.remote:
            return str(_local_mirror(self.home) / "catalog.duckdb")
        return str(local_path(self.home) / "catalog.duckdb")

    @property
    def remote(self) -> bool:
        """Whether the home is remote (:func:`is_remote`): nothing local is created for it."""
        return is_remote(self.home)

    @property
    def shared_catalog(self) -> bool:
        """Whether the catalog takes concurrent writers (DuckLake) rather than one process."""
        return lake_parts(self.catalog) is not None

    @property
    def catalog_data_uri(self) -> str:
        """Where a DuckLake catalog keeps its data files: ``catalog_data`` or
        ``<home>/catalog_data``."""
        return self.catalog_data or _join(self.home, "catalog_data")

    @property
    def artifacts(self) -> str:
        """The artifact store URI: ``artifacts_uri`` or ``<home>/artifacts``."""
        return self.artifacts_uri or _join(self.home, "artifacts")

    @property
    def skills(self) -> str:
        """Where task skills are published: ``skills_uri`` or ``<artifacts>/task-skills``."""
        return self.skills_uri or _join(self.artifacts, "task-skills")


class EmbeddingSettings(_Group):
    """The sentence embedder."""

    model: str = _key(
        "embed_model",
        "minilm",
        "Local model: 'minilm' (the bundled offline all-MiniLM-L6-v2, English), "
        "'use-multilingual' (the bundled offline Universal Sentence Encoder multilingual v3: "
        "English, Chinese and 14 more languages) or a sentence-transformers folder.",
    )
    batch: Int = _key("embed_batch", 64, "Texts per embedding batch.", ge=1)
    prefetch: Bool = _key(
        "embed_prefetch",
        True,
        "With the rules backend, predict the memory texts of an owner's batch of spans and ask "
        "the model for them before applying the spans (texts not predicted are embedded as they "
        "come); false embeds each span's texts when it is applied. The memories are the same "
        "either way.",
    )
    threads: Int = _key(
        "embed_threads",
        0,
        "Threads the local model runs batches on, one core each; 0 takes one per CPU.",
        ge=0,
    )
    blas_threads: Int = _key(
        "embed_blas_threads",
        1,
        "Threads numpy's BLAS may use in a process once the local model's threads run there: they "
        "take a core each, and BLAS threads of the pipeline's matrix products would only contend "
        "with them; 0 leaves BLAS as it is.",
        ge=0,
    )
    cache: str = _key(
        "embed_cache",
        "",
        "Folder where a local model, once traced, is kept for the next process to load in a "
        "fraction of the time (see skillstream/traced.py); empty: $XDG_CACHE_HOME/skillstream, "
        "else ~/.cache/skillstream; 'off' keeps nothing.",
    )
    backend: Annotated[EmbedBackend, BeforeValidator(_name)] = _key(
        "embed_backend",
        "local",
        "Where vectors come from: 'local' (the sentence-transformers model embed_model names) or "
        "'openai' (an OpenAI-compatible /v1/embeddings endpoint; embed_model is then the model "
        "name sent to it).",
    )
    base_url: Url = _key(
        "embed_base_url",
        "",
        "The embeddings endpoint when embed_backend is openai, e.g. http://127.0.0.1:8080/v1. "
        "OPENAI_BASE_URL stands in when its variable is unset. The key comes from "
        "SKILLSTREAM_EMBED_API_KEY, else the LLM's key.",
        shown="none (the OpenAI API)",
    )
    dimensions: Int = _key(
        "embed_dimensions",
        0,
        "Vector width asked of the endpoint (models that can shorten their vectors); 0 keeps the "
        "model's own width.",
        ge=0,
    )
    timeout_s: Float = _key(
        "embed_timeout_s",
        60.0,
        "Seconds one embeddings request may take.",
        gt=0,
    )


class LLMSettings(_Group):
    """The LLM backend and how it is called."""

    backend: Annotated[Backend, BeforeValidator(_name)] = _key(
        "llm",
        "rules",
        "LLM backend: 'rules' (offline) or 'openai'.",
    )
    base_url: Url = _key(
        "llm_base_url",
        "",
        "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1. OPENAI_BASE_URL stands in "
        "when its variable is unset.",
    )
    model: str = _key(
        "llm_model",
        "gpt-4o-mini",
        "Model name sent to the endpoint.",
    )
    temperature: Float = _key(
        "llm_temperature",
        0.0,
        "Sampling temperature.",
        ge=0,
    )
    timeout_s: Float = _key(
        "llm_timeout_s",
        60.0,
        "Per-request timeout in seconds.",
        gt=0,
    )
    max_retries: Int = _key(
        "llm_max_retries",
        3,
        "Retries of a failed or unparsable request before the span is marked failed.",
        ge=0,
    )
    concurrency: Int = _key(
        "llm_concurrency",
        8,
        "Requests in flight at once per process.",
        ge=1,
    )
    response_format: Annotated[ResponseFormat, BeforeValidator(_name)] = _key(
        "llm_response_format",
        "json_schema",
        "Structured output: 'json_schema', 'json_object' (schema sent inside, for llama.cpp) or "
        "'text'.",
    )
    cache: Bool = _key(
        "llm_cache",
        True,
        "Cache responses by request in <home>/llm-cache.sqlite.",
    )
    extract_max_tokens: Int = _key(
        "extract_max_tokens",
        1024,
        "Completion token limit of one extraction call (0: no limit).",
        ge=0,
    )
    prices: Prices = _key(
        "llm_prices",
        dict,
        'Prices per million tokens by model name, e.g. {"gpt-4o-mini": {"input": 0.15, '
        '"output": 0.6}}: the cost metrics and `stats --cost` use them; a model without a '
        "price gets no cost, never a guess.",
        json_schema_extra={
            "accepts": "a JSON object (a table in TOML): model -> {input, output}, numbers >= 0"
        },
    )


class SpanSettings(_Group):
    """How messages are cut into spans."""

    span_tokens: Int = _key("span_tokens", 512, "Token budget of a span.", ge=1)
    idle_gap_s: Float = _key(
        "idle_gap_s",
        1800.0,
        "Gap (seconds) that closes a span and a task segment: between two messages in event "
        "time, and on a live stream also since a conversation's last message in wall-clock time.",
        gt=0,
    )
    max_message_chars: Int = _key(
        "max_message_chars",
        20000,
        "Longer messages go to the dead letters.",
        ge=1,
    )

    earliest_timestamp: Annotated[str, BeforeValidator(_instant)] = _key(
        "earliest_timestamp",
        "1970-01-01T00:00:00+00:00",
        "Messages dated before this ISO 8601 time go to the dead letters (empty: no bound).",
        json_schema_extra={"accepts": "an ISO 8601 time such as 2000-01-01T00:00:00Z, or empty"},
    )
    future_tolerance_s: Float = _key(
        "future_tolerance_s",
        86400.0,
        "Messages dated more than this many seconds after the wall clock go to the dead letters "
        "(0: no bound).",
        ge=0,
        le=100 * 365 * 86400,
    )
    late_tolerance_s: Float = _key(
        "late_tolerance_s",
        0.0,
        "Messages dated more than this many seconds before the latest message of their "
        "conversation go to the dead letters (0: no bound).",
        ge=0,
        le=100 * 365 * 86400,
    )

    @property
    def idle_gap(self) -> timedelta:
        """``idle_gap_s`` as a duration."""
        return timedelta(seconds=self.idle_gap_s)

    @property
    def time_window(self) -> TimeWindow:
        """The accepted timestamps (see ``skillstream.admit``)."""
        return TimeWindow(
            earliest=datetime.fromisoformat(self.earliest_timestamp)
            if self.earliest_timestamp
            else None,
            future=timedelta(seconds=self.future_tolerance_s) if self.future_tolerance_s else None,
            lateness=timedelta(seconds=self.late_tolerance_s) if self.late_tolerance_s else None,
        )


class ExtractionSettings(_Group):
    """What the extractor sees and which memory skills it uses."""

    retrieve_k: Int = _key(
        "retrieve_k",
        20,
        "Memories most similar to a span shown to an LLM extractor (and read by a trained "
        "controller); the offline rules extractor is shown none.",
        ge=0,
    )
    memory_skill_selection: Annotated[Selection, BeforeValidator(_name)] = _key(
        "memory_skill_selection",
        "auto",
        "How the controller picks memory skills per span: 'auto' (every skill, until a trained "
        "controller is set with memory_skill_scorer and the backend is an LLM: then 'top_k'), "
        "'all', 'top_k' (deterministic) or 'gumbel' (Gumbel-Top-K sampling seeded by "
        "memory_skill_seed).",
    )
    memory_skill_k: Int = _key(
        "memory_skill_k",
        3,
        "Memory skills selected per span (K of Top-K).",
        ge=1,
    )
    memory_skill_fusion: Annotated[Fusion, BeforeValidator(_name)] = _key(
        "memory_skill_fusion",
        "mean",
        "How the retrieved memories' embeddings are fused into the controller state: 'mean' or "
        "'weighted' (softmax of their similarity to the span).",
    )
    memory_skill_scorer: Location = _key(
        "memory_skill_scorer",
        "",
        "Checkpoint of the trained torch scorer of the controller; empty scores by cosine "
        "similarity of the state to the skill descriptions.",
    )
    memory_skill_seed: Int = _key(
        "memory_skill_seed",
        0,
        "Seed of Gumbel-Top-K exploration.",
    )
    hemisphere: Annotated[Hemisphere, BeforeValidator(_name)] = _key(
        "hemisphere",
        "north",
        "Which months a season names when the rules executor resolves 'last spring' or "
        "'去年冬天' to dates: 'north' (spring is March to May) or 'south' (September to November).",
    )


class FlowSettings(_Group):
    """How the Bytewax flow spreads and snapshots its work."""

    shards: Int = _key(
        "shards",
        0,
        "Key shards of the extraction step; owners of one shard are processed concurrently (0: "
        "one shard per worker).",
        ge=0,
    )
    concurrency: Int = _key(
        "concurrency",
        8,
        "Owners processed at the same time per worker (LLM calls in flight).",
        ge=1,
    )
    owner_state_max: Int = _key(
        "owner_state_max",
        0,
        "Owners whose memories the extraction step keeps in memory per shard; past it the least "
        "recently seen owner is evicted and read back from the store when it returns, with the "
        "same results (0: keep every owner).",
        ge=0,
    )
    epoch_interval_s: Float = _key(
        "epoch_interval_s",
        5.0,
        "Bytewax epoch (snapshot) interval in seconds.",
        ge=0,
    )
    stop_timeout_s: Float = _key(
        "stop_timeout_s",
        30.0,
        "After SIGTERM or SIGINT, how long a run may take to stop cleanly (hold its open spans, "
        "write what is in flight) before it exits with code 1.",
        gt=0,
    )
    max_failed_spans: Int = _key(
        "max_failed_spans",
        -1,
        "'skillstream run' exits with code 3 when more spans than this failed (-1: no limit).",
        ge=-1,
    )
    max_dead_letters: Int = _key(
        "max_dead_letters",
        -1,
        "'skillstream run' exits with code 3 when more records than this went to the dead letters "
        "(-1: no limit).",
        ge=-1,
    )


_DAY = 86400.0

DEFAULT_CAPACITIES: dict[str, int] = {
    MemoryType.WORKING: 20,
    MemoryType.LONG_TERM: 1500,
    MemoryType.USER: 480,
    MemoryType.SKILL: 500,
}
"""Live memories per owner and memory type that ``memory_capacities`` overrides."""
DEFAULT_RANK_WEIGHTS: dict[str, float] = {
    "relevance": 0.6,
    "confidence": 0.2,
    "recency": 0.1,
    "reinforcement": 0.1,
    "keyword": 0.5,
}
"""Search ranking weights that ``rank_weights`` overrides (``keyword``: how far a full-text match
lifts a hit's relevance toward 1; see ``lifecycle.ranking``)."""


def _listed(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{k} {v:g}" for k, v in values.items())


class LifecycleSettings(_Group):
    """The memory lifecycle: defaults, merging, contradictions, decay, capacity, policy, rank."""

    default_scope: Annotated[Scope, BeforeValidator(_name)] = _key(
        "default_scope",
        "private",
        "Scope of new memories: 'private', 'fleet' or 'session'.",
    )
    default_confidence: Float = _key(
        "default_confidence",
        0.7,
        "Confidence of a new memory.",
        ge=0,
        le=1,
    )
    memory_capacities: Map = _key(
        "memory_capacities",
        dict,
        "Live memories per owner and memory type, over the defaults (0: no limit); over capacity "
        "the oldest, least valuable are archived. A JSON object in the environment.",
        shown=f"none (the defaults: {_listed(DEFAULT_CAPACITIES)})",
    )
    merge_threshold: Float = _key(
        "merge_threshold",
        0.92,
        "Cosine similarity at or above which a new memory merges into an existing one "
        "(near-duplicate); above 1 turns merging off.",
        ge=0,
    )
    contradiction_confidence_gap: Float = _key(
        "contradiction_confidence_gap",
        0.3,
        "Confidence gap that decides a contradiction when recency does not.",
        ge=0,
        le=1,
    )
    contradiction_escalate_after_s: Float = _key(
        "contradiction_escalate_after_s",
        7 * _DAY,
        "Age (event time, seconds) after which `skillstream contradictions` lists an unresolved "
        "contradiction.",
        ge=0,
    )
    decay_after_s: Float = _key(
        "decay_after_s",
        90 * _DAY,
        "A memory not created, reinforced or accessed for this long (event time, seconds) starts "
        "to lose confidence.",
        ge=0,
    )
    decay_period_s: Float = _key(
        "decay_period_s",
        30 * _DAY,
        "One decay step per period after decay_after_s.",
        gt=0,
    )
    decay_step: Float = _key(
        "decay_step",
        0.1,
        "Confidence lost per decay step; at 0 the memory expires.",
        ge=0,
        le=1,
    )
    maintenance_interval_s: Float = _key(
        "maintenance_interval_s",
        _DAY,
        "Event-time interval of the flow's maintenance ticks per owner (decay, expiry, capacity, "
        "session summaries); 0 turns in-flow maintenance off.",
        ge=0,
    )
    policies: Map = _key(
        "policies",
        dict,
        "Memory policies by agent id ('*' is the default): readable_scopes, writable_scopes, "
        "default_scope, max_items_per_scope, default_expiry, sensitive_patterns. A JSON object in "
        "the environment, [policies.<agent>] tables in skillstream.toml.",
    )
    rank_weights: Map = _key(
        "rank_weights",
        dict,
        "Search ranking weights, over the defaults. A JSON object in the environment.",
        shown=f"none (the defaults: {_listed(DEFAULT_RANK_WEIGHTS)})",
    )
    recency_half_life_s: Float = _key(
        "recency_half_life_s",
        365 * _DAY,
        "Age (event time, seconds) at which a memory's recency score halves.",
        gt=0,
    )
    lesson_confidence: Float = _key(
        "lesson_confidence",
        0.6,
        "Confidence of a lesson learned from an outcome record.",
        ge=0,
        le=1,
    )
    session_summaries: Bool = _key(
        "session_summaries",
        True,
        "Write one summary memory per closed session.",
    )
    decay_rule: Annotated[DecayRule, BeforeValidator(_name)] = _key(
        "decay_rule",
        "seed",
        "Which memories decay: 'seed' (unused for decay_after_s AND confidence below decay_below) "
        "or 'idle' (every memory unused for decay_after_s).",
    )
    decay_below: Float = _key(
        "decay_below",
        0.3,
        "With decay_rule 'seed', only memories less confident than this decay.",
        ge=0,
        le=1,
    )
    rank_rule: Annotated[RankRule, BeforeValidator(_name)] = _key(
        "rank_rule",
        "product",
        "Search ranking: 'product' (relevance x confidence x recency x reinforcement factors) or "
        "'weighted' (a weighted sum with rank_weights).",
    )
    rank_diversity: Float = _key(
        "rank_diversity",
        0.5,
        "How much a search's hits avoid repeating each other: each next hit is the one with the "
        "best rank score x (1 - d x its highest cosine to the hits chosen before it); 0 ranks by "
        "score alone.",
        ge=0,
        lt=1,
    )
    archive_after_s: Float = _key(
        "archive_after_s",
        0.0,
        "A live memory unused (not created, reinforced or accessed) for this long (event time, "
        "seconds) is archived: out of default search, found with `search --archived`; 0 never "
        "archives for idleness.",
        ge=0,
    )
    expire_archived_after_s: Float = _key(
        "expire_archived_after_s",
        0.0,
        "An archived memory untouched for this long after it was archived (event time, seconds) "
        "expires: it leaves the search index and only a minimal log row stays; 0 never.",
        ge=0,
    )
    reorganize: Bool = _key(
        "reorganize",
        True,
        "Maintenance clusters each owner's long-term memories into abstract topic nodes linked to "
        "their members (memory_relations).",
    )
    reorganize_threshold: Float = _key(
        "reorganize_threshold",
        0.6,
        "Cosine similarity to a cluster's centre at or above which a memory joins the cluster.",
        ge=0,
        le=1,
    )
    reorganize_min_members: Int = _key(
        "reorganize_min_members",
        3,
        "Smallest cluster that gets an abstract node.",
        ge=2,
    )


class DistillationSettings(_Group):
    """Task-skill distillation."""

    enabled: Bool = _key(
        "distill",
        True,
        "Distil task skills from closed sessions in `run`.",
    )
    full: Bool = _key(
        "distill_full",
        False,
        "Full mode: also generate scripts, the tool list and reference documents (more LLM calls).",
    )
    min_steps: Int = _key(
        "distill_min_steps",
        2,
        "Procedural sentences a task segment needs before anything is distilled from it (0: no "
        "gate).",
        ge=0,
    )
    merge_threshold: Float = _key(
        "distill_merge_threshold",
        0.55,
        "Rules distiller: fit (affinity to the skill's draft and request centroids blended with "
        "step overlap) at which a segment updates a recalled task skill instead of creating one; "
        "also the fit at which two task skills of an owner are consolidated into one; above 1 "
        "never updates or consolidates.",
        ge=0,
    )
    shift_threshold: Float = _key(
        "distill_shift_threshold",
        0.2,
        "A new request below this similarity to the current task opens a new task segment.",
        ge=-1,
        le=1,
    )
    recall_k: Int = _key(
        "distill_recall_k",
        5,
        "Related task skills recalled per segment.",
        ge=0,
    )
    min_support: Int = _key(
        "skill_min_support",
        2,
        "Task segments (occurrences of the task: conversations, or later sessions of one) a "
        "distilled task skill needs before it leaves `candidate` and is served and published "
        "(`active`); 1 serves every new skill at once.",
        ge=1,
    )
    retire_below: Float = _key(
        "skill_retire_below",
        0.4,
        "Reliability (posterior mean success rate of a task skill's outcomes) below which an "
        "active task skill is `retired` and no longer served.",
        ge=0,
        le=1,
    )
    min_outcomes: Int = _key(
        "skill_min_outcomes",
        3,
        "Outcomes (successes and failures) a task skill needs before its reliability can retire "
        "it.",
        ge=1,
    )
    view_weight: Float = _key(
        "skill_view_weight",
        0.1,
        "Weight of one view of a task skill (`skills show`, `skill_view`) as a success in its "
        "reliability.",
        ge=0,
    )
    stale_days: Float = _key(
        "skill_stale_days",
        90.0,
        "Days without use after which an active task skill becomes `stale` (`skills maintain`).",
        gt=0,
    )
    archive_days: Float = _key(
        "skill_archive_days",
        365.0,
        "Days without use after which a stale or active task skill is `archived`.",
        gt=0,
    )


class KafkaSettings(_Group):
    """Kafka sources and sinks."""

    config: Map = Field(
        default_factory=dict,
        alias="kafka_config",
        description="librdkafka properties for the Kafka source, the event sink and `produce` "
        "(security, SASL, fetch tuning; a JSON object in the environment); "
        "`--kafka-config KEY=VALUE` adds to them.",
        repr=False,
    )
    events_partitions: Int = _key(
        "kafka_events_partitions",
        3,
        "Partitions of a memory-event topic that `--events-to` creates.",
        ge=1,
    )


class TelemetrySettings(_Group):
    """What a run tells about itself while it runs: Prometheus metrics and OpenTelemetry traces."""

    metrics_addr: Address = _key(
        "metrics_addr",
        "",
        "Serve the run's Prometheus metrics at http://HOST:PORT/metrics; a bare PORT listens on "
        "127.0.0.1 only (empty: no metrics endpoint).",
        json_schema_extra={"accepts": "PORT, HOST:PORT or [IPv6]:PORT, or empty"},
    )
    metrics_public: Bool = _key(
        "metrics_public",
        False,
        "Allow metrics_addr to name a host other than a loopback one (the metrics hold counts "
        "and labels, never messages or owner ids, but the port opens to the network).",
    )
    tracing: Bool = _key(
        "tracing",
        False,
        "Emit OpenTelemetry spans (span extraction, LLM and embedding calls, store commits) to "
        "the tracer provider your OpenTelemetry SDK set up; without an SDK they cost nothing.",
    )


GROUPS: dict[str, type[_Group]] = {
    "storage": StorageSettings,
    "embedding": EmbeddingSettings,
    "llm": LLMSettings,
    "spans": SpanSettings,
    "extraction": ExtractionSettings,
    "flow": FlowSettings,
    "lifecycle": LifecycleSettings,
    "distillation": DistillationSettings,
    "kafka": KafkaSettings,
    "telemetry": TelemetrySettings,
}
"""Group name -> group model, in ``Settings`` order."""

KEYS: dict[str, tuple[str, str]] = {
    info.alias or name: (group, name)
    for group, model in GROUPS.items()
    for name, info in _fields(model)
}
"""Flat key -> (group name, field name in the group)."""


# ---------------------------------------------------------------------- the settings object
class Settings(BaseModel):
    """Every setting of skillstream, in groups; see the module docstring for precedence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    storage: StorageSettings = Field(default_factory=StorageSettings)
    embedding: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    spans: SpanSettings = Field(default_factory=SpanSettings)
    extraction: ExtractionSettings = Field(default_factory=ExtractionSettings)
    flow: FlowSettings = Field(default_factory=FlowSettings)
    lifecycle: LifecycleSettings = Field(default_factory=LifecycleSettings)
    distillation: DistillationSettings = Field(default_factory=DistillationSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    @classmethod
    def load(cls, **explicit: Any) -> Settings:
        """Settings from explicit values, the environment, the activated controller,
        ``<home>/skillstream.toml`` and defaults, in that order (see the module docstring).

        Args:
            **explicit: Flat keys; ``None`` counts as not given.

        Raises:
            ConfigError: an unknown key or a bad value, named as it was written.
        """
        explicit = {k: v for k, v in explicit.items() if v is not None}
        _check_known(explicit, "")
        env, env_sources = _from_env()
        for name, hint in unknown_env(os.environ):
            log.warning("environment variable %s is not a setting and is ignored%s", name, hint)
        home = explicit.get("home") or env.get("home") or DEFAULT_HOME
        if not isinstance(home, str):
            raise ConfigError(f"setting home: expected a folder or URI, got {home!r}")
        _check_home(home, env_sources.get("home") if "home" not in explicit else None)
        values, sources = _from_file(home)
        if not any(layer.get("memory_skill_scorer") for layer in (values, env, explicit)):
            active, active_sources = _from_controller(home)
            values.update(active)
            sources.update(active_sources)
        values.update(env)
        sources.update(env_sources)
        values.update(explicit)
        sources.update({k: f"setting {k}" for k in explicit})
        values["home"] = home
        return _build(values, sources)

    @classmethod
    def from_keys(cls, **keys: Any) -> Settings:
        """Defaults with ``keys`` over them; neither the environment nor a file is read.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        _check_known(keys, "")
        return _build(dict(keys), {k: f"setting {k}" for k in keys})

    def with_keys(self, **keys: Any) -> Settings:
        """A copy with ``keys`` (flat keys) changed, validated like any other value.

        Raises:
            ConfigError: an unknown key or a bad value.
        """
        _check_known(keys, "")
        values = self.keys()
        values.update(keys)
        return _build(values, {k: f"setting {k}" for k in keys})

    def keys(self) -> dict[str, Any]:
        """Every value by flat key."""
        out: dict[str, Any] = {}
        for group in GROUPS:
            out.update(getattr(self, group).keys())
        return out

    def describe(self) -> dict[str, Any]:
        """Every value by flat key, for ``skillstream config``.

        Option maps (storage options, Kafka properties) may carry credentials: values under keys
        that name a password, secret, token or key are masked.
        """
        return {k: mask_secrets(v) if isinstance(v, dict) else v for k, v in self.keys().items()}


_SECRET_KEY = re.compile(
    r"pass(word)?|secret|token|credential|api[_.-]?key|access[_.-]?key|private|jaas", re.I
)


def mask_secrets(options: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``options`` with the values of credential-like keys replaced by ``***``."""
    return {
        k: "***" if _SECRET_KEY.search(str(k)) and v not in (None, "") else v
        for k, v in options.items()
    }


def llm_api_key() -> str:
    """The LLM API key from ``SKILLSTREAM_LLM_API_KEY`` or ``OPENAI_API_KEY`` (``""``: none).

    Read when a backend is built and handed to its client only; never stored in ``Settings``.
    """
    for name in API_KEY_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return ""


def embed_api_key() -> str:
    """The embeddings endpoint's API key (``EMBED_API_KEY_ENV``, first set wins; ``""``: none).

    Read when the embedder is built and handed to its client only; never stored in ``Settings``.
    """
    for name in EMBED_API_KEY_ENV:
        value = os.environ.get(name, "").strip()
        if value:
            return value
    return ""


def env_var(key: str) -> str:
    """The environment variable of a flat key: ``span_tokens`` -> ``SKILLSTREAM_SPAN_TOKENS``."""
    return ENV_PREFIX + key.upper()


# ---------------------------------------------------------------------- documentation
_DAY_S = 86400


def default_text(key: str) -> str:
    """The default of a flat key in words, from its declaration.

    Example:
        >>> default_text("span_tokens"), default_text("decay_after_s"), default_text("lancedb_uri")
        ('512', '7776000 (90 days)', '<home>/lancedb')
    """
    group, name = KEYS[key]
    info = GROUPS[group].model_fields[name]
    extra = info.json_schema_extra
    if isinstance(extra, dict) and extra.get("shown_default"):
        return str(extra["shown_default"])
    value = info.get_default(call_default_factory=True)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "none" if not value else json.dumps(value)
    if isinstance(value, float):
        text = str(int(value)) if value.is_integer() else f"{value:g}"
        if key.endswith("_s") and value >= _DAY_S and value % _DAY_S == 0:
            days = int(value // _DAY_S)
            text += f" ({days} day{'s' if days > 1 else ''})"
        return text
    if value == "":
        return "empty"
    return str(value)


def help_text(key: str) -> str:
    """A flat key's description with its environment variable and default, derived.

    Example:
        >>> help_text("span_tokens")
        'Token budget of a span. SKILLSTREAM_SPAN_TOKENS; default 512.'
    """
    group, name = KEYS[key]
    doc = GROUPS[group].model_fields[name].description or ""
    return f"{doc} {env_var(key)}; default {default_text(key)}."


def settings_markdown() -> str:
    """docs/settings.md: every setting by group, with its key, environment variable, default, what
    it accepts and its description, all read from the declarations (``scripts/settings_doc.py``
    writes the file, ``skillstream config --doc`` prints it; a test fails when the committed file
    differs)."""
    out = [
        "# Settings",
        "",
        "<!-- Generated from skillstream/settings.py by scripts/settings_doc.py; do not edit. -->",
        "",
        "Every setting has a flat key: the key in `<home>/skillstream.toml`, a keyword of",
        "`Settings.load` and `skillstream.open`, and, upper case after `SKILLSTREAM_`, its",
        "environment variable. Precedence, highest first: an explicit value or CLI option, the",
        "environment, the activated controller (`<home>/controller.json`), `skillstream.toml`, the",
        "default. Map settings are JSON objects in the environment and tables in the file.",
        "`skillstream config` prints the values in force.",
    ]
    for group, model in GROUPS.items():
        out += ["", f"## {group}", "", (model.__doc__ or "").strip(), ""]
        out += ["| Key | Environment variable | Default | Accepts | What it does |"]
        out += ["|---|---|---|---|---|"]
        for name, info in _fields(model):
            key = info.alias or name
            words = [accepted(key), info.description or ""]
            cells = [f"`{key}`", f"`{env_var(key)}`", f"`{default_text(key)}`"]
            cells += [w.replace("<", "\\<") for w in words]
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------- locations
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def is_remote(uri: str) -> bool:
    """Whether a location is remote: it starts with a scheme ``xxx://`` other than ``file://``.

    The one rule for every location (home, LanceDB, artifacts, inputs): ``s3://``, ``gs://``,
    ``oss://``, ``memory://``, ``az://`` ... are remote and nothing local is created for them; a
    plain path or a ``file://`` URI is local.

    Example:
        >>> [is_remote(u) for u in ("s3://b/p", "gs://b", "memory://x", "file:///tmp/h", "./h")]
        [True, True, True, False, False]
    """
    m = _SCHEME.match(uri.strip())
    return m is not None and m.group(1).lower() != "file"


def local_path(uri: str) -> Path:
    """The local path of a local location (a plain path, or a ``file://`` URI without its scheme).

    Raises:
        ValueError: for a remote location (see :func:`is_remote`).
    """
    if is_remote(uri):
        raise ValueError(f"{uri!r} is a remote location, not a local path")
    m = _SCHEME.match(uri.strip())
    return Path(uri.strip()[m.end() :]) if m else Path(uri)


def _local_mirror(uri: str) -> Path:
    """The local folder of a remote home's local files: one per home, so two homes on S3 never
    share a catalog (and its span ledger).

    ``s3://bucket/prefix`` -> ``./.skillstream/remote/s3/bucket/prefix``.
    """
    scheme, _, rest = uri.partition("://")
    parts = [p for p in rest.split("/") if p not in ("", ".", "..")]
    return Path(DEFAULT_HOME, "remote", scheme or "remote", *parts)


def _join(base: str, name: str) -> str:
    if _SCHEME.match(base.strip()):
        return base.rstrip("/") + "/" + name
    return str(Path(base) / name)


# ---------------------------------------------------------------------- loading
def did_you_mean(name: str, known: Any) -> str:
    """``"; did you mean 'x'?"`` for the closest of ``known`` to ``name`` (``""``: none is close).

    >>> did_you_mean("span_token", ["span_tokens", "llm_model"])
    "; did you mean 'span_tokens'?"
    """
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return f"; did you mean {close[0]!r}?" if close else ""


def _check_known(keys: Mapping[str, Any], where: str) -> None:
    unknown = sorted(set(keys) - set(KEYS))
    if unknown:
        hints = "".join(did_you_mean(k, KEYS) for k in unknown)
        raise ConfigError(
            f"{where}unknown setting{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}{hints} ('skillstream config --doc' lists "
            "every setting)"
        )


def unknown_env(environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """``SKILLSTREAM_`` variables of ``environ`` that name no setting (nor one of ``OTHER_ENV``),
    each with a "did you mean" hint (``""`` when no name is close): likely typos, which would
    otherwise be ignored without a word.

    >>> unknown_env({"SKILLSTREAM_SPAN_TOKEN": "256", "SKILLSTREAM_OWNER": "ana"})
    [('SKILLSTREAM_SPAN_TOKEN', "; did you mean 'SKILLSTREAM_SPAN_TOKENS'?")]
    """
    known = {env_var(k) for k in KEYS} | set(OTHER_ENV)
    # compared without the prefix they all share, which would make any two names look alike
    words = {name[len(ENV_PREFIX) :]: name for name in known}
    out = []
    for name in sorted(environ):
        if name.startswith(ENV_PREFIX) and name not in known:
            close = difflib.get_close_matches(name[len(ENV_PREFIX) :], words, n=1, cutoff=0.75)
            out.append((name, f"; did you mean {words[close[0]]!r}?" if close else ""))
    return out


def _check_home(home: str, variable: str | None) -> None:
    """Refuse a local home that is a file: every store of a home is a folder inside it."""
    if is_remote(home):
        return
    path = local_path(home)
    if path.exists() and not path.is_dir():
        given = variable.split(" ", 1)[0] if variable else "--home"
        raise ConfigError(
            f"the home {home} ({given}) is a file, not a folder: a home is a folder that holds "
            "lancedb/, catalog.duckdb and artifacts/; choose another --home"
        )


def _from_env() -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in KEYS:
        name = env_var(key)
        raw = os.environ.get(name)
        if not raw and key == "llm_base_url":
            name, raw = OPENAI_BASE_URL_ENV, os.environ.get(OPENAI_BASE_URL_ENV)
        if raw:
            values[key], sources[key] = raw, f"{name} (setting {key})"
    return values, sources


def _from_file(home: str) -> tuple[dict[str, Any], dict[str, str]]:
    if is_remote(home):
        return {}, {}
    path = local_path(home) / CONFIG_FILE
    if not path.exists():
        return {}, {}
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from e
    _check_known(data, f"{path}: ")
    return data, {k: f"{path}: key {k}" for k in data}


def _from_controller(home: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The settings the home's activated controller gives (none for a remote home or none
    activated)."""
    if is_remote(home):
        return {}, {}
    path = local_path(home) / CONTROLLER_FILE
    if not path.is_file():
        return {}, {}
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not a JSON record of an activated controller: {e}") from e
    if not isinstance(record, dict) or not record.get("checkpoint"):
        raise ConfigError(f"{path}: names no checkpoint; run 'memory-skills activate' again")
    values: dict[str, Any] = {
        "memory_skill_selection": "top_k",
        "memory_skill_scorer": str(record["checkpoint"]),
    }
    if record.get("k"):
        values["memory_skill_k"] = record["k"]
    return values, {k: f"{path}: {k} of the activated controller" for k in values}


def _build(values: dict[str, Any], sources: dict[str, str]) -> Settings:
    by_group: dict[str, dict[str, Any]] = {g: {} for g in GROUPS}
    for key, value in values.items():
        by_group[KEYS[key][0]][key] = value
    groups: dict[str, Any] = {}
    problems: list[str] = []
    for group, model in GROUPS.items():
        try:
            groups[group] = model.model_validate(by_group[group])
        except ValidationError as e:
            for err in e.errors():
                key = str(err["loc"][0]) if err["loc"] else group
                problems.append(_problem(key, values.get(key), sources.get(key, f"setting {key}")))
    if problems:
        raise ConfigError("; ".join(dict.fromkeys(problems)))
    return Settings.model_validate(groups)


def _problem(key: str, value: Any, source: str) -> str:
    shown = value if not isinstance(value, str) else value[:80]
    return f"{source}: bad value {shown!r}; expected {accepted(key)}"


def accepted(key: str) -> str:
    """What a flat key accepts, in words (for error messages)."""
    group, name = KEYS[key]
    info = GROUPS[group].model_fields[name]
    extra = info.json_schema_extra
    if isinstance(extra, dict) and isinstance(extra.get("accepts"), str):
        return str(extra["accepts"])
    kind = info.annotation
    if kind is bool:
        return BOOL_ACCEPTED
    if get_origin(kind) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(kind))
    if kind is dict or get_origin(kind) is dict:
        return "a JSON object (a table in TOML)"
    if key == "catalog":
        return CATALOG_ACCEPTED
    if kind is str:
        validators = [getattr(m, "func", None) for m in info.metadata]
        if _url in validators:
            return URL_ACCEPTED
        if _location in validators:
            return LOCATION_ACCEPTED
        return "text"
    bounds = []
    for m in info.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            limit = getattr(m, attr, None)
            if limit is not None:
                bounds.append(f"{sign} {limit:g}")
    what = "an integer" if kind is int else "a finite number"
    return what + (" " + " and ".join(bounds) if bounds else "")
