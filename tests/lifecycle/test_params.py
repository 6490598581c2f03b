"""The lifecycle parameters are the ``lifecycle`` settings: one declaration per knob, and the
parameters production code uses agree with the settings' defaults."""

from __future__ import annotations

import inspect
import re
from datetime import timedelta
from pathlib import Path

from skillstream.apply import ApplyOptions, apply_ops
from skillstream.lifecycle.params import LifecycleParams
from skillstream.pipeline import MemoryPipeline
from skillstream.settings import LifecycleSettings, Settings

ROOT = Path(__file__).resolve().parents[2]
DAY = timedelta(days=1)


def test_every_lifecycle_knob_is_declared_once_in_the_settings():
    assert LifecycleParams.model_fields.keys() == LifecycleSettings.model_fields.keys()
    for name, info in LifecycleParams.model_fields.items():
        declared = LifecycleSettings.model_fields[name]
        assert (info.annotation, info.default, info.alias, info.description) == (
            declared.annotation,
            declared.default,
            declared.alias,
            declared.description,
        ), name
    own = {
        name
        for name, value in vars(LifecycleParams).items()
        if not name.startswith("_")
        and not callable(value)
        and not isinstance(value, (property, classmethod))
    }
    assert own <= {"confidence_cap", "reinforce_step", "model_config", "model_fields"}, own


def test_each_duration_is_derived_from_its_seconds_setting():
    p = LifecycleParams.from_settings(
        Settings.from_keys(decay_after_s=10, maintenance_interval_s=0, archive_after_s=5)
    )
    assert p.decay_after == timedelta(seconds=10) and p.decay_after_s == 10
    assert p.maintenance_interval is None and p.archive_after == timedelta(seconds=5)
    for name in vars(LifecycleParams):
        if isinstance(getattr(LifecycleParams, name), property) and f"{name}_s" in p.keys():
            seconds = p.keys()[f"{name}_s"]
            assert getattr(p, name) in (timedelta(seconds=seconds), None), name


def test_the_defaults_are_todays_values():
    p = LifecycleParams.defaults()
    assert (p.merge_threshold, p.contradiction_confidence_gap, p.decay_step) == (0.92, 0.3, 0.1)
    assert (p.contradiction_escalate_after, p.decay_after, p.decay_period) == (
        7 * DAY,
        90 * DAY,
        30 * DAY,
    )
    assert (p.maintenance_interval, p.recency_half_life, p.idle_gap) == (
        DAY,
        365 * DAY,
        timedelta(minutes=30),
    )
    assert (p.archive_after, p.expire_archived_after) == (None, None)
    assert (p.lesson_confidence, p.session_summaries, p.default_scope) == (0.6, True, "private")
    assert (p.default_confidence, p.decay_rule, p.decay_below, p.rank_rule) == (
        0.7,
        "seed",
        0.3,
        "product",
    )
    assert (p.reorganize, p.reorganize_threshold, p.reorganize_min_members) == (True, 0.6, 3)
    assert (p.confidence_cap, p.reinforce_step) == (0.95, 0.05)
    assert dict(p.capacities) == {
        "WorkingMemory": 20,
        "LongTermMemory": 1500,
        "UserMemory": 480,
        "SkillMemory": 500,
    }
    assert p.weights == {
        "relevance": 0.6,
        "confidence": 0.2,
        "recency": 0.1,
        "reinforcement": 0.1,
        "keyword": 0.5,
    }


def test_the_parameters_used_without_settings_are_the_settings_defaults():
    from_settings = LifecycleParams.from_settings(Settings.from_keys())
    assert LifecycleParams.defaults() == from_settings
    assert ApplyOptions().params == from_settings
    assert inspect.signature(MemoryPipeline).parameters["options"].default.params == from_settings
    assert inspect.signature(apply_ops).parameters["options"].default.params == from_settings


def test_a_changed_key_is_parsed_again():
    p = LifecycleParams.defaults().with_keys(decay_after_s=60, default_scope="fleet")
    assert (p.decay_after, p.default_scope, p.idle_gap) == (
        timedelta(minutes=1),
        "fleet",
        timedelta(minutes=30),
    )


def test_no_production_code_builds_bare_lifecycle_parameters():
    bare = re.compile(r"LifecycleParams\(\s*\)")
    found = [
        f"{path.relative_to(ROOT)}"
        for folder in ("skillstream", "flows", "connectors", "storage", "benchmarks")
        for path in (ROOT / folder).rglob("*.py")
        if not path.is_symlink() and bare.search(path.read_text(encoding="utf-8"))
    ]
    assert found == []
