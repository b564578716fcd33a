"""Tests against a real LM: one llama-server (SmolLM2-135M-Instruct) per pytest session.

Every test in this folder carries the ``real_lm`` marker (deselect with ``-m "not real_lm"``).
When the server cannot be built or started, the tests that use it fail with the reason; they
never skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.real_lm.server import LlamaServer

HERE = Path(__file__).resolve().parent


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_lm: runs against a real LM (llama-server with SmolLM2-135M-Instruct, built once per machine)"
    )


def pytest_collection_modifyitems(config, items):
    # This hook sees the whole session's items: mark only those collected from this folder.
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.real_lm)


@pytest.fixture(scope="session")
def llama_server():
    """The running LlamaServer, shared by the session (base_url, model_path, log_path)."""
    with LlamaServer() as server:
        yield server
