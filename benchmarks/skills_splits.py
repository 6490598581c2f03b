"""Task-skill evaluation on streams of several lengths: the first share of each task's dialogues.

    python benchmarks/skills_splits.py --data ../shared/data/star/dialogues-dev.jsonl.gz \
        --json benchmarks/results/skills-splits.json [--shares 0.1,0.25,0.5,1.0]

Each share runs ``skillstream eval skills PATH --share S`` (``eval.skills.evaluate_star``, the
offline ``rules`` distiller, 70% of each task's kept dialogues distilled, the rest recalled) with
one embedding cache for all runs, so the model loads once. Reported per share: served skills
(``active``), candidates still on probation, tasks, skills per task, purity, recall@1 and the
step-coverage figures (``step_recall``, ``baseline_step_recall``, ``no_skill_step_recall``),
``grounded_share``, the concrete tokens the served skills name and the invented tokens the
grounding check held back. The aim: at most 1.25 served skills per task on every share, purity
at least 0.95 and recall@1 at least 0.9.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_stub import write_results  # noqa: E402

KEYS = (
    "skills",
    "candidates",
    "tasks",
    "purity",
    "recall@1",
    "no_skill_dialogues",
    "recall@1_with_skill",
    "step_recall",
    "baseline_step_recall",
    "no_skill_step_recall",
    "grounded_share",
    "concrete_tokens",
    "invented_tokens",
)


def run(data: str, shares: list[float]) -> dict[str, Any]:
    import torch

    from skillstream.distill.distiller import CachedEmbed
    from skillstream.embed import get_embedder
    from skillstream.eval.skills import evaluate_star
    from skillstream.settings import Settings

    torch.set_num_threads(1)  # as `eval skills`: many small sequential embedding calls
    settings = Settings.load(llm="rules")
    embed = CachedEmbed(get_embedder(settings.embedding).encode, size=200_000)
    rows = []
    for share in sorted(shares, reverse=True):  # the longest first fills the embedding cache
        got = evaluate_star(data, settings, embed=embed, share=None if share >= 1 else share)
        row = {
            "share": share,
            "train_dialogues": got["train_dialogues"],
            "test_dialogues": got["test_dialogues"],
        }
        row.update({k: got.get(k) for k in KEYS})
        row["skills_per_task"] = round(got["skills"] / got["tasks"], 3)
        row["per_task_skills"] = got["per_task_skills"]
        rows.append(row)
        print(row, file=sys.stderr)
    rows.sort(key=lambda r: r["share"])
    return {"data": Path(data).name, "distiller": "rules", "splits": rows}


def table(result: dict[str, Any]) -> list[str]:
    lines = [
        "| share | distilled | skills | candidates | tasks | skills/task | purity | recall@1 "
        "| held out | of them, task with no skill | recall@1 with a skill "
        "| step_recall | baseline | no skill | grounded | tokens | invented |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in result["splits"]:
        lines.append(
            f"| {r['share']:g} | {r['train_dialogues']} | {r['skills']} | {r['candidates']} "
            f"| {r['tasks']} | {r['skills_per_task']:.2f} | {r['purity']:.3f} "
            f"| {r['recall@1']:.3f} | {r['test_dialogues']} | {r['no_skill_dialogues']} "
            f"| {r['recall@1_with_skill']:.3f} "
            f"| {_f(r['step_recall'])} | {_f(r['baseline_step_recall'])} "
            f"| {_f(r['no_skill_step_recall'])} | {_f(r['grounded_share'])} "
            f"| {r['concrete_tokens']} | {r['invented_tokens']} |"
        )
    return lines


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, help="A STAR .jsonl(.gz) file.")
    ap.add_argument("--json", default="benchmarks/results/skills-splits.json")
    ap.add_argument("--shares", default="0.1,0.25,0.5,1.0")
    args = ap.parse_args()
    result = run(args.data, [float(s) for s in args.shares.split(",")])
    json_path, md_path = write_results(args.json, result, table(result))
    print("\n".join(table(result)))
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
