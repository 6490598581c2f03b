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
chatgpt,       0-based index of the message in the file (see ``connectors.exports``)
claude
json           a JSON document told by its content: a LoCoMo file, a ChatGPT or a Claude export
=============  ==================================================================================

Paths may be local or any fsspec URI (``s3://bucket/logs/*.jsonl.gz``, ``oss://...``); remote
files are listed and read through fsspec with the source's ``storage_options``.

A file that cannot be read (not Parquet, not CSV, not JSON of a known shape, a truncated gzip
stream) is one dead letter at position ``"file"`` that names the file and the cause; the items
read before the failure are kept, and the other files are read as usual.

Files are read once, to their end: a file that is still being written to is not followed.
Delivery: resuming from a snapshot re-reads nothing before it, so with Bytewax recovery items are
emitted at least once (the items after the last snapshot may come again); ids are deterministic,
so an upserting sink collapses the repeats.
"""

from __future__ import annotations

import glob
import gzip
import json
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from itertools import islice
from pathlib import Path
from typing import Any

from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition

from skillstream.connectors.exports import iter_chatgpt, iter_claude, kind_of_export, load_document
from skillstream.connectors.fileio import InputFile, open_binary
from skillstream.connectors.locomo import iter_locomo
from skillstream.connectors.records import (
    CANONICAL_FIELDS,
    Refused,
    dead_letter,
    parse_line,
    parse_record,
)
from skillstream.connectors.star import DEFAULT_OWNER, iter_star
from skillstream.errors import InputError
from skillstream.model import DeadLetter, Message
from skillstream.redact import DEFAULT_REDACTOR, Redactor
from skillstream.settings import is_remote, local_path

Item = Message | DeadLetter
"""What a file source emits."""

FORMATS = ("jsonl", "parquet", "csv", "locomo", "star", "chatgpt", "claude", "json")

SUFFIXES: dict[str, str] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".jsonl.gz": "jsonl",
    ".ndjson.gz": "jsonl",
    ".parquet": "parquet",
    ".csv": "csv",
    ".json": "json",
}
"""File-name endings that ``format="auto"`` recognises, and the format each one means."""

_GLOB_CHARS = set("*?[")
_JSON_FORMATS = ("locomo", "chatgpt", "claude", "json")
FILE_POSITION = "file"
"""The position of the dead letter of a file that cannot be read."""


def detect_format(path: str | Path) -> str | None:
    """The format ``auto`` picks for a file name, or ``None`` when its ending is unknown."""
    text = str(path)
    if "://" in text:  # a URL's query is not part of the name (``a.jsonl?X-Amz-Signature=...``)
        text = text.split("?", 1)[0]
    name = text.rstrip("/").rsplit("/", 1)[-1].lower()
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
    fmt: str = ""


class FileSource(FixedPartitionedSource[Item, int]):
    """Read chat messages from files, one partition per file.

    Each file is read by exactly one worker, so messages of one file keep their order; files are
    spread over the workers. Every item is a ``Message`` or a ``DeadLetter``: a bad line or row
    never stops the flow.

    Example (in a dataflow ``flow`` of your own)::

        items = op.input("in", flow, FileSource("chats/"))
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
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        """Check the settings and find the files.

        Args:
            paths: A file, a directory (its files whose endings fit ``format``, sorted, not
                recursive), a glob pattern (``logs/**/*.jsonl``), or a list of these; local
                or fsspec URIs (``s3://bucket/logs/*.jsonl.gz``).
            format: ``auto`` (by file ending, see ``SUFFIXES``), ``jsonl``, ``parquet``,
                ``csv``, ``locomo``, ``star``, ``chatgpt``, ``claude`` or ``json`` (a JSON
                document of one of the three shapes, told by its content).
            mapping: Canonical field -> input column, for JSONL, Parquet and CSV (see
                ``connectors.records.parse_record``).
            batch_size: Items read per ``next_batch`` call.
            max_chars: Longest accepted message, in characters.
            redactor: Sensitive-data rules applied before anything leaves the source.
            owner_id: When set, the owner of every message (it overrides ``user_id``). STAR
                files default to ``"star"``.
            storage_options: Options of remote files (the LanceDB-style dict of
                ``Settings.storage_options``; see ``storage.options``).

        Raises:
            InputError: A path does not exist, a directory or pattern matches no file, a file's
                format cannot be told from its name, ``mapping`` names a field that is not a
                canonical one, or an argument is out of range.
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
        unknown = sorted(set(mapping or ()) - set(CANONICAL_FIELDS))
        if unknown:
            raise InputError(
                f"cannot map {', '.join(repr(f) for f in unknown)}: a mapping goes from a "
                f"canonical field to an input column (FIELD=COLUMN), and the fields are "
                f"{', '.join(CANONICAL_FIELDS)}"
            )
        given = list(paths) if isinstance(paths, (list, tuple)) else [paths]
        if not given:
            raise InputError("no input paths given; pass a file, a directory or a glob pattern")
        self._files = _expand(given, format, dict(storage_options or {}))
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
        return [key for key, (file, _) in self._files.items() if file.exists()]

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
        file, fmt = self._files[for_part]
        return _PARTITIONS[fmt](file, for_part, resume_state, replace(self._options, fmt=fmt))


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


def _expand(
    paths: list[str | Path], format: str, storage_options: dict[str, Any]
) -> dict[str, tuple[InputFile, str]]:
    files: dict[str, tuple[InputFile, str]] = {}
    for given in paths:
        text = str(given)
        found = _remote(text, format, storage_options) if is_remote(text) else _local(text, format)
        for f in found:
            files.setdefault(f.key, (f, _named_format(f.key, format)))
    return files


def _local(text: str, format: str) -> list[InputFile]:
    text = str(local_path(text))
    path = Path(text)
    if path.is_dir():
        found = sorted(p for p in path.iterdir() if p.is_file() and _listed(p.name, format))
        if not found:
            raise InputError(f"directory {_shown(text)!r} holds no {_wanted(format)} file")
    elif path.exists():
        found = [path]
    elif _GLOB_CHARS & set(text):
        found = sorted(Path(p) for p in glob.glob(text, recursive=True) if Path(p).is_file())
        found = [p for p in found if _listed(p.name, format)]
        if not found:
            raise InputError(f"no {_wanted(format)} file matches the pattern {_shown(text)!r}")
    else:
        raise InputError(f"input file {_shown(text)!r} does not exist")
    return [InputFile.local(p) for p in found]


def _remote(text: str, format: str, storage_options: dict[str, Any]) -> list[InputFile]:
    import fsspec

    from skillstream.storage.options import fsspec_options

    shown = _shown(text)
    try:
        fs, root = fsspec.core.url_to_fs(text, **fsspec_options(text, storage_options))
    except (ImportError, ValueError) as e:
        raise InputError(_shown(f"cannot open {shown!r}: {e}")) from e
    try:
        # a file that exists is read as named: a URL's query (``?X-Amz-Signature=...``) is no glob
        if fs.exists(root) and fs.isfile(root):
            found = [root]
        elif _GLOB_CHARS & set(root):
            found = [p for p in sorted(fs.glob(root)) if fs.isfile(p) and _listed(p, format)]
            if not found:
                raise InputError(f"no {_wanted(format)} file matches the pattern {shown!r}")
        elif fs.isdir(root):
            found = sorted(
                d["name"]
                for d in fs.ls(root, detail=True)
                if d.get("type") == "file" and _listed(d["name"], format)
            )
            if not found:
                raise InputError(f"folder {shown!r} holds no {_wanted(format)} file")
        elif fs.exists(root):
            found = [root]
        else:
            raise InputError(f"input file {shown!r} does not exist")
    except (PermissionError, ConnectionError, OSError) as e:
        raise InputError(_shown(f"cannot list {shown!r}: {e}")) from e
    return [InputFile(key=fs.unstrip_protocol(p), path=p, fs=fs) for p in found]


def _shown(text: str) -> str:
    """``text`` as it may be shown in an error: a URI's password, signature or token redacted."""
    return DEFAULT_REDACTOR.apply(text)[0]


def _named_format(path: str, format: str) -> str:
    """The format of a file: the one asked for, or the one its name tells."""
    if format != "auto":
        return format
    detected = detect_format(path)
    if detected is None:
        raise InputError(
            f"cannot tell the format of {_shown(path)!r} from its name; pass format= one of "
            f"{', '.join(FORMATS)} (known endings: {', '.join(SUFFIXES)})"
        )
    return detected


def _listed(path: str, format: str) -> bool:
    """Whether a file found in a directory or by a pattern belongs to a source of ``format``."""
    detected = detect_format(path)
    if format == "auto":
        return detected is not None
    if format == "star":  # STAR dialogues are JSONL
        return detected == "jsonl"
    if format in _JSON_FORMATS:
        return detected == "json"
    return detected == format


def _wanted(format: str) -> str:
    return "readable" if format == "auto" else format


# ---------------------------------------------------------------------------------- partitions


_UNREADABLE: tuple[type[BaseException], ...] = (
    InputError,
    OSError,  # also pyarrow's ArrowIOError and gzip's BadGzipFile
    EOFError,  # a truncated gzip stream
    ValueError,  # also pyarrow's ArrowInvalid and json's JSONDecodeError
    zlib.error,
)
"""Errors that mean a file cannot be read (any more). A partition turns these, and any other error
its file raises, into one dead letter for the file: no file ends the run."""


class _Partition(StatefulSourcePartition[Item, int]):
    """Batches the items of ``_items`` and keeps the resume state of the last one emitted.

    When reading the file fails, the partition emits one dead letter for the file (position
    ``FILE_POSITION``) after the items read so far, and ends.
    """

    def __init__(self, file: InputFile, key: str, resume_state: int | None, options: _Options):
        self._file = file
        self._key = key
        self._options = options
        self._state = int(resume_state or 0)
        self._it = self._items(self._state)
        self._done = False

    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        """Yield ``(resume state after this item, item or None)`` from ``start`` on."""
        raise NotImplementedError

    def next_batch(self) -> list[Item]:
        if self._done:
            raise StopIteration
        out: list[Item] = []
        consumed = False
        try:
            for state, item in islice(self._it, self._options.batch_size):
                consumed = True
                self._state = state
                if isinstance(item, Refused):
                    out.append(
                        item.dead_letter(
                            source=self._key, position=state - 1, redactor=self._options.redactor
                        )
                    )
                elif item is not None:
                    out.append(self._finish(item))
        except Exception as e:  # noqa: BLE001 - whatever one file raises, the run goes on
            self._done = True
            out.append(self._unreadable(e))
            return out
        if not consumed:
            raise StopIteration
        return out

    def _unreadable(self, error: BaseException) -> DeadLetter:
        what = self._options.fmt or "input"
        where = f" (stopped after position {self._state})" if self._state else ""
        cause = str(error) or type(error).__name__
        return dead_letter(
            f"cannot read {what} file {self._key!r}{where}: {cause}",
            source=self._key,
            position=FILE_POSITION,
            payload=None,
            stage="read",
            redactor=self._options.redactor,
        )

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
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        with open_binary(self._file) as fh:
            if isinstance(fh, gzip.GzipFile):  # gzip: positions are line numbers
                for index, line in enumerate(fh):
                    if index >= start:
                        yield index + 1, self._line(line, index)
                return
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
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        import pyarrow.parquet as pq

        local = self._file.local_path
        raw = None if local is not None else self._file.open_raw()
        try:
            try:
                pf = pq.ParquetFile(local if local is not None else raw)
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
                for batch in pf.iter_batches(
                    batch_size=self._options.batch_size, row_groups=groups
                ):
                    for row in batch_rows(batch):
                        if index >= start:
                            yield (
                                index + 1,
                                (row if isinstance(row, Refused) else self._parse(row, index)),
                            )
                        index += 1
        finally:
            if raw is not None:
                raw.close()


def batch_rows(batch: Any) -> list[dict[str, Any] | Refused]:
    """The rows of an Arrow record batch as dicts; a row holding a value Python cannot hold is
    ``Refused``, naming the column, while the other rows are kept.

    Timestamps finer than microseconds are cut to microseconds (a Python ``datetime`` holds no
    nanoseconds). A timestamp or date beyond year 9999, a decimal or an odd extension value that
    does not convert is refused with its row, never with its file or the run.
    """
    import pyarrow as pa

    columns = []
    for field, column in zip(batch.schema, batch.columns, strict=True):
        if pa.types.is_timestamp(field.type) and field.type.unit == "ns":
            column = column.cast(pa.timestamp("us", field.type.tz), safe=False)
        try:
            columns.append(column.to_pylist())
        except _CONVERSION_ERRORS:
            columns.append([_value(column, i, field.name) for i in range(len(column))])
    names = batch.schema.names
    rows: list[dict[str, Any] | Refused] = []
    for values in zip(*columns, strict=True) if columns else ({} for _ in range(batch.num_rows)):
        bad = [v for v in values if isinstance(v, Refused)]
        rows.append(bad[0] if bad else dict(zip(names, values, strict=True)))
    return rows


_CONVERSION_ERRORS: tuple[type[BaseException], ...] = (
    OverflowError,
    ValueError,  # also pyarrow's ArrowInvalid
    ArithmeticError,
    TypeError,
    NotImplementedError,  # also pyarrow's ArrowNotImplementedError
)


def _value(column: Any, i: int, name: str) -> Any:
    try:
        return column[i].as_py()
    except _CONVERSION_ERRORS as e:
        why = f"{type(e).__name__}: {e}"
        return Refused(f"column {name!r} holds a value that cannot be read: {why}")


class _CsvPartition(_Partition):
    """CSV with a header row; every cell is read as text (bytes decoded here, per row)."""

    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        import pyarrow as pa

        if self._file.size() == 0:
            return
        try:
            yield from self._arrow_items(start)
        except (pa.ArrowInvalid, InputError):
            # pyarrow stops at a row it cannot split whose bytes are not UTF-8 (it decodes the row
            # for its handler and fails there): read the rest row by row instead
            yield from self._python_items(max(start, self._state))

    def _python_items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        """The rows from data row ``start`` on, read with Python's ``csv``; a row whose cell count
        is not the header's is a dead letter, as pyarrow's reader makes it."""
        import csv
        import io

        with open_binary(self._file) as fh:
            text = io.TextIOWrapper(fh, encoding="utf-8", errors="surrogateescape", newline="")
            reader = csv.reader(text)
            header = next(reader, None)
            if header is None:
                return
            index = 0
            for cells in reader:
                if not cells:
                    continue
                if len(cells) != len(header):
                    shown = ",".join(cells).encode("utf-8", "surrogateescape")
                    reason = f"CSV row has {len(cells)} cells; the header has {len(header)}"
                    yield (
                        max(index, self._state),
                        dead_letter(
                            reason,
                            source=self._key,
                            position=f"line:{reader.line_num}",
                            payload=shown.decode("utf-8", errors="replace"),
                            redactor=self._options.redactor,
                        ),
                    )
                    continue
                if index >= start:
                    row: dict[str, bytes | None] = {
                        name: value.encode("utf-8", "surrogateescape")
                        for name, value in zip(header, cells, strict=True)
                    }
                    yield index + 1, self._row(row, index)
                index += 1

    def _arrow_items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        import pyarrow as pa
        import pyarrow.csv as pacsv

        bad_rows: list[Any] = []

        def on_bad_row(row: Any) -> str:
            bad_rows.append(row)
            return "skip"

        parse = pacsv.ParseOptions(newlines_in_values=True, invalid_row_handler=on_bad_row)
        read = pacsv.ReadOptions(use_threads=False)
        local = self._file.local_path
        with (
            open(local, "rb") if local is not None else self._file.open_raw() as head,
            open(local, "rb") if local is not None else self._file.open_raw() as body,
        ):
            try:
                names = pacsv.open_csv(head, read_options=read, parse_options=parse).schema.names
                bad_rows.clear()
                convert = pacsv.ConvertOptions(
                    column_types={n: pa.binary() for n in names}, strings_can_be_null=False
                )
                reader = pacsv.open_csv(
                    body, read_options=read, parse_options=parse, convert_options=convert
                )
            except pa.ArrowInvalid as e:
                raise InputError(f"{self._key!r} is not a readable CSV file: {e}") from e
            yield from self._rows(reader, bad_rows, start)

    def _rows(
        self, reader: Any, bad_rows: list[Any], start: int
    ) -> Iterator[tuple[int, Item | Refused | None]]:
        index = 0
        with reader:
            for batch in reader:
                yield from self._bad_rows(bad_rows, index)
                for row in batch.to_pylist():
                    if index >= start:
                        yield index + 1, self._row(row, index)
                    index += 1
        yield from self._bad_rows(bad_rows, index)

    def _bad_rows(self, rows: list[Any], index: int) -> Iterator[tuple[int, Item | Refused | None]]:
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
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        yield from self._records(iter_locomo(self._file), start)

    def _records(
        self, records: Iterator[tuple[int, dict[str, Any] | Refused]], start: int
    ) -> Iterator[tuple[int, Item | Refused | None]]:
        for position, record in records:
            if position >= start:
                if isinstance(record, Refused):
                    yield position + 1, record
                else:
                    yield position + 1, self._parse(record, position, canonical=True)


class _StarPartition(_LocomoPartition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        owner = self._options.owner_id or DEFAULT_OWNER
        yield from self._records(iter_star(self._file, owner_id=owner), start)


class _ChatgptPartition(_LocomoPartition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        yield from self._records(iter_chatgpt(self._file), start)


class _ClaudePartition(_LocomoPartition):
    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        yield from self._records(iter_claude(self._file), start)


class _JsonPartition(_LocomoPartition):
    """A JSON document whose shape tells its format: LoCoMo, a ChatGPT or a Claude export."""

    def _items(self, start: int) -> Iterator[tuple[int, Item | Refused | None]]:
        data = load_document(self._file, "JSON")
        kind = kind_of_export(data)
        if kind == "chatgpt":
            records = iter_chatgpt(self._file, data)
        elif kind == "claude":
            records = iter_claude(self._file, data)
        elif kind == "locomo":
            records = iter_locomo(self._file, data)
        else:
            raise InputError(
                f"{self._key!r} is not a chat log: expected a LoCoMo file (samples with "
                "'sample_id' and 'conversation'), a ChatGPT export (conversations with "
                "'mapping') or a Claude export (conversations with 'chat_messages')"
            )
        yield from self._records(records, start)


_PARTITIONS: dict[str, type[_Partition]] = {
    "jsonl": _JsonlPartition,
    "parquet": _ParquetPartition,
    "csv": _CsvPartition,
    "locomo": _LocomoPartition,
    "star": _StarPartition,
    "chatgpt": _ChatgptPartition,
    "claude": _ClaudePartition,
    "json": _JsonPartition,
}
