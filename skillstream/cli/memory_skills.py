"""``skillstream memory-skills list|show|export|import``: the memory skill bank.

Edit loop::

    skillstream memory-skills export ./memory-skills      # one Markdown file per memory skill
    $EDITOR ./memory-skills/insert.md                      # or add a new file
    skillstream memory-skills import ./memory-skills       # checked; changed files: new versions
    skillstream memory-skills show insert --history

``list``, ``show`` and ``export`` open the catalog read-only (they work while no flow holds it, and
show the four primitives when nothing is stored yet); ``import`` writes to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from skillstream.cli.common import dumps, format_text, settings_from
from skillstream.vocab import MemorySkillStatus


@contextlib.contextmanager
def _bank(settings: Any, write: bool = False) -> Iterator[Any]:
    from skillstream.memskill.bank import MemorySkillBank
    from skillstream.storage.catalog import Catalog, catalog_exists, open_catalog

    if not write and not catalog_exists(settings.storage):
        cat = Catalog(":memory:", read_only=False)  # an empty bank reads as the primitives
    else:
        cat = open_catalog(settings.storage, read_only=not write)
    try:
        yield MemorySkillBank(cat)
    finally:
        cat.close()


CORRECTION = click.option(
    "--correction",
    type=click.Choice(["skill", "state"]),
    default="skill",
    show_default=True,
    help="What the learned correction to the cosine scorer sees: skill (each skill's description "
    "only, the same for every span) or state (the span and its retrieved memories too).",
)
"""The ``--correction`` option of ``train`` and ``evolve``."""


@click.group("memory-skills")
def memory_skills() -> None:
    """The memory skill bank: routines the controller selects and the LLM executor follows."""


@memory_skills.command("list")
@click.option("--all", "show_all", is_flag=True, help="Also retired memory skills.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def list_cmd(ctx: click.Context, show_all: bool, as_json: bool) -> None:
    """Current version of every memory skill, with the spans it was selected for."""
    settings = settings_from(ctx)
    with _bank(settings) as bank:
        stored = bank.stored()
        usage = bank.usage()
        rows = [
            {
                "name": v.name,
                "version": v.version,
                "action": v.action,
                "status": v.status,
                "spans": usage.get(v.name, 0),
                "usage_count": v.usage_count,
                "reward_mean": None if v.reward_mean is None else round(v.reward_mean, 4),
                "recent_rewards": [round(r, 4) for r in v.recent_rewards][-5:],
                "source": v.source if stored else "seed (not stored yet)",
                "description": v.description,
            }
            for v in bank.current()
            if show_all or v.status == MemorySkillStatus.ACTIVE
        ]
    if as_json:
        click.echo(dumps(rows))
    else:
        click.echo(format_text(list(rows[0]) if rows else ["name"], rows, width=70))


@memory_skills.command("show")
@click.argument("name")
@click.option("--version", "version", type=int, default=None, help="A past version.")
@click.option("--history", is_flag=True, help="List every version instead.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def show(ctx: click.Context, name: str, version: int | None, history: bool, as_json: bool) -> None:
    """One memory skill as its file text (or its versions with --history)."""
    from skillstream.memskill.files import to_markdown

    settings = settings_from(ctx)
    with _bank(settings) as bank:
        if history:
            versions = bank.history(name) or [bank.get(name)]
            rows = [
                {
                    "version": v.version,
                    "status": v.status,
                    "action": v.action,
                    "source": v.source,
                    "created_at": v.created_at,
                    "description": v.description,
                }
                for v in versions
            ]
            click.echo(dumps(rows) if as_json else format_text(list(rows[0]), rows, width=70))
            return
        v = bank.get(name, version)
    if as_json:  # the table row, with the offline form as an object rather than its JSON text
        click.echo(dumps({**v.row(), "offline": v.offline.to_dict() if v.offline else None}))
    else:
        click.echo(to_markdown(v), nl=False)


@memory_skills.command("export")
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--active-only", is_flag=True, help="Leave retired memory skills out.")
@click.pass_context
def export(ctx: click.Context, folder: str, active_only: bool) -> None:
    """Write one Markdown file per memory skill into FOLDER."""
    settings = settings_from(ctx)
    with _bank(settings) as bank:
        paths = bank.export(folder, include_retired=not active_only)
    click.echo(f"exported {len(paths)} memory skills to {folder}")


@memory_skills.command("import")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--force", is_flag=True, help="Accept files exported from an older version.")
@click.option("--dry-run", is_flag=True, help="Validate and report; store nothing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def import_cmd(
    ctx: click.Context, paths: tuple[str, ...], force: bool, dry_run: bool, as_json: bool
) -> None:
    """Validate memory skill files (or folders of them) and store changes as new versions."""
    settings = settings_from(ctx)
    with _bank(settings, write=not dry_run) as bank:
        report = bank.import_files(list(paths), force=force, dry_run=dry_run)
    summary = {
        "dry_run": dry_run,
        "new_versions": [v.version_id for v in report.created],
        "unchanged": report.unchanged,
    }
    if as_json:
        click.echo(dumps(summary))
        return
    verb = "would store" if dry_run else "stored"
    click.echo(
        f"{verb} {len(report.created)} new version(s)"
        + (f": {', '.join(summary['new_versions'])}" if report.created else "")
        + f"; {len(report.unchanged)} unchanged"
    )


def _training_skills(settings: Any) -> list[Any]:
    """The bank's active memory skills, plus the rules categories for the offline backend."""
    from skillstream.services.pipeline import load_memory_skills

    skills = load_memory_skills(settings)
    if settings.llm.backend == "rules":
        from skillstream.rules.skills import RULE_SKILLS

        have = {s.name for s in skills}
        skills += [s for s in RULE_SKILLS if s.name not in have]
    return skills


