"""docs/settings.md is generated from the declarations, and the defaults it shows are the ones
``Settings`` uses."""

from __future__ import annotations

from pathlib import Path

from skillstream.settings import GROUPS, KEYS, Settings, default_text, env_var, settings_markdown

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "settings.md"


def test_the_committed_settings_doc_is_what_the_declarations_generate():
    assert DOC.read_text(encoding="utf-8") == settings_markdown(), (
        "docs/settings.md is out of date: run `python scripts/settings_doc.py` (make docs)"
    )


def test_the_doc_lists_every_key_with_its_variable_and_default():
    text = settings_markdown()
    for key in KEYS:
        row = f"| `{key}` | `{env_var(key)}` | `{default_text(key)}` |"
        assert row in text, key


def test_a_shown_default_is_a_real_default():
    defaults = Settings.from_keys(home="/h").keys()
    for key, (group, name) in KEYS.items():
        info = GROUPS[group].model_fields[name]
        shown = default_text(key)
        value = defaults[key]
        if key == "home":
            continue
        if isinstance(info.json_schema_extra, dict) and "shown_default" in info.json_schema_extra:
            assert value in ("", {}), key  # a stand-in: resolved from the home, or the defaults
        elif isinstance(value, bool):
            assert shown == str(value).lower(), key
        elif isinstance(value, int | float):
            assert float(shown.split()[0]) == value, key
        elif isinstance(value, dict):
            assert shown == "none" and value == {}, key
        else:
            assert shown == (value or "empty"), key
    storage = Settings.from_keys(home="/h").storage
    assert (storage.lancedb, storage.catalog, storage.artifacts, storage.skills) == (
        "/h/lancedb",
        "/h/catalog.duckdb",
        "/h/artifacts",
        "/h/artifacts/task-skills",
    )


def test_config_doc_prints_the_doc():
    from click.testing import CliRunner

    from skillstream.cli import cli

    out = CliRunner().invoke(cli, ["config", "--doc"])
    assert out.exit_code == 0 and out.output == settings_markdown()


def test_the_script_writes_the_doc(tmp_path):
    import runpy

    script = runpy.run_path(str(ROOT / "scripts" / "settings_doc.py"))
    target = tmp_path / "settings.md"
    script["main"](target)
    assert target.read_text(encoding="utf-8") == settings_markdown()
