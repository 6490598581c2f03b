"""Writing an evaluation result: JSON, a markdown report and a bar chart (ours vs the baseline).

The chart is drawn with matplotlib's ``Agg`` backend (no display needed); matplotlib is imported
only here, and a missing matplotlib is a clear error, not a crash.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from skillstream.errors import MissingExtraError
from skillstream.eval.locomo import CATEGORIES

OURS_COLOR = "#2a6f97"
BASE_COLOR = "#c9a227"


def _metrics(result: dict[str, Any]) -> list[str]:
    names = [f"recall@{k}" for k in result["config"]["k"]]
    names += [m for m in ("f1", "judge") if result["overall"].get(m) is not None]
    return names


def _fmt(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _diff(a: Any, b: Any) -> str:
    return "" if a is None or b is None else f"{a - b:+.3f}"


def _label(metric: str) -> str:
    return {"f1": "F1", "judge": "LLM judge"}.get(metric, metric)


def markdown(result: dict[str, Any], chart_name: str | None = None) -> str:
    """The report as markdown: overall and per-category tables, cost, data notes, the chart."""
    cfg, data = result["config"], result["dataset"]
    base = result.get("baseline")
    base_pc = result.get("baseline_per_category") or {}
    metrics = _metrics(result)
    cats = ", ".join(f"{c} {CATEGORIES[int(c)]}" for c in result["per_category"])
    qa = result["overall"].get("f1") is not None
    lines = [
        "# LoCoMo evaluation",
        "",
        f"Data: `{data['path']}`: {len(data['conversations'])} conversation(s) "
        f"({', '.join(data['conversations'])}), "
        f"{data['questions']} questions of categories {cats}.",
        f"Ours: the memory flow with the `{cfg['build_llm']}` executor. Baseline: "
        f"`{cfg['baseline']}` (every turn stored verbatim, same flow, store and retriever).",
        f"Retriever: {cfg['retriever']}. Embeddings: `{cfg['embed_model']}`.",
        "Session summaries: "
        + (
            "on."
            if cfg.get("session_summaries")
            else "off (a summary memory cites every turn of its session, so one "
            "retrieved summary would count the whole session as recalled)."
        ),
        (
            f"QA: answers from the top {cfg['qa_k']} memories by `{cfg['llm']}` "
            f"(`{cfg['llm_model']}`){', judged by the same model' if cfg['judge'] else ''}."
            if qa
            else "QA: no LLM configured (offline run): F1 and judge not measured."
        ),
        "",
        "## Overall",
        "",
        "| metric | ours | raw-turn baseline | ours - baseline |",
        "|---|---:|---:|---:|",
    ]
    for m in metrics:
        b = base.get(m) if base else None
        lines.append(
            f"| {_label(m)} | {_fmt(result['overall'].get(m))} | {_fmt(b)} | "
            f"{_diff(result['overall'].get(m), b)} |"
        )
    lines += ["", "## Per category", ""]
    head = "| category | questions |" + "".join(
        f" {_label(m)} ours | {_label(m)} base |" for m in metrics
    )
    lines += [head, "|---|---:|" + "---:|---:|" * len(metrics)]
    for c, ours_row in result["per_category"].items():
        brow = base_pc.get(c, {})
        cells = "".join(f" {_fmt(ours_row.get(m))} | {_fmt(brow.get(m))} |" for m in metrics)
        lines.append(f"| {c} {CATEGORIES[int(c)]} | {ours_row['questions']} |{cells}")
    lines += ["", "## Cost", "", "| | ours | raw-turn baseline |", "|---|---:|---:|"]
    cost = result["cost"]
    bcost = cost.get("baseline")

    def row(label: str, part: str, key: str) -> None:
        ours = cost["ours"][part][key]
        other = bcost[part][key] if bcost else None
        lines.append(f"| {label} | {ours} | {'n/a' if other is None else other} |")

    row("stored items (live memories)", "build", "items")
    row("turns read", "build", "messages")
    row("spans processed", "build", "spans")
    row("spans failed", "build", "spans_failed")
    row("LLM calls to build", "build", "llm_calls")
    row("prompt tokens to build", "build", "prompt_tokens")
    row("completion tokens to build", "build", "completion_tokens")
    row("build time (s)", "build", "seconds")
    row("search time (s)", "search", "seconds")
    row("LLM calls to answer and judge", "answer", "llm_calls")
    row("prompt tokens to answer and judge", "answer", "prompt_tokens")
    row("completion tokens to answer and judge", "answer", "completion_tokens")
    row("answer time (s)", "answer", "seconds")
    lines += [
        "",
        f"Total LLM calls: {result['llm_calls']}. Wall time: {result['seconds']:.1f} s.",
        "",
        "## Notes on the data",
        "",
    ]
    lines.append(
        f"- Evidence recall averages over questions with usable evidence; "
        f"{data['questions_without_evidence']} question(s) have none and count only for F1/judge."
    )
    lines.append('- Evidence strings that hold two ids ("D8:6; D9:17") are split in two when read.')
    for note, key in (
        ("repaired", "evidence_repaired"),
        ("dropped (no such turn)", "evidence_dropped"),
    ):
        items = data[key]
        if items:
            listed = "; ".join(
                f"{x['sample_id']} q{x['question']}: {', '.join(x['ids'])}" for x in items
            )
            lines.append(f"- Evidence ids {note}: {listed}.")
    if chart_name:
        lines += ["", f"![ours vs baseline per category]({chart_name})"]
    return "\n".join(lines) + "\n"


def chart(result: dict[str, Any], path: str | Path) -> Path:
    """A PNG with one panel per metric: grouped bars, ours vs baseline, per category and overall.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        # matplotlib ships with the "test" extra today.
        raise MissingExtraError("matplotlib", "test") from e
    metrics = _metrics(result)
    cats = list(result["per_category"])
    labels = [f"{c}\n{CATEGORIES[int(c)]}" for c in cats] + ["all"]
    base = result.get("baseline")
    base_pc = result.get("baseline_per_category") or {}
    fig, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 4.0), squeeze=False)
    width = 0.38
    for ax, m in zip(axes[0], metrics):
        ours = [result["per_category"][c].get(m) or 0.0 for c in cats] + [
            result["overall"].get(m) or 0.0
        ]
        xs = list(range(len(labels)))
        bars = [ax.bar([x - width / 2 for x in xs], ours, width, label="ours", color=OURS_COLOR)]
        if base:
            other = [base_pc.get(c, {}).get(m) or 0.0 for c in cats] + [base.get(m) or 0.0]
            bars.append(
                ax.bar(
                    [x + width / 2 for x in xs], other, width, label="raw turns", color=BASE_COLOR
                )
            )
        for group in bars:
            ax.bar_label(group, fmt="%.2f", fontsize=7, padding=1)
        ax.set_title(_label(m))
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)
    axes[0][0].set_ylabel("score")
    handles, names = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, names, loc="upper right", ncols=2, fontsize=8, frameon=False)
    n = result["dataset"]["questions"]
    fig.suptitle(
        f"LoCoMo: ours ({result['config']['build_llm']}) vs raw-turn baseline, {n} questions",
        fontsize=10,
        x=0.02,
        ha="left",
    )
    fig.tight_layout(rect=(0, 0, 1, 0.94))
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def write_outputs(
    result: dict[str, Any],
    *,
    json_path: str | Path | None,
    report_dir: str | Path | None,
    stem: str = "locomo",
    questions: list[dict[str, Any]] | None = None,
    details_path: str | Path | None = None,
) -> dict[str, Path]:
    """Write the JSON result, the markdown report and the chart; return the paths written.

    Args:
        result: The evaluation result.
        json_path: Where the JSON goes (``None``: not written).
        report_dir: Folder of ``<stem>.md`` and ``<stem>.png`` (``None``: not written).
        stem: File name stem of the report and chart.
        questions: Per-question records, written as JSON lines to ``details_path``.
        details_path: Where the per-question records go (``None``: not written).
    """
    out: dict[str, Path] = {}
    if json_path:
        p = Path(json_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        out["json"] = p
    if report_dir:
        folder = Path(report_dir)
        folder.mkdir(parents=True, exist_ok=True)
        png = chart(result, folder / f"{stem}.png")
        md = folder / f"{stem}.md"
        md.write_text(markdown(result, png.name), encoding="utf-8")
        out["chart"], out["report"] = png, md
    if details_path and questions is not None:
        p = Path(details_path)
        p.parent.mkdir(parents=True, exist_ok=True)
        with p.open("w", encoding="utf-8") as fh:
            for rec in questions:
                fh.write(json.dumps(rec, ensure_ascii=False, default=str) + "\n")
        out["details"] = p
    return out