@memory_skills.command("train")
@click.option("--data", "data", required=True, type=click.Path(exists=True), help="Chat logs.")
@click.option("--format", "fmt", default="locomo", show_default=True, help="Input format.")
@click.option(
    "--reward",
    type=click.Choice(["evidence", "unlabelled", "qa"]),
    default="evidence",
    show_default=True,
    help="evidence: LoCoMo questions' evidence turns; qa: the configured LLM answers them (token "
    "F1); unlabelled: later turns that refer back (no labels).",
)
@click.option("--train", "train_ids", default="", help="Comma-separated training conversations.")
@click.option("--val", "val_ids", default="", help="Comma-separated validation conversations.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Checkpoint.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--curve", "curve_dir", type=click.Path(file_okay=False), help="Curve PNG+JSON.")
@click.option("--k", "k", type=int, default=3, show_default=True, help="Skills per span.")
@click.option("--updates", type=int, default=30, show_default=True, help="PPO updates.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--runs",
    type=int,
    default=5,
    show_default=True,
    help="Independent runs (seeds --seed on) whose chosen checkpoints are averaged.",
)
@click.option(
    "--budget",
    default="cosine",
    show_default=True,
    help="Memories per span allowed: 'cosine' (the cosine controller's, on the training "
    "conversations), a number, or 'none' (only --memory-cost).",
)
@click.option(
    "--select-every",
    type=int,
    default=1,
    show_default=True,
    help="Evaluate on the training conversations every N updates; keep the best within budget.",
)
@CORRECTION
@click.option("--memory-cost", type=float, default=0.0, show_default=True, help="Fixed cost.")
@click.option("--token-cost", type=float, default=0.0, show_default=True)
@click.option("--lr", type=float, default=1e-3, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True, help="Torch CPU threads.")
@click.option(
    "--fresh", is_flag=True, help="Start over instead of resuming a saved run with these options."
)
@click.pass_context
def train_cmd(
    ctx: click.Context,
    data: str,
    fmt: str,
    reward: str,
    train_ids: str,
    val_ids: str,
    out: str,
    json_out: str | None,
    curve_dir: str | None,
    k: int,
    updates: int,
    seed: int,
    runs: int,
    budget: str,
    select_every: int,
    correction: str,
    memory_cost: float,
    token_cost: float,
    lr: float,
    threads: int,
    fresh: bool,
) -> None:
    """Train the controller's scorer with PPO on the memories it causes; compare on validation.

    Resumable: the trainer's state is saved in the artifact store after every update, and the same
    command continues an interrupted run from its last completed update (``--fresh`` starts over).
    """
    import torch

    from skillstream.embed import get_embedder
    from skillstream.eval.training_harness import TrainOptions, parse_budget, train_controller
    from skillstream.services.pipeline import make_executor

    torch.set_num_threads(max(1, threads))
    settings = settings_from(ctx)
    from skillstream.errors import ConfigError

    try:
        parse_budget(budget)
    except ConfigError as e:
        raise click.BadParameter(str(e), param_hint="--budget") from e
    opts = TrainOptions(
        data=data,
        fmt=fmt,
        reward=reward,
        train=tuple(x for x in train_ids.split(",") if x),
        val=tuple(x for x in val_ids.split(",") if x),
        k=k,
        updates=updates,
        seed=seed,
        memory_cost=memory_cost,
        token_cost=token_cost,
        lr=lr,
        budget=budget,
        select_every=select_every,
        correction=correction,
        runs=max(1, runs),
    )
    embedder = get_embedder(settings.embedding)
    skills = _training_skills(settings)
    executor = make_executor(settings)
    grader = None
    if reward == "qa":
        from skillstream.eval.qa import QAGrader
        from skillstream.llm import make_backend

        backend = make_backend(settings.llm, settings.storage.home)
        if backend is None:
            raise click.UsageError("--reward qa needs an LLM: give --llm openai and its endpoint")
        grader = QAGrader(backend, judge=False)
    if isinstance(getattr(executor, "categories", None), bool):
        executor.categories = True  # type: ignore[attr-defined]
    bar_file = click.get_text_stream("stderr")  # type: ignore[operator]
    with click.progressbar(length=updates * opts.runs, label="PPO updates", file=bar_file) as bar:

        def step(point: dict[str, float]) -> None:
            bar.update(1)

        report = train_controller(
            opts,
            settings,
            embedder,
            executor,
            skills,
            out,
            on_update=step,
            curve_dir=curve_dir,
            resume=not fresh,
            grader=grader,
        )
    rewards = report.pop("skill_rewards", {})
    from skillstream.storage.catalog import catalog_exists

    if catalog_exists(settings.storage):
        with _bank(settings, write=True) as bank:
            bank.record_rewards(rewards)
    report["skills_used"] = {k: len(v) for k, v in rewards.items()}
    text = dumps(report)
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(text + "\n")
    click.echo(dumps({"val": report["val"], "seconds": report["seconds"], "checkpoint": out}))


