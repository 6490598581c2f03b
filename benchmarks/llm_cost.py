"""LLM calls and prompt tokens per 1,000 turns: span-level MemSkill executor vs per-turn-pair calls.

    python benchmarks/llm_cost.py --data ../shared/data/locomo/locomo-dev.json \
        --json benchmarks/results/llm_cost.json

Both sides talk to the same recording OpenAI-protocol stub (a real HTTP server on loopback, through
the real ``openai`` client) that answers every request with one INSERT per turn it was shown, so
memories accumulate and later prompts carry retrieved memories, as with a real model.

* **span** (ours): the whole memory flow (Bytewax, spans of ``--span-tokens`` tokens cut within a
  session, controller Top-K, one executor call per span), as ``skillstream run --llm openai``.
* **pair** (baseline): one extraction call per user/assistant pair of consecutive turns (the way
  per-message memory layers call their LLM on every exchange), with the *same* executor, prompt,
  controller and retrieval, so the difference is the granularity alone. Real per-message layers
  often make a second call per exchange to reconcile facts; the baseline does not count one.

Prompt tokens are counted on the recorded requests' messages with the embedding model's WordPiece
tokenizer (the span budget's counter; OpenAI's tokenizer is not available offline), and whitespace
words are reported too. The JSON schema travels in ``response_format`` and costs the same per call
on both sides; it is not counted. Results go to ``--json`` and a markdown table next to it
(``.md``).
Task-skill distillation is off (``distill=False``): it makes LLM calls of its own, and this
measures memory extraction.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skillstream.model import Message, Span
    from skillstream.tokens import TokenCounter

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llm_stub import OpenAIStub, insert_each_turn, prompt_text, write_results  # noqa: E402


def read_messages(path: str, fmt: str):
    from skillstream.connectors.files import FileSource, read_all

    return [m for m in read_all(FileSource(path, format=fmt)) if hasattr(m, "text")]


def settings_for(home: str, url: str, args):
    from skillstream.settings import Settings

    return Settings.load(
        home=home,
        llm="openai",
        llm_base_url=url,
        llm_model="stub-model",
        llm_response_format="json_schema",
        llm_cache=False,
        llm_timeout_s=30.0,
        span_tokens=args.span_tokens,
        retrieve_k=args.retrieve_k,
        memory_skill_k=args.k,
        epoch_interval_s=60.0,
        distill=False,
    )


def tally(requests: list[dict], counter) -> dict:
    texts = [prompt_text(b) for b in requests]
    return {
        "calls": len(requests),
        "prompt_tokens": sum(counter.count(t) for t in texts),
        "prompt_words": sum(len(t.split()) for t in texts),
    }


def run_span_level(args, turns: int, counter) -> dict:
    from skillstream.flows.runner import Runner

    with (
        OpenAIStub(insert_each_turn) as stub,
        tempfile.TemporaryDirectory(prefix="ss-cost-") as home,
    ):
        settings = settings_for(home, stub.url, args)
        runner = Runner(settings)
        t0 = time.perf_counter()
        runner.execute(runner.dataflow(runner.source(args.data, format=args.format)))
        seconds = time.perf_counter() - t0
        counts = runner.counters.snapshot()
        out = tally(stub.requests, counter)
    out.update(
        spans=counts.get("spans_done", 0),
        failed_spans=counts.get("spans_failed", 0),
        seconds=round(seconds, 1),
    )
    return out


def pair_spans(messages: list[Message], counter: TokenCounter) -> dict[str, list[Span]]:
    """Consecutive pairs of turns within each session, as spans (ids like the flow's)."""
    from skillstream.ids import prefixed_id
    from skillstream.lang import detect_language
    from skillstream.model import Span
    from skillstream.spans import render_turn

    by_session: dict[tuple[str, str], list[Message]] = defaultdict(list)
    for m in messages:
        by_session[(m.conversation_id, m.session_id)].append(m)
    seq: dict[str, int] = defaultdict(int)
    spans: dict[str, list[Span]] = defaultdict(list)
    for (conv, _), msgs in by_session.items():
        for i in range(0, len(msgs), 2):
            pair = tuple(msgs[i : i + 2])
            spans[pair[0].owner_id].append(
                Span(
                    span_id=prefixed_id("spn", conv, [m.message_id for m in pair]),
                    owner_id=pair[0].owner_id,
                    conversation_id=conv,
                    session_id=pair[0].session_id,
                    seq=seq[conv],
                    messages=pair,
                    n_tokens=sum(counter.count(render_turn(m)) for m in pair),
                    lang=detect_language(" ".join(m.text for m in pair)),
                )
            )
            seq[conv] += 1
    return spans


def run_pair_level(args, messages, counter, embedder) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from skillstream.apply import ApplyOptions
    from skillstream.memskill.factory import make_llm_executor
    from skillstream.services.pipeline import build_pipeline

    spans = pair_spans(messages, counter)
    with (
        OpenAIStub(insert_each_turn) as stub,
        tempfile.TemporaryDirectory(prefix="ss-cost-") as home,
    ):
        settings = settings_for(home, stub.url, args)
        # Bare extraction: default apply options (no lifecycle, no near-duplicate merging).
        pipeline = build_pipeline(
            settings,
            embedder,
            executor=make_llm_executor(settings.llm, settings.storage.home),
            options=ApplyOptions(),
            maintenance=False,
        )
        t0 = time.perf_counter()

        def one_owner(owner: str):
            return pipeline.process_owner(pipeline.new_state(owner), spans[owner])

        with ThreadPoolExecutor(max_workers=settings.flow.concurrency) as pool:
            results = list(pool.map(one_owner, spans))
        seconds = time.perf_counter() - t0
        out = tally(stub.requests, counter)
    done = sum(1 for rs in results for r in rs if r.status == "done")
    failed = sum(1 for rs in results for r in rs if r.status == "failed")
    out.update(spans=done, failed_spans=failed, seconds=round(seconds, 1))
    return out


def per_1k(side: dict, turns: int) -> dict:
    return {k: round(side[k] * 1000 / turns, 1) for k in ("calls", "prompt_tokens", "prompt_words")}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--data", required=True, help="Conversations (LoCoMo JSON or any chat-log format)."
    )
    p.add_argument("--format", default="auto")
    p.add_argument("--json", dest="out", default="benchmarks/results/llm_cost.json")
    p.add_argument("--span-tokens", type=int, default=512)
    p.add_argument("--retrieve-k", type=int, default=20)
    p.add_argument("--k", type=int, default=3, help="Memory skills per span.")
    args = p.parse_args(argv)

    from skillstream.embed import get_embedder
    from skillstream.tokens import get_counter

    embedder = get_embedder("minilm")
    counter = get_counter("minilm")
    messages = read_messages(args.data, args.format)
    turns = len(messages)
    span = run_span_level(args, turns, counter)
    pair = run_pair_level(args, messages, counter, embedder)
    result = {
        "benchmark": "llm_cost",
        "data": str(args.data),
        "turns": turns,
        "owners": len({m.owner_id for m in messages}),
        "settings": {
            "span_tokens": args.span_tokens,
            "retrieve_k": args.retrieve_k,
            "memory_skill_k": args.k,
            "response_format": "json_schema",
        },
        "span_level": {**span, "per_1000_turns": per_1k(span, turns)},
        "pair_baseline": {**pair, "per_1000_turns": per_1k(pair, turns)},
        "calls_ratio": round(span["calls"] / pair["calls"], 4),
        "prompt_tokens_ratio": round(span["prompt_tokens"] / pair["prompt_tokens"], 4),
        "aim": "span-level calls <= 1/4 of the baseline's",
        "aim_met": span["calls"] * 4 <= pair["calls"],
        "token_counter": "all-MiniLM-L6-v2 WordPiece (tokens), whitespace (words)",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    s1, b1 = result["span_level"]["per_1000_turns"], result["pair_baseline"]["per_1000_turns"]
    table = [
        f"# LLM cost per 1,000 turns ({turns} turns of {Path(args.data).name}, "
        f"{result['owners']} owners)",
        "",
        "| executor | calls | calls / 1k turns | prompt tokens / 1k turns "
        "| prompt words / 1k turns |",
        "|---|---:|---:|---:|---:|",
        f"| span-level MemSkill (span {args.span_tokens} tokens, K={args.k}) | {span['calls']} | "
        f"{s1['calls']} | {s1['prompt_tokens']:,.0f} | {s1['prompt_words']:,.0f} |",
        f"| per-turn-pair baseline (same prompt) | {pair['calls']} | {b1['calls']} | "
        f"{b1['prompt_tokens']:,.0f} | {b1['prompt_words']:,.0f} |",
        "",
        f"Calls ratio {result['calls_ratio']:.3f} "
        f"(aim <= 0.25: {'met' if result['aim_met'] else 'NOT met'}); "
        f"prompt tokens ratio {result['prompt_tokens_ratio']:.3f}.",
        "Tokens: WordPiece of all-MiniLM-L6-v2 on the request messages; the schema in "
        "response_format is sent on every call of both and not counted.",
    ]
    json_path, md_path = write_results(args.out, result, table)
    print("\n".join(table))
    print(f"wrote {json_path} and {md_path}")
    return result


if __name__ == "__main__":
    main()
