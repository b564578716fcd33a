"""Resuming an interrupted `deepresearch optimize`: the run's working folder beside `--out`.

While `optimize ... --out compiled.json` runs, `compiled.partial/` holds what it has paid for:

- `manifest.json`: the settings that decide the result (program, stage, metric, optimizer, data, split, seed,
  models, budgets). A rerun with the same settings resumes; one with other settings is refused with one line
  (`--overwrite` starts over).
- `lm/`: every LM answer the run received, keyed as the command's LM cache keys them (less the request
  timeout, which does not change an answer). The optimizers draw their choices from the seed, so a rerun asks
  the same questions in the same order and takes the answers an earlier start already had from here: it sends
  only the requests no earlier start completed. Within one start the folder only records (with `--no-cache`
  every request of a start still reaches the server).
- `dev_before.jsonl`: the dev score of each example before tuning, one line as each is scored, and the metric
  budget `--max-lm-calls` left once that evaluation ended (so a rerun tunes under the same budget).

A stopped run (Ctrl-C, SIGTERM: `RunFolder.stop`) records nothing more and sends no further LM request: the
optimizer's worker threads may still be running an example when the stop comes, and what the stop cuts short
is no score of the program (a rerun scores those examples again).

On success the folder is removed (`--keep-partial` keeps it); so it is after a start in which no dev example
got an answer from the model, unless it holds LM answers or dev scores a rerun resumes from. Nothing in it
holds an API key: the cache keys leave keys out, answers holding a configured secret are not stored
(`ServerKeyedCache.put`), and the manifest records server URLs with their credentials redacted.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dspy
from dspy.clients.cache import Cache

from deepresearch.programs.lm.models import DEFAULT_CACHE_DIR, ServerKeyedCache, configure_lm_cache
from deepresearch.programs.lm.secrets import redact_url

# The options that decide what an optimize run computes; a rerun must give the same ones to resume.
# (--workers, --lm-timeout, --no-cache, --cache-dir and -q change how it runs, not what it computes.)
SETTINGS = (
    "program",
    "stage",
    "metric",
    "optimizer",
    "data",
    "split",
    "limit",
    "dev",
    "dev_split",
    "from_runs",
    "candidates",
    "budget",
    "max_lm_calls",
    "seed",
    "lm",
    "api_base",
    "lm_server",
    "temperature",
    "structured",
    "max_output_tokens",
    "prompt_lm",
    "judge_lm",
    "judge_api_base",
    "preset",
    "depth",
    "breadth",
    "hits",
    "iterations",
    "corpus",
    "index",
)
_URLS = ("api_base", "judge_api_base", "lm_server")


class ResumeError(ValueError):
    """A working folder that cannot be resumed with these settings (the message names --overwrite)."""


class RunStopped(RuntimeError):
    """An LM request of a run that was stopped (`RunFolder.stop`); it was not sent."""


def settings_of(args: Any) -> dict[str, Any]:
    """The manifest's settings from the parsed options: server URLs with their credentials redacted."""
    found = {}
    for name in SETTINGS:
        value = getattr(args, name, None)
        if name in _URLS and value is not None:
            value = [redact_url(v) for v in value] if isinstance(value, list) else redact_url(value)
        found[name] = value
    return found


def example_key(example: dspy.Example) -> str:
    """A stable digest of an example's inputs (the same in every process)."""
    inputs = example.inputs() if hasattr(example, "inputs") else example
    return hashlib.sha1(repr(sorted((k, repr(v)) for k, v in dict(inputs).items())).encode()).hexdigest()


class _JournalTail(Cache):
    """Writes every answer the cache is given to the run's journal (after `ServerKeyedCache.put` redacted it,
    and only if it stored it: an answer holding a secret never gets here)."""

    journal: Any
    generation: int

    def put(self, request, value, ignored_args_for_cache_key=None, enable_memory_cache=True) -> None:
        try:
            key = self.cache_key(request, ignored_args_for_cache_key)
            if key not in self.journal:
                self.journal.set(key, (self.generation, value))
        except Exception:  # an answer that cannot be journaled is only asked again by a rerun
            pass
        super().put(request, value, ignored_args_for_cache_key, enable_memory_cache)


