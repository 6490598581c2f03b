"""Bytewax sources for chat logs in files: JSONL, Parquet, CSV, and the LoCoMo and STAR datasets.

``FileSource`` only checks and stores its settings; one private partition per file does the reading
and the parsing, so every item that leaves the source is already a ``Message`` or a ``DeadLetter``
(see ``connectors.records``). Split them downstream, e.g. with ``bytewax.operators.branch``.

Resume state is one integer per file, and the same integer names where each item came from
(``Message.position`` / ``DeadLetter.position``):

=============  ==================================================================================
format         position and resume state
=============  ==================================================================================
jsonl          byte offset where the line starts (gzip files: 0-based line index)
parquet        0-based row index
csv            0-based data row index; a row with the wrong number of cells is a dead letter
               at position ``"line:<n>"``, ``n`` being pyarrow's 1-based count of CSV rows
               with the header as row 1 (a quoted value's newlines do not count)
locomo, star   0-based index of the turn in the file
=============  ==================================================================================

Files are read once, to their end: a file that is still being written to is not followed.
Delivery: resuming from a snapshot re-reads nothing before it, so with Bytewax recovery items are
emitted at least once (the items after the last snapshot may come again); ids are deterministic,
so an upserting sink collapses the repeats.
"""

from __future__ import annotations

import glob
import gzip
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from skillstream.connectors.fileio import is_gzip
from skillstream.connectors.locomo import iter_locomo
from skillstream.connectors.records import dead_letter, parse_line, parse_record
from skillstream.connectors.star import DEFAULT_OWNER, iter_star
from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from skillstream.redact import DEFAULT_REDACTOR, Redactor

Item = Message | DeadLetter
"""What a file source emits."""

FORMATS = ("jsonl", "parquet", "csv", "locomo", "star")

SUFFIXES: dict[str, str] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonl.gz": "jsonl",
    ".ndjson.gz": "jsonl",
    ".parquet": "parquet",
    ".csv": "csv",
    ".json": "locomo",
}
"""File-name endings that ``format="auto"`` recognises, and the format each one means."""

_GLOB_CHARS = set("*?[")


def detect_format(path: str | Path) -> str | None:
    """The format ``auto`` picks for a file name, or ``None`` when its ending is unknown."""
    name = Path(path).name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    return None


@dataclass(frozen=True)
class _Options:
    mapping: Mapping[str, str] | None
    batch_size: int
    max_chars: int
    redactor: Redactor
    owner_id: str | None


class FileSource(FixedPartitionedSource[Item, int]):
    """Read chat messages from files, one partition per file.

    Each file is read by exactly one worker, so messages of one file keep their order; files are
    spread over the workers. Every item is a ``Message`` or a ``DeadLetter``: a bad line or row
    never stops the flow.

    Example:
        >>> from bytewax.dataflow import Dataflow
        >>> import bytewax.operators as op
        >>> flow = Dataflow("read")
        >>> items = op.input("in", flow, FileSource("chats/"))  # doctest: +SKIP
    """

    def __init__(
        self,
        paths: str | Path | list[str | Path] | tuple[str | Path, ...],
        format: str = "auto",
        mapping: Mapping[str, str] | None = None,
        batch_size: int = 500,
        max_chars: int = 20000,
        redactor: Redactor = DEFAULT_REDACTOR,
        owner_id: str | None = None,
    ) -> None:
        """Check the settings and find the files.

        Args:
            paths: A file, a directory (its files whose endings fit ``format``, sorted, not
                recursive), a glob pattern (``logs/**/*.jsonl``), or a list of these.
            format: ``auto`` (by file ending, see ``SUFFIXES``), ``jsonl``, ``parquet``,
                ``csv``, ``locomo`` or ``star``.
            mapping: Canonical field -> input column, for JSONL, Parquet and CSV (see
                ``connectors.records.parse_record``).
            batch_size: Items read per ``next_batch`` call.
            max_chars: Longest accepted message, in characters.
            redactor: Sensitive-data rules applied before anything leaves the source.
            owner_id: When set, the owner of every message (it overrides ``user_id``). STAR
                files default to ``"star"``.

        Raises:
            InputError: A path does not exist, a directory or pattern matches no file, a file's
                format cannot be told from its name, or an argument is out of range.
        """
        if format != "auto" and format not in FORMATS:
            raise InputError(
                f"unknown format {format!r}; expected 'auto' or one of {', '.join(FORMATS)}"
            )
        if batch_size < 1:
            raise InputError(f"batch_size must be at least 1, got {batch_size}")
        if max_chars < 1:
            raise InputError(f"max_chars must be at least 1, got {max_chars}")
        if mapping is not None and not isinstance(mapping, Mapping):
            raise InputError(
                f"mapping must be a dict of canonical field -> column, got {mapping!r}"
            )
        given = list(paths) if isinstance(paths, (list, tuple)) else [paths]
        if not given:
            raise InputError("no input paths given; pass a file, a directory or a glob pattern")
        self._files = _expand(given, format)
        self._options = _Options(
            mapping=dict(mapping) if mapping else None,
            batch_size=batch_size,
            max_chars=max_chars,
            redactor=redactor,
            owner_id=owner_id,
        )

    @property
    def files(self) -> dict[str, str]:
        """Partition key (the file path) -> format, in reading order."""
        return {key: fmt for key, (_, fmt) in self._files.items()}

    def list_parts(self) -> list[str]:
        """The files of this source that exist on this worker's machine."""
        return [key for key, (path, _) in self._files.items() if path.exists()]

    def build_part(
        self, step_id: str, for_part: str, resume_state: int | None
    ) -> StatefulSourcePartition[Item, int]:
        """Open one file, resuming at ``resume_state`` (see the module docstring)."""
        if for_part not in self._files:
            raise InputError(
                f"cannot resume partition {for_part!r}: it is not one of this source's files "
                f"({', '.join(self._files)}); run with the same paths or start a fresh recovery "
                "store"
            )
        path, fmt = self._files[for_part]
        return _PARTITIONS[fmt](path, for_part, resume_state, self._options)


