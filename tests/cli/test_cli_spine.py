"""The CLI on the bundled sample: run, sql, search, stats, and a second run that adds nothing."""

from __future__ import annotations

import json

import lancedb
from click.testing import CliRunner

from skillstream.cli import cli


def invoke(home, *args):
    res = CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_run_sql_search_stats_on_the_sample(tmp_path):
    home = tmp_path / "h"
    out = invoke(home, "run", "--json")
    summary = json.loads(out[out.index("{") :])
    assert (
        summary["messages"] == 34
        and summary["dead_letters"] == 0
        and summary["spans_processed"] > 0
    )

    n_lance = lancedb.connect(str(home / "lancedb")).open_table("memories").count_rows()
    rows = json.loads(invoke(home, "sql", "select count(*) as n from memories", "--json"))
    assert rows == [{"n": n_lance}] and n_lance > 10

    hits = json.loads(
        invoke(home, "search", "Lisbon trip", "--owner", "maya", "--k", "3", "--json")
    )
    assert 0 < len(hits) <= 3
    for h in hits:
        assert h["owner_id"] == "maya" and h["source_message_ids"]
        assert all(m.startswith("trip-maya-") for m in h["source_message_ids"])
        assert {"text", "score", "kind", "event_ts"} <= set(h)

    stats = json.loads(invoke(home, "stats", "--json"))
    assert stats["memories"] == n_lance

    out = invoke(home, "run", "--json")
    again = json.loads(out[out.index("{") :])
    assert again["spans_processed"] == 0
    assert again["spans_already_processed"] == summary["spans_processed"]
    assert lancedb.connect(str(home / "lancedb")).open_table("memories").count_rows() == n_lance


def test_sql_csv_and_errors(tmp_path):
    home = tmp_path / "h"
    res = CliRunner().invoke(cli, ["--home", str(home), "sql", "select 1"])
    assert res.exit_code != 0 and "no catalog" in str(res.exception or res.output)
    invoke(home, "run")
    out = invoke(
        home, "sql", "select kind, count(*) as n from memories group by kind order by kind", "--csv"
    )
    assert out.splitlines()[0] == "kind,n"


def test_config_masks_credentials_in_option_maps(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "SKILLSTREAM_KAFKA_CONFIG",
        json.dumps({"bootstrap.servers": "127.0.0.1:9092", "sasl.password": "pw-do-not-print"}),
    )
    monkeypatch.setenv(
        "SKILLSTREAM_STORAGE_OPTIONS",
        json.dumps({"region": "us-east-1", "aws_secret_access_key": "sk-do-not-print"}),
    )
    out = invoke(tmp_path / "home", "config")
    assert "do-not-print" not in out
    shown = json.loads(out)
    assert shown["kafka_config"] == {"bootstrap.servers": "127.0.0.1:9092", "sasl.password": "***"}
    assert shown["storage_options"] == {"region": "us-east-1", "aws_secret_access_key": "***"}


def test_sql_json_and_csv_carry_decimals_intervals_and_uuids(tmp_path):
    home = tmp_path / "home"
    invoke(home, "run")
    query = (
        "select 0.5 as half, 12.0 as whole, interval 90 minutes as span, "
        "'8b9cad0e-1d4f-4c1a-9a62-2f0f3b5a6c7d'::uuid as uid"
    )
    rows = json.loads(invoke(home, "sql", query, "--json"))
    assert rows == [
        {
            "half": 0.5,
            "whole": 12,
            "span": "P0M0DT5400S",
            "uid": "8b9cad0e-1d4f-4c1a-9a62-2f0f3b5a6c7d",
        }
    ]
    assert (
        invoke(home, "sql", query, "--csv").splitlines()[1]
        == "0.5,12,P0M0DT5400S,8b9cad0e-1d4f-4c1a-9a62-2f0f3b5a6c7d"
    )