@memory_skills.command("activate")
@click.argument("checkpoint", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--force",
    is_flag=True,
    help="Activate a controller that lost to the default (every skill) on its own validation.",
)
@click.pass_context
def activate(ctx: click.Context, checkpoint: str, force: bool) -> None:
    """Make the flow select memory skills with a trained controller CHECKPOINT.

    A controller that lost to the default on its own validation conversations (less recall, or
    the same recall with more memories; the checkpoint records both) is refused unless
    ``--force`` is given, and then activated with a warning that gives the figures.

    The checkpoint is checked against the embedder, copied into the home's artifact store under
    its version (hash), the memory skills it was trained with are added to the bank when missing,
    and every span processed from now on records that version in the ledger's ``controller``:
    ``<home>/controller.json`` is a layer of the settings (``Settings.load``), below the
    environment and the options, above ``skillstream.toml``.
    """
    import json
    import shutil

    from skillstream.embed import get_embedder
    from skillstream.memskill.controller import (
        checkpoint_meta,
        checkpoint_version,
        load_scorer,
        lost_to_default,
    )
    from skillstream.memskill.versions import MemorySkillVersion
    from skillstream.settings import CONTROLLER_FILE, is_remote, local_path

    settings = settings_from(ctx)
    if settings.storage.remote:
        raise click.UsageError(
            f"activate records the controller in <home>/{CONTROLLER_FILE} and needs a local home"
        )
    load_scorer(checkpoint, int(get_embedder(settings.embedding).dim))
    version = checkpoint_version(checkpoint)
    meta = checkpoint_meta(checkpoint)
    lost = lost_to_default(meta)
    if lost and not force:
        raise click.UsageError(
            f"{checkpoint} lost to the default on its own validation: {lost}. Activating it would "
            "cost recall or store more memories for none; keep the default, train again, or pass "
            "--force to activate it anyway"
        )
    if lost:
        click.echo(f"warning: {checkpoint} lost to the default on its validation: {lost}", err=True)
    if is_remote(settings.storage.artifacts):
        raise click.UsageError("activate needs a local artifact store (SKILLSTREAM_ARTIFACTS_URI)")
    folder = local_path(settings.storage.artifacts) / "controllers"
    folder.mkdir(parents=True, exist_ok=True)
    stored = folder / f"{version}.pt"
    shutil.copyfile(checkpoint, stored)
    skills = [s for s in (meta.get("skills") or "").split(",") if s]
    added = []
    if skills:
        from skillstream.memskill.versions import carried_skills
        from skillstream.rules.skills import RULE_SKILLS

        carried = carried_skills(meta)
        with _bank(settings, write=True) as bank:
            bank.ensure_seeded()
            have = {v.name for v in bank.current()}
            for s in [*RULE_SKILLS, *carried]:
                if s.name in skills and s.name not in have:
                    bank.put(MemorySkillVersion.from_skill(s, source="controller"), "controller")
                    added.append(s.name)
                    have.add(s.name)
    record = {
        "checkpoint": str(stored),
        "version": f"torch:{version}",
        "k": int(meta.get("k") or settings.extraction.memory_skill_k),
        "skills": skills,
    }
    home = local_path(settings.storage.home)
    home.mkdir(parents=True, exist_ok=True)
    (home / CONTROLLER_FILE).write_text(json.dumps(record, indent=2) + "\n")
    click.echo(dumps({**record, "added_skills": added}))


