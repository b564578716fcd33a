"""Environment variables are read at the edge (issue 31, item 4): one module reads them, the command-line
modules pass what it finds to the library as arguments, and the documented variables keep working."""

from __future__ import annotations

import ast
from pathlib import Path

from deepresearch.programs import environment

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("signatures", "retrievers", "programs", "eval", "optimize", "cli")
READERS = {"programs/environment.py", "cli/__init__.py"}  # the dispatcher only sets LiteLLM's offline price map


def environment_reads(path: Path) -> list[int]:
    """Lines of `path` that touch os.environ or call os.getenv (docstrings and comments aside)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb"):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "os"
            and any(a.name in ("environ", "getenv") for a in node.names)
        ):
            lines.append(node.lineno)
    return lines


def test_only_the_environment_module_reads_the_environment():
    files = [p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py")]
    found = {str(p.relative_to(ROOT)): lines for p in files if (lines := environment_reads(p))}
    assert set(found) <= READERS, {k: v for k, v in found.items() if k not in READERS}
    assert "programs/environment.py" in found  # the walk sees a reader where there is one


def test_each_engine_gets_its_documented_variables(monkeypatch, tmp_path):
    for name in ("OPENALEX_API_KEY", "NCBI_EMAIL", "DEEPRESEARCH_ENGINE_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENALEX_MAILTO", "me@example.org")
    monkeypatch.setenv("S2_API_KEY", "  s2-key-0123456789  ")
    monkeypatch.setenv("NCBI_API_KEY", "")  # set but blank: no key
    monkeypatch.setenv("DEEPRESEARCH_PUBMED_URL", "http://127.0.0.1:9/eutils")
    settings = environment.engine_settings(["openalex", "s2", "pubmed", "arxiv"])
    assert settings["credentials"] == {
        "openalex": {"mailto": "me@example.org"},
        "semanticscholar": {"api_key": "s2-key-0123456789"},
        "pubmed": {"email": "me@example.org"},
    }  # NCBI_EMAIL, else OPENALEX_MAILTO
    assert settings["base_urls"] == {"pubmed": "http://127.0.0.1:9/eutils"}
    assert "cache_dir" not in settings  # the library's own default folder
    monkeypatch.setenv("DEEPRESEARCH_ENGINE_CACHE", str(tmp_path / "c"))
    assert environment.engine_settings(["arxiv"])["cache_dir"] == str(tmp_path / "c")


def test_the_lm_variables_are_read_where_the_commands_ask(monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_LM", "openai/gpt-4.1-mini")
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", "local-key-0123456789")
    monkeypatch.setenv("GPU_KEY", "gpu-key-0123456789")
    monkeypatch.delenv("OTHER_KEY", raising=False)
    assert environment.default_lm() == "openai/gpt-4.1-mini" and environment.api_key() == "local-key-0123456789"
    assert environment.server_keys(["GPU_KEY", "OTHER_KEY", "GPU_KEY"]) == {"GPU_KEY": "gpu-key-0123456789"}
    assert {"local-key-0123456789", "gpu-key-0123456789"} <= set(environment.credential_values())