class RunCache(ServerKeyedCache, _JournalTail):
    """The command's LM cache (`--no-cache`, `--cache-dir` as usual) plus the run's journal of answers.

    A request the cache cannot answer is looked up in the journal, which answers only with what an earlier
    start of the run received (`generation` counts the starts).
    """

    def __init__(self, journal_dir: Path, generation: int, *, enabled: bool, cache_dir: str | Path | None):
        import diskcache

        folder = Path(cache_dir or DEFAULT_CACHE_DIR).expanduser()
        super().__init__(
            enable_disk_cache=enabled,
            enable_memory_cache=enabled,
            disk_cache_dir=str(folder) if enabled else None,
            disk_size_limit_bytes=1024**3,
        )
        self.journal = diskcache.Cache(str(journal_dir), eviction_policy="none", size_limit=2**40)
        self.generation = generation
        self.stopped = False  # set by RunFolder.stop: no request leaves after it
        # charged for each answer replayed while an LM-call budget holds (compile.capped): a replayed answer
        # stands for the request an earlier start sent, so a resumed run spends its budget as the whole one did
        self.charge: Callable[[], None] | None = None

    def cache_key(self, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> str:
        # a longer --lm-timeout (the usual reason to restart) or other retries do not change an answer
        ignored = [*(ignored_args_for_cache_key or []), "timeout", "num_retries"]
        return super().cache_key(request, ignored)

    def get(self, request: dict[str, Any], ignored_args_for_cache_key: list[str] | None = None) -> Any:
        if self.stopped:  # DSPy asks the cache before every request, from every thread
            raise RunStopped("the run was stopped; this LM request was not sent")
        answer = super().get(request, ignored_args_for_cache_key)
        if answer is not None:
            return answer
        try:
            key = self.cache_key(request, ignored_args_for_cache_key)
            entry = self.journal.get(key)
        except Exception:
            return None
        if entry is None or entry[0] >= self.generation:  # this start's own answers are not replayed
            return None
        if self.charge is not None:
            self.charge()
        if self.enable_memory_cache:  # a second ask within this start is a memory hit, as in an uninterrupted run
            with self._lock:
                self.memory_cache[key] = entry[1]
        return self._prepare_cached_response(entry[1])


class RunFolder:
    """The working folder of one optimize run (see the module docstring)."""

    MANIFEST = "manifest.json"
    SCORES = "dev_before.jsonl"

    def __init__(self, folder: Path, generation: int, answers: int):
        self.folder = folder
        self.generation = generation
        self.answers = answers  # LM answers journaled by earlier starts
        self._lock = threading.Lock()
        self._keys: list[str] = []
        self._cache: RunCache | None = None
        self.stopped = False
        self.budget: tuple[int, int] | None = None  # (metric budget, optimizer LM requests) of --max-lm-calls
        self._read_budget()

    @classmethod
    def open(cls, out: str | Path, settings: dict[str, Any], *, overwrite: bool = False) -> RunFolder:
        """Opens (or creates) the working folder of the run writing `out`.

        Raises:
            ResumeError: the folder holds a run with other settings (and `overwrite` is False), or cannot be read.
        """
        folder = Path(out).expanduser().with_suffix(".partial")  # compiled.json -> compiled.partial/
        if overwrite and folder.exists():
            shutil.rmtree(folder)
        manifest = folder / cls.MANIFEST
        generation, answers = 1, 0
        if manifest.exists():
            try:
                old = json.loads(manifest.read_text())
                before = old["settings"]
            except (OSError, ValueError, KeyError, TypeError):
                raise ResumeError(
                    f"{manifest} cannot be read, so the interrupted run in {folder} cannot be resumed; "
                    f"pass --overwrite to start over"
                ) from None
            now = json.loads(json.dumps(settings))  # as the manifest holds them (tuples become lists)
            changed = [name for name in dict.fromkeys([*before, *now]) if before.get(name) != now.get(name)]
            answers = _count_answers(folder / "lm")
            if changed and not answers and not (folder / cls.SCORES).exists():
                changed = []  # nothing was paid for yet (a start that failed on its options): no run to keep
            if changed:
                name = changed[0]
                raise ResumeError(
                    f"{folder} holds an interrupted run with other settings (--{name.replace('_', '-')} was "
                    f"{before.get(name)!r}, now {now.get(name)!r}); rerun it with its settings to resume, or pass "
                    f"--overwrite to start over"
                )
            generation = int(old.get("starts", 0)) + 1
        folder.mkdir(parents=True, exist_ok=True)
        manifest.write_text(json.dumps({"settings": settings, "starts": generation}, indent=1))
        return cls(folder, generation, answers)

    @property
    def resumed(self) -> bool:
        return self.generation > 1

    def install_cache(self, *, enabled: bool, cache_dir: str | Path | None) -> RunCache:
        """Makes the run's cache DSPy's (after the command's own preflight, which is never cached)."""
        cache = RunCache(self.folder / "lm", self.generation, enabled=enabled, cache_dir=cache_dir)
        cache.stopped = self.stopped
        self._cache = cache
        with dspy._cache_lock:
            dspy.cache = cache
        return cache

    def stop(self) -> None:
        """The run was stopped (Ctrl-C, SIGTERM): from now on no LM request is sent (each raises `RunStopped`)
        and no dev score is recorded, so that the examples the optimizer's threads were running when the stop
        came, cut short by it, are scored again by a rerun instead of keeping the score of a broken run."""
        with self._lock:
            self.stopped = True
        if self._cache is not None:
            self._cache.stopped = True

    # ---- dev scores before tuning --------------------------------------------------------------------

    def known_before(self, devset: list[dspy.Example]) -> dict[int, float]:
        """The dev scores before tuning that earlier starts recorded, by position in `devset` (an example
        whose inputs changed is scored again)."""
        self._keys = [example_key(ex) for ex in devset]
        known = {}
        path = self.folder / self.SCORES
        for line in path.read_text().splitlines() if path.exists() else ():
            try:
                row = json.loads(line)
            except ValueError:  # a line cut short by a kill
                continue
            i = row.get("index")
            if isinstance(i, int) and 0 <= i < len(devset) and row.get("example") == self._keys[i]:
                known[i] = float(row["score"])
        return known

    def record_before(self, index: int, score: float) -> None:
        """Appends one dev score before tuning (flushed at once: a kill loses at most the line being written)."""
        row = {"index": index, "example": self._keys[index] if index < len(self._keys) else None, "score": score}
        with self._lock:
            if self.stopped:  # a score that came after the stop may be that of a run it cut short
                return
            with (self.folder / self.SCORES).open("a") as f:
                f.write(json.dumps(row) + "\n")

    def forget_before(self) -> None:
        """Drops the dev scores before tuning this start recorded: they stand for no answer from the model
        (`compile.NoModelAnswer`), and a rerun scores those examples again."""
        with self._lock:
            (self.folder / self.SCORES).unlink(missing_ok=True)

    def record_budget(self, budget: int, lm_calls: int) -> None:
        """The metric budget and the optimizer's LM requests once the dev evaluation before tuning fixed them
        (`--max-lm-calls`)."""
        self.budget = (budget, lm_calls)
        (self.folder / "budget.json").write_text(json.dumps({"metric_budget": budget, "optimizer_lm_calls": lm_calls}))

    def _read_budget(self) -> None:
        try:
            saved = json.loads((self.folder / "budget.json").read_text())
            self.budget = (int(saved["metric_budget"]), int(saved["optimizer_lm_calls"]))
        except (OSError, ValueError, KeyError, TypeError):
            self.budget = None

    def summary(self, devset: list[dspy.Example]) -> str:
        """One line: what this start takes over from the earlier ones."""
        known = self.known_before(devset)
        return (
            f"resuming {self.folder}: {len(known)} of {len(devset)} dev scores before tuning, "
            f"{self.answers} LM answers recorded (start {self.generation})"
        )

    def finish(self, keep: bool = False) -> None:
        """After the compiled program is saved: removes the folder unless `keep`."""
        if not keep:
            self._remove()

    def abandon(self, keep: bool = False) -> bool:
        """After a start that saved nothing (no answer from the model): removes the folder unless `keep`
        (`--keep-partial`) or it holds what a rerun resumes from (LM answers, dev scores before tuning).

        Returns:
            Whether the folder is kept.
        """
        if keep or _count_answers(self.folder / "lm") or (self.folder / self.SCORES).exists():
            return True
        self._remove()
        return False

    def _remove(self) -> None:
        cache = getattr(dspy, "cache", None)
        if isinstance(cache, RunCache):  # the command's own cache again, without the journal about to go
            cache.journal.close()
            configure_lm_cache(enabled=cache.enable_disk_cache, cache_dir=cache.disk_cache_dir)
        shutil.rmtree(self.folder, ignore_errors=True)


def _count_answers(folder: Path) -> int:
    if not folder.exists():
        return 0
    import diskcache

    with diskcache.Cache(str(folder), eviction_policy="none", size_limit=2**40) as journal:
        return len(journal)
