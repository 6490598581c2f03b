"""skillstream.connectors

Sources that turn chat logs into the canonical ``Message`` (or a ``DeadLetter`` for a record that
cannot be used): the record rules in ``records``, the Bytewax ``FileSource`` for JSONL, Parquet and
CSV files in ``files``, and dataset adapters for LoCoMo (``locomo``) and STAR (``star``).
"""

from skillstream.connectors.files import FORMATS, FileSource, detect_format, read_all
from skillstream.connectors.locomo import (
    LocomoQA,
    iter_locomo,
    load_locomo,
    load_locomo_qa,
    parse_locomo_datetime,
)
from skillstream.connectors.records import (
    CANONICAL_FIELDS,
    ROLE_ALIASES,
    dead_letter,
    parse_line,
    parse_record,
    parse_timestamp,
)
from skillstream.connectors.star import iter_star, load_star_dialogues

__all__ = [
    "CANONICAL_FIELDS",
    "FORMATS",
    "ROLE_ALIASES",
    "FileSource",
    "LocomoQA",
    "dead_letter",
    "detect_format",
    "iter_locomo",
    "iter_star",
    "load_locomo",
    "load_locomo_qa",
    "load_star_dialogues",
    "parse_line",
    "parse_locomo_datetime",
    "parse_record",
    "parse_timestamp",
    "read_all",
]
