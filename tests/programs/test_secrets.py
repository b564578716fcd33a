"""Redaction of credentials: each form is removed, the text around it kept, ordinary text unchanged."""

from __future__ import annotations

import logging
import time

import pytest

from deepresearch.programs.lm import secrets
from deepresearch.programs.lm.secrets import REDACTED, RedactingFilter, env_secrets, redact, redact_url

OPENAI = "sk-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6l"
OPENAI_PROJ = "sk-proj-" + "Xy9_Zq3-Wv7Tu5Rs1Po4Nm8Lk2Ji6Hg0Fe3Dc7Ba1Zy5Xw9Vu4Ts8Rq2Po6Nm0Lk"
ANTHROPIC = "sk-ant-api03-" + "Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7Qw9Er1Ty3Ui5Op7As9Df1Gh3Jk5-AbCdEfAA"
GOOGLE = "AIza" + "SyD3f8Kq1Zx9Lm2Np7Qr4St6Uv0Wx5Yz3Ab1C"
HUGGING_FACE = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZaBcDeFgH"
GITHUB = "ghp_" + "1a2B3c4D5e6F7g8H9i0J1k2L3m4N5o6P7q8R"
GITHUB_PAT = "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789abcdef"
GROQ = "gsk_" + "Zx8Cv7Bn6Mm5Ll4Kk3Jj2Hh1Gg0Ff9Dd8Ss7Aa6Qq5Ww4Ee3Rr2Tt"
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk"
BASIC = "dXNlcjpzM2NyZXRQYXNzd29yZA=="


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://user:s3cretPassw0rd@host:8080/v1", f"http://user:{REDACTED}@host:8080/v1"),
        (f"https://{OPENAI}@api.example.com/v1", f"https://{REDACTED}@api.example.com/v1"),
        (
            "Connection refused: postgres://admin:hunter2hunter2@db.local:5432/app while starting",
            f"Connection refused: postgres://admin:{REDACTED}@db.local:5432/app while starting",
        ),
        ("see ftp://anon:pa55word!x@files.example.org.", f"see ftp://anon:{REDACTED}@files.example.org."),
    ],
)
def test_credentials_in_urls_are_removed_and_the_rest_kept(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Authorization: Bearer {JWT}", f"Authorization: Bearer {REDACTED}"),
        (f"authorization: basic {BASIC} rejected", f"authorization: basic {REDACTED} rejected"),
        (f"401: invalid bearer {JWT}.", f"401: invalid bearer {REDACTED}."),
        ("x-api-key: q8Zr2Lm5Tx9Wv3Nk", f"x-api-key: {REDACTED}"),
        ("api-key=q8Zr2Lm5Tx9Wv3Nk; retry", f"api-key={REDACTED}; retry"),
        ('{"api_key": "q8Zr2Lm5Tx9Wv3Nk", "model": "gpt"}', f'{{"api_key": "{REDACTED}", "model": "gpt"}}'),
        ("{'API_KEY': 'q8Zr2Lm5 Tx9Wv3Nk'}", f"{{'API_KEY': '{REDACTED}'}}"),
        ("apikey=q8Zr2Lm5Tx9Wv3Nk", f"apikey={REDACTED}"),
        ("ACCESS_TOKEN=ya29.a0AfH6SMBx", f"ACCESS_TOKEN={REDACTED}"),
        ("OPENAI_API_KEY=q8Zr2Lm5Tx9Wv3Nk python run.py", f"OPENAI_API_KEY={REDACTED} python run.py"),
        ("password: correcthorse", f"password: {REDACTED}"),
        (
            "POST https://generativelanguage.googleapis.com/v1beta/models/gemini:generate?key=abc123XYZ&alt=sse",
            f"POST https://generativelanguage.googleapis.com/v1beta/models/gemini:generate?key={REDACTED}&alt=sse",
        ),
        ("GET /search?q=x&access_token=abcdef123456 failed", f"GET /search?q=x&access_token={REDACTED} failed"),
    ],
)
def test_auth_headers_and_parameters_are_removed(text, expected):
    assert redact(text) == expected


@pytest.mark.parametrize("key", [OPENAI, OPENAI_PROJ, ANTHROPIC, GOOGLE, HUGGING_FACE, GITHUB, GITHUB_PAT, GROQ, AWS])
def test_known_key_shapes_are_removed_anywhere(key):
    text = f"Error code: 401 - Incorrect API key provided: {key}. You can find your key online."
    assert redact(text) == f"Error code: 401 - Incorrect API key provided: {REDACTED}. You can find your key online."


def test_explicit_secrets_are_removed():
    out = redact("calling with local-key-9 then local-key-9", ["local-key-9"])
    assert out == f"calling with {REDACTED} then {REDACTED}"


def test_explicit_secrets_are_removed_when_percent_encoded():
    assert redact("http://host/?k=p%40ss%2Fw0rd", ["p@ss/w0rd"]) == f"http://host/?k={REDACTED}"


@pytest.mark.parametrize("short", ["", "local", "EMPTY", "abc1234"])
def test_short_explicit_secrets_are_ignored(short):
    text = "The local model answered: EMPTY output, run abc1234."
    assert redact(text, [short]) == text


