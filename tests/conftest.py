"""Shared fixtures: local data, a small real corpus, the scripted LM, and DSPy settings reset."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DSPY_CACHEDIR", str(Path(__file__).resolve().parents[1] / ".cache" / "dspy"))
# the commands' LM answer cache: inside the checkout (ignored by git), never the user's home cache
os.environ["DEEPRESEARCH_CACHE_DIR"] = str(Path(__file__).resolve().parents[1] / ".cache" / "lm-tests")

import dspy  # noqa: E402
import pytest  # noqa: E402

from deepresearch.retrievers import BM25Retriever, Corpus, embed, load_corpus  # noqa: E402
from tests.scripted import routed_handler, scripted_lm  # noqa: E402

# Every LM call in a test must reach its (fake) server: no answers from a cache of an earlier run.
dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


def data_root() -> Path:
    """DEEPRESEARCH_DATA, else the shared data folder beside the repository."""
    root = Path(os.environ.get("DEEPRESEARCH_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
    if not root.exists():
        raise RuntimeError(f"test data not found at {root}; set DEEPRESEARCH_DATA to the shared data folder")
    return root


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return data_root()


@pytest.fixture(scope="session")
def scifact(data_dir) -> Corpus:
    return load_corpus(data_dir / "scifact")


@pytest.fixture(scope="session")
def scifact_bm25(scifact) -> BM25Retriever:
    return BM25Retriever(scifact)


@pytest.fixture
def make_lm():
    """scripted_lm(handler) factory; see tests/scripted.py."""
    return scripted_lm


@pytest.fixture
def routed():
    return routed_handler


@pytest.fixture
def clean_lm_env(monkeypatch, tmp_path):
    """No LM key, base URL or default model from the developer's environment; work in a temporary folder."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "DEEPRESEARCH_API_KEY", "DEEPRESEARCH_LM"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _reset_dspy_settings():
    yield
    dspy.settings.configure(lm=None, trace=[], callbacks=[])
    # commands install a disk cache of their own (deepresearch.programs.lm.models.configure_lm_cache); no later test may be
    # answered from it
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)


@pytest.fixture()
def encoded(monkeypatch):
    """How many texts each call of the encoder embedded (a spy: the real encoder still runs)."""
    calls, real = [], embed.encode

    def spy(texts, *args, **kwargs):
        calls.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embed, "encode", spy)
    return calls


@pytest.fixture(scope="session")
def scifact_head(tmp_path_factory, data_dir):
    """n -> a JSONL file holding SciFact's first n records (a small real corpus), written once per size."""
    files: dict[int, Path] = {}

    def head(n: int) -> Path:
        if n not in files:
            files[n] = tmp_path_factory.mktemp("scifact-head") / f"scifact-{n}.jsonl"
            with (data_dir / "scifact" / "corpus.jsonl").open(encoding="utf-8") as f:
                files[n].write_text("".join(next(f) for _ in range(n)), encoding="utf-8")
        return files[n]

    return head
