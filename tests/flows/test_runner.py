"""The runner is the one owner of a run on a home: the CLI, the API and ``get_flow`` go through it,
admit the same messages, take the same lock, count per run and give the same ids."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from bytewax.testing import run_main
from click.testing import CliRunner

import skillstream
from skillstream.cli import cli
from skillstream.flows.memory import default_sample, get_flow
from skillstream.flows.progress import Counters
from skillstream.flows.runner import Runner
from skillstream.storage.catalog import Catalog
from tests.factories import conversation_rows, write_jsonl

pytestmark = pytest.mark.slow

PACKAGE = Path(skillstream.__file__).resolve().parent
ROOT = PACKAGE.parent
SOURCES = [ROOT / "skillstream", ROOT / "flows", ROOT / "connectors", ROOT / "storage"]


def _modules() -> list[Path]:
    return sorted(p for folder in SOURCES for p in folder.rglob("*.py") if p.is_file())


def _rows(home: Path, sql: str) -> list[dict]:
    with Catalog(str(home / "catalog.duckdb"), read_only=True) as cat:
        return cat.sql(sql).to_pylist()


def _ids(home: Path) -> list[tuple]:
    return [
        (r["id"], r["version"], r["text"])
        for r in _rows(home, "select id, version, text from memory_meta order by id")
    ]


def test_only_the_flow_builder_makes_a_dataflow():
    makers = sorted(
        str(p.relative_to(ROOT)) for p in _modules() if "Dataflow(" in p.read_text("utf-8")
    )
    assert makers == ["flows/memory.py"]


def test_no_module_holds_mutable_state_at_module_level():
    """A module-level name bound to a mutable container or counter, other than constants in
    upper case (tables of words, patterns), is run state two runs in one process would share."""
    mutable = ("Counter", "dict", "list", "set", "defaultdict", "deque")
    found = []
    for path in _modules():
        tree = ast.parse(path.read_text("utf-8"))
        for node in tree.body:
            targets = []
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            if not names or all(n.isupper() or n == "__all__" for n in names):
                continue
            call = isinstance(value, ast.Call) and getattr(value.func, "id", "") in mutable
            if call or isinstance(value, ast.Dict | ast.List | ast.Set):
                found.append(f"{path.relative_to(ROOT)}: {', '.join(names)}")
    assert found == []


def test_two_runs_in_one_process_count_apart(tmp_path):
    src = write_jsonl(tmp_path / "c.jsonl", conversation_rows("c1", 20))
    a = Runner(skillstream.open(tmp_path / "a").settings)
    b = Runner(skillstream.open(tmp_path / "b").settings)
    run_main(a.dataflow(a.source(str(src))))
    assert b.counters.snapshot() == {}
    run_main(b.dataflow(b.source(str(src))))
    assert a.counters.snapshot()["messages"] == b.counters.snapshot()["messages"] == 20
    assert isinstance(a.counters, Counters) and a.counters is not b.counters


def _admission_rows() -> list[dict]:
    rows = conversation_rows("c1", 6)
    future = dict(rows[2], message_id="m-future", timestamp="2999-01-01T00:00:00Z")
    twin = dict(rows[1], content="the same id with other words")  # a duplicate id
    return [*rows, future, twin]


def _unclocked(reason: str) -> str:
    """A refusal's reason without the wall-clock limit it names (the runs are seconds apart)."""
    return re.sub(r"\(limit [^,]*,", "(limit ...,", reason)


def _without_clock(rows: list[dict]) -> list[dict]:
    return [dict(r, reason=_unclocked(r["reason"])) for r in rows]


