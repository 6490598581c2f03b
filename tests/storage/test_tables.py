"""Every table is declared once, and every row class of a result has its table."""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path

from skillstream import model, tables
from skillstream.storage import task_skills as store

GOLDEN = Path(__file__).parents[1] / "golden" / "declarations" / "arrow_schemas.json"


def schema_doc(schema):
    return {
        "fields": [[f.name, str(f.type), f.nullable] for f in schema],
        "metadata": {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()},
    }


def test_schemas_are_those_of_before():
    """Names, types, nullability, order, key and description, as the code had them spread out."""
    want = json.loads(GOLDEN.read_text())
    got = {name: schema_doc(s) for name, s in tables.CATALOG_TABLES.items()}
    got["lance:task_skills:4"] = schema_doc(store.lance_schema(4))
    got["lance:memories:4"] = schema_doc(tables.memories_lance(4))
    assert got == want


def test_every_row_type_of_a_result_has_its_table():
    hints = typing.get_type_hints(model.TableRows)
    for f in dataclasses.fields(model.TableRows):
        (row_type,) = typing.get_args(hints[f.name])
        table = tables.ROW_TABLES[row_type]
        assert table == f.name
        names = [x.name for x in dataclasses.fields(row_type)]
        assert names == tables.CATALOG_TABLES[table].names


def test_row_classes_are_their_tables_columns():
    for table in tables.CATALOG:
        if table.row is not None:
            assert [f.name for f in dataclasses.fields(table.row)] == table.schema.names
            assert tables.ROW_TABLES[table.row] == table.name


def test_rows_of_a_table_know_it():
    row = model.QueryRow(query_id="q", query="tea", strategy="hybrid")
    assert tables.table_of(row) == "queries"
    assert model.QueryRow.from_row({**dataclasses.asdict(row), "other": 1}) == row
