"""Every setting, driven by its own declaration: bad values of its type are refused from each source
(an explicit key, the environment, the TOML file) with a message naming the setting as it was
written and the values it accepts; a good value of its type is read the same from each source.

The kinds (boolean, integer, number, duration in seconds, choice, JSON object, location, URL,
free text) and the bounds come from ``skillstream.settings.GROUPS``, so a setting added later is
covered without touching this file.
"""

from __future__ import annotations

import json
import math
from typing import Any, Literal, get_args, get_origin

import pytest

from skillstream.errors import ConfigError
from skillstream.settings import (
    GROUPS,
    KEYS,
    LOCATION_ACCEPTED,
    URL_ACCEPTED,
    Settings,
    accepted,
    env_var,
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in KEYS:
        monkeypatch.delenv(env_var(key), raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _info(key: str):
    group, name = KEYS[key]
    return GROUPS[group].model_fields[name]


def _bounds(key: str) -> dict[str, float]:
    out = {}
    for m in _info(key).metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if getattr(m, attr, None) is not None:
                out[attr] = getattr(m, attr)
    return out


def kind(key: str) -> str:
    """The kind of a setting, read from its declaration."""
    annotation = _info(key).annotation
    words = accepted(key)
    if words.startswith("PORT, HOST:PORT"):
        return "address"
    if "model -> {input, output}" in words:
        return "prices"
    if annotation is bool:
        return "bool"
    if get_origin(annotation) is Literal:
        return "choice"
    if annotation is dict or get_origin(annotation) is dict:
        return "map"
    if annotation is int:
        return "int"
    if annotation is float:
        return "duration" if key.endswith("_s") else "float"
    if words.startswith("an ISO 8601 time"):
        return "time"
    return {LOCATION_ACCEPTED: "location", URL_ACCEPTED: "url"}.get(words, "text")


def bad_values(key: str) -> list[Any]:
    k, b = kind(key), _bounds(key)
    table: dict[str, list[Any]] = {
        "bool": ["ture", "2", "maybe", 2],
        "int": ["abc", "1.5", "nan", True],
        "float": ["abc", "nan", "inf", "-inf", True],
        "duration": ["30 minutes", "nan", "inf", True],
        "choice": ["bogus", 3],
        "map": ["[1, 2]", "{not json", 5],
        "prices": ['{"m": 3}', {"m": {"input": -1, "output": 1}}, {"m": {"input": 1}}, 5],
        "address": ["host:port", "host:70000", "a b:1", ":9", ["x"]],
        "location": ["a\x00b", "line\nbreak", 5],
        "url": ["localhost:8080", "ftp://host/x", 5],
        "time": ["yesterday", "2020-13-01", 5],
        "text": [5, ["x"]],
    }
    values = table[k]
    step = 1 if k == "int" else 0.5
    if "ge" in b:
        values.append(b["ge"] - step)
    if "gt" in b:
        values.append(b["gt"])
    if "le" in b:
        values.append(b["le"] + step)
    if "lt" in b:
        values.append(b["lt"])
    if key == "home":
        values.append("")
    return values


def good_value(key: str) -> tuple[Any, Any]:
    """(a value as a user writes it, the value the setting then holds)."""
    k, b = kind(key), _bounds(key)
    if k == "bool":
        return "Yes", True
    if k == "choice":
        last = get_args(_info(key).annotation)[-1]
        return last.upper(), last
    if k == "map":
        return {"a": 1}, {"a": 1}
    if k == "prices":
        return {"m": {"input": 1, "output": 0.5}}, {"m": {"input": 1.0, "output": 0.5}}
    if k == "address":
        return "9464", "127.0.0.1:9464"
    if k == "location":
        return " some/folder ", "some/folder"
    if k == "url":
        return "http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"
    if k == "text":
        return "some-name", "some-name"
    if k == "time":
        return "2000-01-01T00:00:00Z", "2000-01-01T00:00:00+00:00"
    low = b.get("ge", b.get("gt", 0) + (1 if k == "int" else 0.25))
    return low, low


CASES = [(key, value) for key in KEYS for value in bad_values(key)]


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def test_every_kind_is_covered():
    kinds = {kind(k) for k in KEYS}
    assert kinds == {
        "bool",
        "int",
        "float",
        "duration",
        "choice",
        "map",
        "location",
        "url",
        "time",
        "text",
        "prices",
        "address",
    }


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_a_bad_value_is_refused_from_every_source_naming_the_setting(
    tmp_path, monkeypatch, key, value
):
    words = accepted(key)
    # an explicit key (a CLI option, the Python API)
    with pytest.raises(ConfigError) as e:
        Settings.from_keys(**{key: value})
    assert f"setting {key}: bad value" in str(e.value) and words in str(e.value)
    if key == "home":
        return  # the home locates the file; its own value is checked above
    # the file
    home = tmp_path / "h"
    home.mkdir()
    path = home / "skillstream.toml"
    path.write_text(f"{key} = {_toml(value)}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        Settings.load(home=str(home))
    assert f"{path}: key {key}: bad value" in str(e.value) and words in str(e.value)
    path.unlink()
    # the environment (text only; an empty variable counts as unset)
    raw = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, bool):
        raw = "maybe"
    if "\x00" in raw:
        return  # no environment variable can hold a NUL
    if not isinstance(value, str) and kind(key) in ("text", "location"):
        return  # in the environment, 5 is the text "5": a valid name
    monkeypatch.setenv(env_var(key), raw)
    with pytest.raises(ConfigError) as e:
        Settings.load(home=str(home))
    assert f"{env_var(key)} (setting {key}): bad value" in str(e.value) and words in str(e.value)


@pytest.mark.parametrize("key", list(KEYS))
def test_a_good_value_reads_the_same_from_every_source(tmp_path, monkeypatch, key):
    raw, expected = good_value(key)
    group, name = KEYS[key]
    home = tmp_path / "h"
    home.mkdir()

    def read(s: Settings) -> Any:
        return getattr(getattr(s, group), name)

    if key == "home":
        assert read(Settings.from_keys(home=raw)) == expected
        return
    assert read(Settings.from_keys(**{key: raw})) == expected
    (home / "skillstream.toml").write_text(f"{key} = {_toml(raw)}\n", encoding="utf-8")
    assert read(Settings.load(home=str(home))) == expected
    (home / "skillstream.toml").unlink()
    monkeypatch.setenv(env_var(key), raw if isinstance(raw, str) else json.dumps(raw))
    assert read(Settings.load(home=str(home))) == expected


def test_several_bad_values_are_all_named_at_once():
    with pytest.raises(ConfigError) as e:
        Settings.from_keys(span_tokens=0, default_scope="privat", distill="ture")
    msg = str(e.value)
    assert all(f"setting {k}" in msg for k in ("span_tokens", "default_scope", "distill"))
