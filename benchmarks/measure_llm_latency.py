"""Measures the local llama-server's seconds per call against output tokens; fits seconds = a + b * tokens.

    flock /tmp/llama.lock .venv/bin/python -m benchmarks.measure_llm_latency

Starts tests/real_lm/server.py's llama-server (SmolLM2-135M-Instruct), sends ~20 chat requests whose
`max_tokens` ranges from 8 to 400 (generation continues to max_tokens: `ignore_eos`), each with a
distinct prompt of the size of a stage prompt (a few passages, ~700 tokens) so no prompt cache helps,
and writes the raw (completion tokens, prompt tokens, seconds) triples, the least-squares constants and
the date and machine to benchmarks/llm_latency.json. bench_orchestration.py's `fitted` latency model
reads that file. Not a `bench_*` suite: it needs the real model and the shared lock.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import time
import urllib.request
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / "llm_latency.json"
MAX_TOKENS = [8, 16, 32, 48, 64, 96, 128, 160, 200, 240, 280, 320, 360, 400, 24, 72, 112, 176, 256, 336]
PASSAGE = (
    "Vitamin D supplementation and fracture risk in older adults: a randomised trial of 2,256 "
    "community-dwelling women found that an annual high dose increased falls and fractures, while "
    "daily doses combined with calcium reduced hip fractures in institutionalised patients. "
)


def call(base_url: str, i: int, max_tokens: int) -> tuple[int, int, float]:
    prompt = (
        f"Request {i}.\n"
        + "\n\n".join(f"[{j}] {PASSAGE}" for j in range(12))
        + "\n\nWrite a detailed summary of the evidence above."
    )
    body = json.dumps(
        {
            "model": "smollm2",
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "ignore_eos": True,
        }
    ).encode()
    req = urllib.request.Request(
        f"{base_url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(req, timeout=600) as resp:
        reply = json.loads(resp.read())
    seconds = time.perf_counter() - started
    usage = reply["usage"]
    return int(usage["completion_tokens"]), int(usage["prompt_tokens"]), seconds


def main() -> None:
    from tests.real_lm.server import LlamaServer

    threads = int(os.environ.get("DEEPRESEARCH_LLAMA_THREADS") or 2)
    load_before = os.getloadavg()
    rows = []
    with LlamaServer(threads=threads) as server:
        call(server.base_url, -1, 8)  # warm up
        for i, n in enumerate(MAX_TOKENS):
            completion, prompt, seconds = call(server.base_url, i, n)
            rows.append(
                {
                    "max_tokens": n,
                    "completion_tokens": completion,
                    "prompt_tokens": prompt,
                    "seconds": round(seconds, 4),
                }
            )
            print(f"max_tokens {n:4d}: {completion:4d} completion + {prompt} prompt tokens in {seconds:.3f}s")
    x = np.array([r["completion_tokens"] for r in rows], dtype=float)
    y = np.array([r["seconds"] for r in rows])
    b, a = np.polyfit(x, y, 1)
    residual = y - (a + b * x)
    r2 = 1 - float(residual @ residual) / float(((y - y.mean()) ** 2).sum())
    result = {
        "model": "SmolLM2-135M-Instruct (GGUF) on llama.cpp llama-server, tests/real_lm/server.py",
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cores": os.cpu_count(),
            "llama_threads": threads,
            "load_before": [round(v, 2) for v in load_before],
            "load_after": [round(v, 2) for v in os.getloadavg()],
        },
        "fit": {
            "formula": "seconds = a + b * completion_tokens",
            "a": round(float(a), 5),
            "b": round(float(b), 6),
            "r2": round(r2, 4),
        },
        "calls": rows,
    }
    OUT.write_text(json.dumps(result, indent=1) + "\n")
    print(f"fit: seconds = {a:.4f} + {b:.6f} * completion_tokens (R^2 {r2:.3f}); written to {OUT}")


if __name__ == "__main__":
    main()