def read_all(source: FileSource) -> list[Item]:
    """Read every file of a source to its end without a dataflow (for scripts and benchmarks).

    Args:
        source: The source to read.

    Returns:
        Every item, file after file, each file in its own order.
    """
    items: list[Item] = []
    for key in source.list_parts():
        part = source.build_part("read_all", key, None)
        try:
            while True:
                try:
                    items.extend(part.next_batch())
                except StopIteration:
                    break
        finally:
            part.close()
    return items


def _expand(paths: list[str | Path], format: str) -> dict[str, tuple[Path, str]]:
    files: dict[str, tuple[Path, str]] = {}
    for given in paths:
        text = str(given)
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and _listed(p, format))
            if not found:
                raise InputError(f"directory {text!r} holds no {_wanted(format)} file")
        elif path.exists():
            found = [path]
        elif _GLOB_CHARS & set(text):
            found = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
            found = [p for p in found if _listed(p, format)]
            if not found:
                raise InputError(f"no {_wanted(format)} file matches the pattern {text!r}")
        else:
            raise InputError(f"input file {text!r} does not exist")
        for p in found:
            files.setdefault(str(p), (p, _named_format(p, format)))
    return files


def _named_format(path: Path, format: str) -> str:
    """The format of a file: the one asked for, or the one its name tells."""
    if format != "auto":
        return format
    detected = detect_format(path)
    if detected is None:
        raise InputError(
            f"cannot tell the format of {str(path)!r} from its name; pass format= one of "
            f"{', '.join(FORMATS)} (known endings: {', '.join(SUFFIXES)})"
        )
    return detected


def _listed(path: Path, format: str) -> bool:
    """Whether a file found in a directory or by a pattern belongs to a source of ``format``."""
    detected = detect_format(path)
    if format == "auto":
        return detected is not None
    if format == "star":  # STAR dialogues are JSONL
        return detected == "jsonl"
    return detected == format


def _wanted(format: str) -> str:
    return "readable" if format == "auto" else format


# ---------------------------------------------------------------------------------- partitions


class _Partition(StatefulSourcePartition[Item, int]):
    """Batches the items of ``_items`` and keeps the resume state of the last one emitted."""

    def __init__(self, path: Path, key: str, resume_state: int | None, options: _Options):
        self._path = path
        self._key = key
        self._options = options
        self._state = int(resume_state or 0)
        self._it = self._items(self._state)

    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        """Yield ``(resume state after this item, item or None)`` from ``start`` on."""
        raise NotImplementedError

    def next_batch(self) -> list[Item]:
        out: list[Item] = []
        consumed = False
        for state, item in islice(self._it, self._options.batch_size):
            consumed = True
            self._state = state
            if item is not None:
                out.append(self._finish(item))
        if not consumed:
            raise StopIteration
        return out

    def snapshot(self) -> int:
        return self._state

    def close(self) -> None:
        self._it.close()  # type: ignore[attr-defined]

    def _finish(self, item: Item) -> Item:
        owner = self._options.owner_id
        if owner and isinstance(item, Message) and item.owner_id != owner:
            return replace(item, owner_id=owner)
        return item

    def _parse(self, record: Any, position: int | str, *, canonical: bool = False) -> Item:
        """Parse a record; ``canonical`` records (from the dataset adapters) skip the mapping."""
        o = self._options
        return parse_record(
            record,
            source=self._key,
            position=position,
            mapping=None if canonical else o.mapping,
            max_chars=o.max_chars,
            redactor=o.redactor,
        )