def test_env_variable_values_are_redacted(monkeypatch):
    monkeypatch.setenv("DEEPRESEARCH_API_KEY", "plainvalue-42")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tokenvalue-77")
    monkeypatch.setenv("DB_PASSWORD", "letmein-please")
    assert {"plainvalue-42", "tokenvalue-77", "letmein-please"} <= set(env_secrets())
    out = redact("sent plainvalue-42, tokenvalue-77 and letmein-please")
    assert out == f"sent {REDACTED}, {REDACTED} and {REDACTED}"


def test_short_env_values_and_other_names_are_not_redacted(monkeypatch):
    monkeypatch.setenv("LOCAL_API_KEY", "local")
    monkeypatch.setenv("DEEPRESEARCH_MODEL", "openai/gpt-4o-mini")
    assert "local" not in env_secrets() and "openai/gpt-4o-mini" not in env_secrets()
    text = "local run of openai/gpt-4o-mini"
    assert redact(text) == text


PROSE = [
    "We trained a classifier with sk-learn and a risk-aware, risk-free baseline (see sk-learn-compatible-estimators).",
    "Weights were fetched with hf_hub_download from the hf_hub cache; see huggingface_hub.",
    "Harris et al., Array programming with NumPy, Nature 585, doi:10.1038/s41586-020-2649-2 (2020).",
    "The dataset is at https://example.org/data/v2?format=json&page=3#section-4 and http://localhost:8080/v1.",
    "The bearer of the token must present it; authorization: users need an account. Basic research costs 1,234.5 USD.",
    "Monkey=3, keyboard: QWERTY, task-specific gsk and ghp results; the API key is read from the environment.",
    "Contact: jane.doe@example.org, git@github.com:org/repo.git, ssh://git@github.com/org/repo.",
    "Values: api_key=None, password: null, 2401.12345v2, SHA 3f9a1c2e7b4d5f6a8c9e0d1b2a3c4f5e6d7b8a9c.",
]


@pytest.mark.parametrize("text", PROSE)
def test_ordinary_text_is_unchanged(text):
    assert redact(text) == text


@pytest.mark.parametrize("text", ["", "42", "https://api.openai.com/v1", "résumé — naïve café"])
def test_text_without_secrets_is_identity(text):
    assert redact(text) == text


@pytest.mark.parametrize(
    "text",
    [
        f"http://user:{OPENAI}@host:8080/v1?key={GOOGLE}",
        f"Authorization: Basic {BASIC}",
        f'{{"api_key": "{ANTHROPIC}", "Authorization": "Bearer {JWT}"}}',
        f"x-api-key: {GROQ} and {HUGGING_FACE}, {AWS}",
        f"https://{GITHUB}@github.com/org/repo and password='two words'",
    ],
)
def test_redact_is_idempotent(text):
    once = redact(text)
    assert redact(once) == once


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:s3cretPassw0rd@host:8080/v1", f"http://user:{REDACTED}@host:8080/v1"),
        ("http://user:p@ss:w0rd@host/v1", f"http://user:{REDACTED}@host/v1"),
        (f"https://{OPENAI}@host/v1", f"https://{REDACTED}@host/v1"),
        ("https://alice@host/v1", "https://alice@host/v1"),
        ("https://host/v1?key=abc123XYZ", f"https://host/v1?key={REDACTED}"),
        ("http://localhost:8000/v1", "http://localhost:8000/v1"),
        ("", ""),
    ],
)
def test_redact_url(url, expected):
    assert redact_url(url) == expected


class Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture
def collected(monkeypatch):
    monkeypatch.setattr(secrets, "_REGISTERED", set())  # the secret registered here redacts no other test's text
    secrets.register_secret("explicit-secret-1")
    logger = logging.getLogger("tests.secrets")
    handler = Collect()
    handler.addFilter(RedactingFilter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield logger, handler
    logger.removeHandler(handler)


def test_redacting_filter_removes_keys_from_formatted_records(collected):
    logger, handler = collected
    logger.info("calling %s with key %s (%d tries)", "https://api.example.com", OPENAI, 3)
    (record,) = handler.records
    assert record.getMessage() == f"calling https://api.example.com with key {REDACTED} (3 tries)"
    assert record.args is None and OPENAI not in handler.format(record)


def test_redacting_filter_removes_explicit_secrets_and_tracebacks(collected):
    logger, handler = collected
    try:
        raise RuntimeError(f"provider said: bad key explicit-secret-1 / {GOOGLE}")
    except RuntimeError:
        logger.exception("failed with explicit-secret-1")
    (record,) = handler.records
    formatted = logging.Formatter().format(record)
    assert "explicit-secret-1" not in formatted and GOOGLE not in formatted
    assert "provider said: bad key" in formatted and "RuntimeError" in formatted


def test_redacting_filter_works_with_caplog(caplog):
    logger = logging.getLogger("tests.secrets.caplog")
    caplog.handler.addFilter(RedactingFilter())
    try:
        with caplog.at_level(logging.WARNING, logger="tests.secrets.caplog"):
            logger.warning("retrying %s", f"Authorization: Bearer {JWT}")
    finally:
        caplog.handler.removeFilter(caplog.handler.filters[-1])
    assert caplog.messages == [f"retrying Authorization: Bearer {REDACTED}"]


@pytest.mark.parametrize("text", ["a_" * 10000, "a-" * 10000, "sk-" * 7000, "http://a:" * 5000, "api_key: " * 5000])
def test_redact_is_linear_on_long_repetitive_text(text):
    start = time.perf_counter()
    redact(text)
    assert time.perf_counter() - start < 2.0
