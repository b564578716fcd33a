"""Secrets never leave: a server that echoes the key it was sent cannot get it into any file, the LM
cache, a log line or the terminal (issue 30, item 1)."""

from __future__ import annotations

import base64
import json
import urllib.parse
from pathlib import Path

import pytest

from deepresearch.cli import main
from deepresearch.programs.lm import secrets
from tests.faults.servers import echoing
from tests.integration.openai_server import LocalOpenAIServer
from tests.research_lm import research_handler

KEY = "sk-echo9Xq27LmPz81KdWv3Rt"  # a key-shaped value; the test greps for it and its other forms
USER, PASSWORD = "alice", "pa55:w0rd/Echo?z"  # a password that needs URL-encoding


def leaks(root: Path, values: list[str]) -> list[str]:
    """Every file under `root` (binary ones too: the disk cache) holding one of `values`, as `path: value`."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        found += [f"{path}: {v}" for v in values if v.encode() in data]
    return found


@pytest.fixture(autouse=True)
def _forget_registered(monkeypatch):
    monkeypatch.setattr(secrets, "_REGISTERED", set())  # what one test registers does not redact the next


def run_echoed(tmp_path, capfd, scifact_head, api_base_of, extra=list, options=()):
    server_ref = {}
    handler = echoing(research_handler(), lambda: server_ref["s"], extra)
    with LocalOpenAIServer(handler) as server:
        server_ref["s"] = server
        code = main(
            [
                "-vv",
                "run",
                "omega-3 fatty acids and heart disease",
                "--corpus",
                str(scifact_head(300)),
                "--lm",
                "openai/echo",
                "--api-base",
                api_base_of(server),
                "--out",
                str(tmp_path / "out"),
                "--cache-dir",
                str(tmp_path / "cache"),
                "--bibtex",
                "--depth",
                "1",
                "--breadth",
                "2",
                *options,
            ]
        )
    out, err = capfd.readouterr()
    return code, server, out, err


def test_an_echoed_environment_key_reaches_no_file_cache_log_or_terminal(
    tmp_path, capfd, scifact_head, clean_lm_env, monkeypatch
):
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", KEY)
    code, server, out, err = run_echoed(tmp_path, capfd, scifact_head, lambda s: s.base_url)
    assert code == 0, err[-2000:]
    assert all(h["Authorization"] == f"Bearer {KEY}" for h in server.headers)  # the key was sent, and echoed
    forms = [KEY, urllib.parse.quote(f"Bearer {KEY}", safe="")]
    assert leaks(tmp_path, forms) == []
    assert not [v for v in forms if v in out or v in err]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "server saw Bearer [REDACTED]" in report  # the echo reached the report, redacted
    for name in ("report.md", "trace.json", "journal.jsonl", "stages.jsonl", "references.bib", "run.json"):
        assert (tmp_path / "out" / name).exists(), name
    json.loads((tmp_path / "out" / "trace.json").read_text())  # still valid JSON after redaction
    assert any((tmp_path / "cache").rglob("*")), "the LM cache was written"


def test_credentials_in_the_api_base_are_sent_as_basic_auth_and_never_written(
    tmp_path, capfd, scifact_head, clean_lm_env
):
    quoted = urllib.parse.quote(PASSWORD, safe="")
    url = lambda s: f"http://{USER}:{quoted}@127.0.0.1:{s.port}/v1"  # noqa: E731
    # the server also echoes the password bare, URL-encoded and as user:password without a scheme
    extra = lambda: [PASSWORD, quoted, f"{USER}:{PASSWORD}@127.0.0.1"]  # noqa: E731
    # no verify stage: it would remove the echoed sentences (no passage holds them), and the echo must reach
    # the report to show it is redacted there
    code, server, out, err = run_echoed(tmp_path, capfd, scifact_head, url, extra, options=("--verify", "off"))
    assert code == 0, err[-2000:]
    assert "(server saw Basic [REDACTED]" in (tmp_path / "out" / "report.md").read_text()
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert server.headers and all(h["Authorization"] == f"Basic {token}" for h in server.headers)
    forms = [PASSWORD, quoted, token]
    assert leaks(tmp_path, forms) == []
    assert not [v for v in forms if v in out or v in err]


def test_credentials_in_a_settings_file_are_redacted(tmp_path, capfd, scifact_head, clean_lm_env, monkeypatch):
    quoted = urllib.parse.quote(PASSWORD, safe="")
    server_ref = {}
    handler = echoing(research_handler(), lambda: server_ref["s"], lambda: [PASSWORD])
    with LocalOpenAIServer(handler) as server:
        server_ref["s"] = server
        config = tmp_path / "settings.toml"
        config.write_text(f'[run]\napi-base = "http://{USER}:{quoted}@127.0.0.1:{server.port}/v1"\n')
        code = main(
            [
                "--config",
                str(config),
                "-vv",
                "run",
                "omega-3 and heart disease",
                "--corpus",
                str(scifact_head(300)),
                "--lm",
                "openai/echo",
                "--out",
                str(tmp_path / "out"),
                "--no-cache",
                "--depth",
                "1",
                "--breadth",
                "1",
            ]
        )
    out, err = capfd.readouterr()
    assert code == 0, err[-2000:]
    assert leaks(tmp_path / "out", [PASSWORD, quoted]) == []
    assert PASSWORD not in err and PASSWORD not in out and quoted not in err


def test_credentials_in_the_url_and_a_server_key_together_are_refused_in_one_line(
    tmp_path, capfd, clean_lm_env, monkeypatch
):
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", KEY)
    code = main(
        [
            "run",
            "q",
            "--corpus",
            "scifact",
            "--lm",
            "openai/x",
            "--api-base",
            f"http://{USER}:secretpass99@127.0.0.1:9/v1",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    _, err = capfd.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "credentials in its URL" in err
    assert "secretpass99" not in err and KEY not in err