class _JsonlPartition(_Partition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        if is_gzip(self._path):
            with gzip.open(self._path, "rb") as fh:
                for index, line in enumerate(fh):
                    if index >= start:
                        yield index + 1, self._line(line, index)
            return
        with open(self._path, "rb") as fh:
            fh.seek(start)
            offset = start
            for line in fh:
                item = self._line(line, offset)
                offset += len(line)
                yield offset, item

    def _line(self, raw: bytes, position: int) -> Item | None:
        o = self._options
        return parse_line(
            raw,
            source=self._key,
            position=position,
            mapping=o.mapping,
            max_chars=o.max_chars,
            redactor=o.redactor,
        )


class _ParquetPartition(_Partition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(self._path)
        except Exception as e:  # pyarrow raises ArrowInvalid/OSError for non-Parquet files
            raise InputError(f"{self._key!r} is not a readable Parquet file: {e}") from e
        with pf:
            first_group, index = 0, 0
            for g in range(pf.num_row_groups):
                rows = pf.metadata.row_group(g).num_rows
                if index + rows > start:
                    break
                first_group, index = g + 1, index + rows
            groups = list(range(first_group, pf.num_row_groups))
            if not groups:
                return
            for batch in pf.iter_batches(batch_size=self._options.batch_size, row_groups=groups):
                for row in batch.to_pylist():
                    if index >= start:
                        yield index + 1, self._parse(row, index)
                    index += 1


class _CsvPartition(_Partition):
    """CSV with a header row; every cell is read as text (bytes decoded here, per row)."""

    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        if self._path.stat().st_size == 0:
            return
        bad_rows: list[Any] = []

        def on_bad_row(row: Any) -> str:
            bad_rows.append(row)
            return "skip"

        parse = pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_bad_row)
        read = pacsv.ReadOptions(use_threads=False)
        try:
            names = pacsv.open_csv(self._path, read_options=read, parse_options=parse).schema.names
            bad_rows.clear()
            convert = pacsv.ConvertOptions(
                column_types={n: pa.binary() for n in names}, strings_can_be_null=False
            )
            reader = pacsv.open_csv(
                self._path, read_options=read, parse_options=parse, convert_options=convert
            )
        except pa.ArrowInvalid as e:
            raise InputError(f"{self._key!r} is not a readable CSV file: {e}") from e
        index = 0
        with reader:
            for batch in reader:
                yield from self._bad_rows(bad_rows, index)
                for row in batch.to_pylist():
                    if index >= start:
                        yield index + 1, self._row(row, index)
                    index += 1
        yield from self._bad_rows(bad_rows, index)

    def _bad_rows(self, rows: list[Any], index: int) -> Iterator[tuple[int, Item | None]]:
        # Rows pyarrow could not split are reported again after a resume; their ids repeat.
        while rows:
            row = rows.pop(0)
            reason = (
                f"CSV row has {row.actual_columns} cells; the header has {row.expected_columns}"
            )
            yield (
                max(index, self._state),
                dead_letter(
                    reason,
                    source=self._key,
                    position=f"line:{row.number}",
                    payload=row.text,
                    redactor=self._options.redactor,
                ),
            )

    def _row(self, row: dict[str, bytes | None], index: int) -> Item:
        decoded: dict[str, str | None] = {}
        for name, value in row.items():
            if value is None:
                decoded[name] = None
                continue
            try:
                decoded[name] = value.decode("utf-8")
            except UnicodeDecodeError as e:
                shown = {
                    k: (v.decode("utf-8", errors="replace") if v is not None else None)
                    for k, v in row.items()
                }
                return dead_letter(
                    f"invalid UTF-8 in column {name!r} at byte {e.start}",
                    source=self._key,
                    position=index,
                    payload=json.dumps(shown, ensure_ascii=False),
                    redactor=self._options.redactor,
                )
        return self._parse(decoded, index)


class _LocomoPartition(_Partition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        for position, record in iter_locomo(self._path):
            if position >= start:
                yield position + 1, self._parse(record, position, canonical=True)


class _StarPartition(_Partition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | None]]:
        owner = self._options.owner_id or DEFAULT_OWNER
        for position, record in iter_star(self._path, owner_id=owner):
            if position >= start:
                yield position + 1, self._parse(record, position, canonical=True)


_PARTITIONS: dict[str, type[_Partition]] = {
    "jsonl": _JsonlPartition,
    "parquet": _ParquetPartition,
    "csv": _CsvPartition,
    "locomo": _LocomoPartition,
    "star": _StarPartition,
}
