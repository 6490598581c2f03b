"""Reading Parquet and CSV chat logs: the file source's pyarrow path against Polars.

    python benchmarks/source_read.py --rows 200000 --json /tmp/source_read.json

Writes ``--rows`` synthetic chat messages as Parquet and CSV into a temporary folder, then times,
for each format, the best of ``--repeat`` runs of:

- ``decode``: the file into Python row dicts, the step the two libraries differ in (pyarrow:
  ``ParquetFile.iter_batches`` / ``csv.open_csv`` with ``RecordBatch.to_pylist``, as the file source
  does; Polars: ``read_parquet`` / ``read_csv`` with every column as text, then ``iter_rows``);
- ``source``: the whole file source (``read_all(FileSource(...))``: decoding plus validation into
  ``Message`` values), which is what a run pays.

``decode_ratio`` is pyarrow's time over Polars' (above 1: Polars decodes faster) and
``decode_share`` the part of the whole source's time that decoding takes with pyarrow: the most a
faster decoder could save. Results go to ``--json`` (and are printed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any


def rows(n: int) -> list[dict[str, Any]]:
    t0 = datetime(2024, 5, 8, 13, 56, tzinfo=UTC)
    return [
        {
            "conversation_id": f"c{i // 200}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i}: I am planning a trip to Kyoto next month with my sister.",
            "timestamp": (t0 + timedelta(seconds=30 * i)).isoformat(),
            "message_id": f"m{i}",
        }
        for i in range(n)
    ]


def best(fn: Callable[[], int], repeat: int) -> tuple[float, int]:
    times, count = [], 0
    for _ in range(repeat):
        t = time.perf_counter()
        count = fn()
        times.append(time.perf_counter() - t)
    return min(times), count


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", default=None, help="Write the results here.")
    args = p.parse_args(argv)

    import polars as pl
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from skillstream.connectors.files import FileSource, read_all

    data = rows(args.rows)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        pq_path, csv_path = Path(tmp) / "chat.parquet", Path(tmp) / "chat.csv"
        table = pa.Table.from_pylist(data)
        pq.write_table(table, pq_path, row_group_size=10_000)
        pacsv.write_csv(table, csv_path)

        def arrow_parquet() -> int:
            pf = pq.ParquetFile(pq_path)
            return sum(len(b.to_pylist()) for b in pf.iter_batches(batch_size=500))

        def polars_parquet() -> int:
            return sum(1 for _ in pl.read_parquet(pq_path).iter_rows(named=True))

        def arrow_csv() -> int:
            names = table.column_names
            convert = pacsv.ConvertOptions(column_types={n: pa.binary() for n in names})
            reader = pacsv.open_csv(csv_path, convert_options=convert)
            return sum(len(b.to_pylist()) for b in reader)

        def polars_csv() -> int:
            frame = pl.read_csv(csv_path, infer_schema=False)
            return sum(1 for _ in frame.iter_rows(named=True))

        for fmt, path, arrow, polars in (
            ("parquet", pq_path, arrow_parquet, polars_parquet),
            ("csv", csv_path, arrow_csv, polars_csv),
        ):
            t_arrow, n_arrow = best(arrow, args.repeat)
            t_polars, n_polars = best(polars, args.repeat)

            def whole(path: Path = path) -> int:
                return len(read_all(FileSource(path)))

            t_source, n_source = best(whole, args.repeat)
            assert n_arrow == n_polars == n_source == args.rows
            results[fmt] = {
                "pyarrow_decode_s": round(t_arrow, 4),
                "polars_decode_s": round(t_polars, 4),
                "decode_ratio": round(t_arrow / t_polars, 3),
                "source_s": round(t_source, 4),
                "source_rows_per_s": round(args.rows / t_source),
                "decode_share": round(t_arrow / t_source, 3),
            }
    out = {
        "benchmark": "source_read",
        "rows": args.rows,
        "repeat": args.repeat,
        "results": results,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "polars": pl.__version__,
        "pyarrow": pa.__version__,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(out, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n", encoding="utf-8")
    print(text)
    return out


if __name__ == "__main__":
    main()
