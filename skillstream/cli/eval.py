"""``skillstream eval``: evaluations on benchmarks (``eval locomo``, ``eval skills``)."""

from __future__ import annotations

import importlib
from pathlib import Path

import click

from skillstream.cli.common import settings_from

LAZY_EVALS: dict[str, tuple[str, str]] = {
    "skills": ("skillstream.cli.task_skills", "eval_skills"),
}
"""Sub-commands of ``eval`` defined with their component: name -> (module, attribute), imported
only when the command runs."""


class EvalGroup(click.Group):
    """The ``eval`` group: its own commands plus those of ``LAZY_EVALS``."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(LAZY_EVALS))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        cmd = super().get_command(ctx, name)
        if cmd is None and name in LAZY_EVALS:
            mod, attr = LAZY_EVALS[name]
            cmd = getattr(importlib.import_module(mod), attr)
        return cmd


@click.group("eval", cls=EvalGroup)
def eval_group() -> None:
    """Evaluate memory quality and cost on benchmarks."""


def _ints(value: str, what: str) -> tuple[int, ...]:
    try:
        out = tuple(int(v) for v in value.replace(" ", "").split(",") if v)
    except ValueError:
        raise click.BadParameter(
            f"{what} takes comma-separated integers such as 5,10,20, got {value!r}"
        ) from None
    if not out:
        raise click.BadParameter(f"{what} needs at least one value")
    return out


@eval_group.command("locomo")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--k", "ks", default="5,10,20", show_default=True, help="The k of each recall@k.")
@click.option(
    "--categories",
    default="1,2,3,4",
    show_default=True,
    help="Question categories: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, "
    "5 adversarial (scored by the abstention rule).",
)
@click.option(
    "--llm",
    type=click.Choice(["rules", "openai"]),
    default=None,
    help="Backend: rules (offline, recall only) or openai (also answers and judges).",
)
@click.option("--llm-base-url", default=None)
@click.option("--llm-model", default=None)
@click.option(
    "--build-llm",
    type=click.Choice(["rules", "openai"]),
    default=None,
    help="Backend that builds our memories; default: --llm.",
)
@click.option(
    "--baseline",
    type=click.Choice(["raw-turns", "none"]),
    default="raw-turns",
    show_default=True,
    help="The baseline shown next to ours.",
)
@click.option(
    "--qa-k", type=int, default=None, help="Memories given to the answerer; default: the largest k."
)
@click.option("--no-judge", is_flag=True, help="Skip the LLM judge.")
@click.option(
    "--session-summaries",
    is_flag=True,
    help="Let our flow write session summaries (they cite every turn of a session, "
    "which inflates evidence recall).",
)
@click.option("--samples", default=None, help="Only these sample ids (comma-separated).")
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write the result JSON here.",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the markdown report and the PNG chart into this folder (none by default).",
)
@click.option(
    "--details",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write one JSON line per question (retrieved items, answers) here.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep the per-conversation homes here (default: a temporary folder).",
)
@click.option(
    "--controller",
    "controller",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Select memory skills with this trained controller checkpoint (memory-skills train).",
)
@click.pass_context
def locomo(
    ctx,
    path,
    ks,
    categories,
    llm,
    llm_base_url,
    llm_model,
    build_llm,
    baseline,
    qa_k,
    no_judge,
    session_summaries,
    samples,
    json_out,
    report_dir,
    details,
    work_dir,
    controller,
):
    """Evidence recall@k, QA F1 and judge, and cost on a LoCoMo file, next to a raw-turn baseline.

    Each conversation is built into a fresh home with the real memory flow, then every question
    retrieves its top-k memories with the hybrid search of 'skillstream search'. The summary is
    printed; files are written only where --json, --report-dir and --details point.
    """
    from skillstream.eval.locomo import EvalOptions, evaluate_locomo
    from skillstream.eval.report import write_outputs

    settings = settings_from(ctx, llm=llm, llm_base_url=llm_base_url, llm_model=llm_model)
    if controller:
        from skillstream.memskill.controller import checkpoint_meta

        meta = checkpoint_meta(controller)
        settings = settings.with_keys(
            memory_skill_selection="top_k",
            memory_skill_scorer=str(Path(controller).resolve()),
            memory_skill_k=int(meta.get("k") or settings.extraction.memory_skill_k),
        )
    options = EvalOptions(
        ks=_ints(ks, "--k"),
        categories=_ints(categories, "--categories"),
        baseline=baseline,
        qa_k=qa_k,
        build_llm=build_llm,
        samples=tuple(s.strip() for s in samples.split(",") if s.strip()) if samples else (),
        work_dir=work_dir,
        judge=not no_judge,
        session_summaries=session_summaries,
    )
    result, questions = evaluate_locomo(
        path, settings, options, say=lambda msg: click.echo(msg, err=True)
    )
    stem = Path(json_out).stem if json_out else "locomo"
    written = write_outputs(
        result,
        json_path=json_out,
        report_dir=report_dir or None,
        stem=stem,
        questions=questions,
        details_path=details,
    )
    click.echo(_summary(result))
    for what, p in written.items():
        click.echo(f"{what}: {p}", err=True)


def _summary(result: dict) -> str:
    ks = result["config"]["k"]
    metrics = [f"recall@{k}" for k in ks] + ["f1", "judge"]
    base = result.get("baseline") or {}
    rows = [f"{'':<12}{'ours':>10}{'baseline':>10}"]
    for m in metrics:
        a, b = result["overall"].get(m), base.get(m)
        if a is None and b is None:
            continue
        rows.append(f"{m:<12}{_num(a):>10}{_num(b):>10}")
    rows.append(f"{'items':<12}{result['items']:>10}{_num(result.get('baseline_items')):>10}")
    rows.append(f"llm calls {result['llm_calls']}, {result['seconds']:.1f} s")
    return "\n".join(rows)


def _num(v) -> str:
    if v is None:
        return "n/a"
    return f"{v:.3f}" if isinstance(v, float) else str(v)