@memory_skills.command("evolve")
@click.option("--data", "data", required=True, type=click.Path(exists=True), help="Chat logs.")
@click.option("--format", "fmt", default="locomo", show_default=True, help="Input format.")
@click.option(
    "--reward",
    type=click.Choice(["evidence", "unlabelled"]),
    default="evidence",
    show_default=True,
)
@click.option("--train", "train_ids", default="", help="Comma-separated training conversations.")
@click.option("--val", "val_ids", default="", help="Comma-separated validation conversations.")
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="Checkpoint.")
@click.option("--json", "json_out", type=click.Path(dir_okay=False), help="Write the report here.")
@click.option("--cycles", type=int, default=5, show_default=True)
@click.option("--patience", type=int, default=2, show_default=True)
@click.option("--updates", type=int, default=10, show_default=True, help="PPO updates per cycle.")
@click.option("--k", "k", type=int, default=3, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@CORRECTION
@click.option("--memory-cost", type=float, default=0.0003, show_default=True)
@click.option("--token-cost", type=float, default=0.0, show_default=True)
@click.option("--lr", type=float, default=1e-3, show_default=True)
@click.option(
    "--llm",
    type=click.Choice(["openai", "rules"]),
    default=None,
    help="The designer's backend (default: the configured one; 'openai' when --llm-base-url or "
    "--llm-model is given). 'rules': the offline designer, which writes skills by example.",
)
@click.option("--llm-base-url", default=None)
@click.option("--llm-model", default=None)
@click.option("--threads", type=int, default=1, show_default=True)
@click.option(
    "--fresh", is_flag=True, help="Start over instead of resuming a saved run with these options."
)
@click.pass_context
def evolve_cmd(
    ctx: click.Context,
    data: str,
    fmt: str,
    reward: str,
    train_ids: str,
    val_ids: str,
    out: str,
    json_out: str | None,
    cycles: int,
    patience: int,
    updates: int,
    k: int,
    seed: int,
    correction: str,
    memory_cost: float,
    token_cost: float,
    lr: float,
    llm: str | None,
    llm_base_url: str | None,
    llm_model: str | None,
    threads: int,
    fresh: bool,
) -> None:
    """Alternate controller training and designer rounds; store the best bank (source=designer).

    With an OpenAI-compatible LLM the designer writes instructions; without one (the ``rules``
    backend) it writes skills by example that the offline executor runs (prototype sentences of
    the evidence no memory captured). The executor is the configured backend. Every cycle's bank
    and controller are kept in the artifact store; the same command continues an interrupted run
    after its last completed cycle (``--fresh`` starts over).
    """
    import torch

    from skillstream.embed import get_embedder
    from skillstream.eval.training_harness import TrainOptions, evolve_controller
    from skillstream.llm import make_backend
    from skillstream.memskill.designer import Designer
    from skillstream.memskill.versions import MemorySkillVersion
    from skillstream.services.pipeline import make_executor

    torch.set_num_threads(max(1, threads))
    settings = settings_from(ctx)
    if llm is None and (llm_base_url or llm_model):
        llm = "openai"
    design_settings = settings.with_keys(
        **{
            k2: v
            for k2, v in (("llm", llm), ("llm_base_url", llm_base_url), ("llm_model", llm_model))
            if v
        },
    )
    backend = make_backend(design_settings.llm, settings.storage.home)
    opts = TrainOptions(
        data=data,
        fmt=fmt,
        reward=reward,
        train=tuple(x for x in train_ids.split(",") if x),
        val=tuple(x for x in val_ids.split(",") if x),
        k=k,
        updates=updates,
        seed=seed,
        memory_cost=memory_cost,
        token_cost=token_cost,
        lr=lr,
        correction=correction,
    )
    executor = make_executor(settings)
    if isinstance(getattr(executor, "categories", None), bool):
        executor.categories = True  # type: ignore[attr-defined]
    start = _training_skills(settings)
    report, best = evolve_controller(
        opts,
        settings,
        get_embedder(settings.embedding),
        executor,
        start,
        None if backend is None else Designer(backend),
        out,
        cycles=cycles,
        patience=patience,
        on_cycle=lambda row: click.echo(dumps(row), err=True),
        resume=not fresh,
    )
    from skillstream.memskill.controller import checkpoint_meta, lost_to_default

    before = set(start)
    stored = []
    # A bank is what every run of the home selects from: the designer's skills go in only with a
    # controller that did not lose to the default; otherwise the checkpoint still carries them
    # (``activate --force`` stores them).
    lost = lost_to_default(checkpoint_meta(out)) if Path(out).is_file() else None
    if lost:
        click.echo(
            f"the evolved controller lost to the default on its validation ({lost}): its skills "
            f"stay in {out} and are not stored in the bank",
            err=True,
        )
    else:
        with _bank(settings, write=True) as bank:
            for s in best:  # only what the designer added or refined
                if s in before:
                    continue
                v = bank.put(MemorySkillVersion.from_skill(s, source="designer"), "designer")
                if v is not None:
                    stored.append(v.version_id)
    report["new_versions"] = stored
    report["lost_to_default"] = lost
    text = dumps(report)
    if json_out:
        Path(json_out).parent.mkdir(parents=True, exist_ok=True)
        Path(json_out).write_text(text + "\n")
    click.echo(dumps({k2: report[k2] for k2 in ("best_cycle", "best_reward", "new_versions")}))