def test_add_refuses_what_run_refuses(tmp_path):
    """Far-future timestamps and a duplicate id with other content are dead letters with the same
    reasons through ``add`` as through ``run`` (and the memories are the same)."""
    rows = _admission_rows()
    src = write_jsonl(tmp_path / "c.jsonl", rows)
    ran = skillstream.open(tmp_path / "run")
    ran.run(src)
    added = skillstream.open(tmp_path / "add")
    out = added.add(rows)
    added.flush()
    query = "select stage, reason from dead_letters order by reason"
    want = _rows(tmp_path / "run", query)
    assert len(want) == 2
    assert any("after the wall clock" in r["reason"] for r in want)
    assert _without_clock(_rows(tmp_path / "add", query)) == _without_clock(want)
    assert out.dead_letters == 2
    assert sorted(map(_unclocked, out.refused)) == sorted(_unclocked(r["reason"]) for r in want)
    assert out.messages == len(rows) - 2
    assert _ids(tmp_path / "add") == _ids(tmp_path / "run")


def test_cli_api_and_get_flow_give_the_same_ids(tmp_path):
    src = str(default_sample() / "trip-maya.jsonl")
    result = CliRunner().invoke(cli, ["--home", str(tmp_path / "cli"), "run", "--source", src])
    assert result.exit_code == 0, result.output
    skillstream.open(tmp_path / "api").run(src)
    run_main(get_flow(src, home=str(tmp_path / "flow")))
    cli_ids = _ids(tmp_path / "cli")
    assert cli_ids and _ids(tmp_path / "api") == cli_ids == _ids(tmp_path / "flow")


def test_add_reads_only_its_owners(tmp_path):
    """An ``add`` reads and reconciles the ledger and tombstones of its messages' owners alone."""
    home = skillstream.open(tmp_path / "home")
    home.add([dict(r, user_id="ann") for r in conversation_rows("c1", 10)])
    home.flush()
    runner = Runner(home.settings, owners=["bob"])
    read = runner.read_home()
    assert read.done_spans == frozenset()
    everyone = Runner(home.settings).read_home()
    assert everyone.done_spans and len(everyone.done_spans) > 0


HOLD = textwrap.dedent(
    """
    import sys, time
    import skillstream
    from skillstream.flows import runner as r

    home = skillstream.open(sys.argv[1])
    original = r.Runner.execute

    def slow(self, flow):
        print("running", flush=True)
        time.sleep(float(sys.argv[3]))
        original(self, flow)

    r.Runner.execute = slow
    try:
        print(json.dumps(home.run(sys.argv[2])))
    except Exception as e:
        print(type(e).__name__, e)
        sys.exit(2)
    """
).replace("import sys, time", "import json, sys, time")


def test_two_runs_on_one_home_from_two_processes(tmp_path):
    """The API takes the home's run lock as the CLI does: the second process is refused."""
    src = write_jsonl(tmp_path / "c.jsonl", conversation_rows("c1", 10))
    script = tmp_path / "hold.py"
    script.write_text(HOLD)
    home = str(tmp_path / "home")
    first = subprocess.Popen(
        [sys.executable, str(script), home, str(src), "20"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "running"
        second = subprocess.run(
            [sys.executable, str(script), home, str(src), "0"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )
        assert second.returncode == 2, second.stdout + second.stderr
        assert "HomeBusyError" in second.stdout and "in use by another run" in second.stdout
    finally:
        out, _ = first.communicate(timeout=300)
    assert first.returncode == 0
    assert json.loads(out.strip().splitlines()[-1])["messages"] == 10


def test_get_flow_under_bytewax_run_prints_the_summary(tmp_path):
    src = write_jsonl(tmp_path / "chat.jsonl", conversation_rows("ana", 6))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKILLSTREAM_")}
    env.update(SKILLSTREAM_HOME=str(tmp_path / "h"), PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-m", "bytewax.run", f"skillstream.flows.memory:get_flow({str(src)!r})"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    [line] = [line for line in proc.stderr.splitlines() if line.startswith("skillstream: ")]
    assert line.startswith("skillstream: read 6 messages (0 dead letters); spans: ")
    assert line.endswith(f"home {tmp_path / 'h'}")
