"""A llama.cpp ``llama-server`` serving SmolLM2-135M-Instruct on 127.0.0.1, for tests with a real LM.

    with LlamaServer() as server:
        lm = dspy.LM("openai/smollm2", api_base=server.base_url, api_key="local")

The binary and the model come from ``build_llama_server.sh`` (built once per machine, cached
outside the clone). Every failure raises RuntimeError with the reason and the relevant log tail:
callers are tests that must fail, never skip, when no real LM can be had.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

BUILD_SCRIPT = Path(__file__).resolve().parent / "build_llama_server.sh"
MODEL_ALIAS = "smollm2"


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec: on Linux, have the kernel stop the server when the test process dies
    (a pytest killed mid-run must not leave a llama-server holding the cores)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build(timeout: float = 3600.0) -> tuple[Path, Path]:
    """Runs the build script (a no-op once cached; waits on a running build) -> (server, model)."""
    try:
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{BUILD_SCRIPT.name} did not finish within {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise RuntimeError(f"{BUILD_SCRIPT.name} failed (exit {proc.returncode}):\n{_tail(proc.stderr or proc.stdout)}")
    paths = [line for line in proc.stdout.splitlines() if line.strip()]
    if len(paths) < 2:
        raise RuntimeError(f"{BUILD_SCRIPT.name} printed no server and model paths:\n{_tail(proc.stdout)}")
    server, model = Path(paths[-2]), Path(paths[-1])
    if not os.access(server, os.X_OK) or not model.is_file():
        raise RuntimeError(f"{BUILD_SCRIPT.name} printed paths that are not usable: {server}, {model}")
    return server, model


class LlamaServer:
    """Context manager: builds (if needed), starts llama-server on a free port, waits until healthy.

    ``base_url`` is the OpenAI-compatible root (``http://127.0.0.1:PORT/v1``); ``log_path`` holds the
    server's output. ``n_predict`` is the reply length for requests that name no max_tokens; it is
    not a cap: in this llama.cpp a request's max_tokens replaces it (up to the context size), so
    callers bound replies with max_tokens.

    Threads (``threads``, else DEEPRESEARCH_LLAMA_THREADS, else 2): llama.cpp's worker threads meet
    at a spinning barrier for every operation, so when other processes want the same cores, as many
    threads as cores slows down many times over. Measured on 2 cores: alone, 2 threads are ~1.7x
    faster than 1; beside a second busy 2-thread llama-server, 2 threads fell to 0.3-6 tokens/s
    while 1 thread kept ~50 tokens/s. Set DEEPRESEARCH_LLAMA_THREADS=1 on a shared machine.
    """

    def __init__(
        self,
        ctx_size: int = 8192,
        threads: int | None = None,
        n_predict: int = 1024,
        startup_timeout: float = 120.0,
        build_timeout: float = 3600.0,
        extra_args: tuple[str, ...] = (),
    ):
        self.ctx_size = ctx_size
        self.threads = threads or int(os.environ.get("DEEPRESEARCH_LLAMA_THREADS") or 2)
        self.n_predict = n_predict
        self.startup_timeout = startup_timeout
        self.build_timeout = build_timeout
        self.extra_args = tuple(extra_args)
        self.server_path: Path | None = None
        self.model_path: Path | None = None
        self.port: int | None = None
        self.log_path: Path | None = None
        self.command: list[str] = []
        self.process: subprocess.Popen | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, lines: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return _tail(self.log_path.read_text(errors="replace"), lines)

    def _command(self) -> list[str]:
        return [
            str(self.server_path),
            "--model", str(self.model_path),
            "--alias", MODEL_ALIAS,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--ctx-size", str(self.ctx_size),
            "--threads", str(self.threads),
            "--threads-batch", str(self.threads),
            "--parallel", "1",
            "--n-predict", str(self.n_predict),
            "--seed", "0",
            "--cache-ram", "1024",
            "--jinja",
            "--no-ui",
            "--offline",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> None:
        if self.process is not None:
            raise RuntimeError("llama-server already started")
        self.server_path, self.model_path = build(self.build_timeout)
        fd, log = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
        os.close(fd)
        self.log_path = Path(log)
        # llama-server also reads LLAMA_ARG_* settings from the environment; keep the command line the truth.
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")}
        # A port found free can be taken before the server binds it: try a few.
        for attempt in range(3):
            self.port = _free_port()
            self.command = self._command()
            with open(log, "ab") as out:
                out.write(f"$ {' '.join(self.command)}\n".encode())
                out.flush()
                self.process = subprocess.Popen(
                    self.command,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
                )
            try:
                self._wait_healthy()
                return
            except _EarlyExit as exc:
                if "bind" in self.log_tail(10).lower() and attempt < 2:
                    self.process = None
                    continue
                self.process = None
                raise RuntimeError(f"{exc}; log {self.log_path}:\n{self.log_tail()}") from None
            except RuntimeError:
                self.stop()
                raise

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer"
        while True:
            code = self.process.poll()
            if code is not None:
                raise _EarlyExit(f"llama-server exited with status {code} before it was ready")
            try:
                with urllib.request.urlopen(f"{self.root_url}/health", timeout=5) as resp:
                    if resp.status == 200 and json.loads(resp.read() or b"{}").get("status") == "ok":
                        return
                    last = f"HTTP {resp.status}"
            except urllib.error.HTTPError as exc:  # 503 while the model loads
                last = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"llama-server not healthy after {self.startup_timeout:.0f} s (last: {last}); "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.25)

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class _EarlyExit(RuntimeError):
    pass
