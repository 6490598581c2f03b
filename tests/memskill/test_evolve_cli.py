"""``memory-skills evolve`` with no LLM (the offline designer), then ``eval locomo --controller``
with the bank the checkpoint was trained on, in a fresh home that never saw that bank."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
from click.testing import CliRunner

from skillstream.cli import cli
from skillstream.memskill.controller import checkpoint_meta
from tests.memskill.test_offline_designer import sample


def invoke(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


def test_evolve_offline_then_eval_with_the_checkpoints_bank(tmp_path: Path) -> None:
    data = tmp_path / "news.json"
    data.write_text(json.dumps([sample(k) for k in range(4)]))
    home, ckpt, out = tmp_path / "home", tmp_path / "c.pt", tmp_path / "evolve.json"
    invoke(
        "--home", str(home), "memory-skills", "evolve", "--data", str(data), "--format", "locomo",
        "--train", "conv-0,conv-1", "--val", "conv-2,conv-3", "--out", str(ckpt),
        "--json", str(out), "--cycles", "2", "--updates", "1", "--k", "20",
        "--memory-cost", "0", "--threads", "1",
    )  # fmt: skip
    report = json.loads(out.read_text())
    new = [n for n in report["skills"] if n.startswith("keep-")]
    assert new and report["best_cycle"] == 1
    assert report["cycles"][1]["reward"] > report["cycles"][0]["reward"]
    assert report["lost_to_default"] is None  # so the home's bank takes the new skills
    assert {v.split("@")[0] for v in report["new_versions"]} == set(new)
    # the checkpoint names its whole bank and carries the designer's skills with their examples
    meta = checkpoint_meta(ckpt)
    assert meta["skills"].split(",") == report["skills"]
    carried = {r["name"]: r for r in json.loads(meta["bank"])}
    assert set(carried) == set(new)
    assert all(r["offline"]["prototypes"] for r in carried.values())
    # the evolving home's bank holds them too (source designer)
    listed = json.loads(invoke("--home", str(home), "memory-skills", "list", "--json"))
    assert set(new) <= {r["name"] for r in listed}

    work, details = tmp_path / "eval", tmp_path / "details.jsonl"
    invoke(
        "--home", str(tmp_path / "other"), "eval", "locomo", str(data), "--controller", str(ckpt),
        "--samples", "conv-2", "--baseline", "none", "--work-dir", str(work),
        "--details", str(details), "--json", str(tmp_path / "eval.json"),
    )  # fmt: skip
    catalogs = list(work.rglob("catalog.duckdb"))
    assert catalogs
    con = duckdb.connect(str(catalogs[0]), read_only=True)
    try:
        rows = con.sql("SELECT memory_skills FROM spans").fetchall()
        used = {n for (names,) in rows for n in names}
    finally:
        con.close()
    assert set(new) & used  # the controller selected from the checkpoint's bank
    questions = [json.loads(line) for line in details.read_text().splitlines()]
    news = [q for q in questions if "move to" in q["question"]]
    assert news and all(q["ours"]["recall@10"] == 1.0 for q in news)
    # the same conversation without the checkpoint: the rules alone never store the news
    invoke(
        "--home", str(tmp_path / "plain"), "eval", "locomo", str(data), "--samples", "conv-2",
        "--baseline", "none", "--details", str(tmp_path / "plain.jsonl"),
    )  # fmt: skip
    plain = [json.loads(line) for line in (tmp_path / "plain.jsonl").read_text().splitlines()]
    assert all(q["ours"]["recall@10"] == 0.0 for q in plain if "move to" in q["question"])
    # activating the checkpoint in a home that never saw its bank adds the carried skills
    fresh = tmp_path / "fresh"
    got = json.loads(invoke("--home", str(fresh), "memory-skills", "activate", str(ckpt)))
    assert set(new) <= set(got["added_skills"])
    shown = json.loads(invoke("--home", str(fresh), "memory-skills", "show", new[0], "--json"))
    assert shown["offline"]["prototypes"] == carried[new[0]]["offline"]["prototypes"]
