"""Redaction of credentials from text that may reach a trace, a report, a log or stderr.

Error messages from LM providers and HTTP clients often echo what they were sent: a URL with a password
in it, an `Authorization` header, a query string with `?key=...`, a JSON body with `"api_key": ...`.
`redact` replaces every credential it recognises with `REDACTED`:

1. the password (and a lone username that looks like a key) of any `scheme://user:pass@host` URL;
2. the value of an auth header or parameter (`Authorization`, `Bearer`, `x-api-key`, `api_key`,
   `access_token`, `password`, a query string's `key=`/`token=`/`sig=` ...), case-insensitive;
3. well-known key shapes wherever they appear (OpenAI/Anthropic `sk-...`, Google `AIza...`,
   Hugging Face `hf_...`, GitHub `ghp_...`/`github_pat_...`, Groq `gsk_...`, AWS `AKIA...`);
4. the exact values passed by the caller, those of credential-named environment variables, and those
   registered with `register_secret` / `strip_url_credentials` (an `--api-base` password, a key from a
   settings file), each also in its URL-encoded form (and `user:pass` in its Basic-auth base64 form);
5. the password of a `user:pass@host` written without a scheme.

This module is the one redaction point: a run's files (`outputs.atomic_write_*`, JSON Lines, the stage
log), the LM cache, log records and the terminal streams of the command line all pass through `redact`.

Values shorter than `MIN_SECRET_LENGTH` are never redacted as exact values, so that a key such as
`local` cannot blank out ordinary text; key shapes need a long, random-looking body, so that words such
as `sk-learn`, `risk-free` or `hf_hub_download` are left alone. Text without a credential comes back
unchanged, and redacting twice gives the same text as redacting once.
"""

from __future__ import annotations

import base64
import functools
import logging
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any

from deepresearch.programs.environment import credential_values

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8


# Values that, after a credential's name, say that there is no credential.
_PLACEHOLDERS = frozenset({"", "none", "null", "nil", "undefined", "true", "false", "***", REDACTED.lower()})

# 1. scheme://user:password@ and scheme://user@ (the authority ends at / ? # or whitespace).
# A scheme is bounded in length, so that long hyphenated words are not scanned again from each letter.
_SCHEME = r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,31}://"
_URL_PASSWORD = re.compile(rf"(?P<head>{_SCHEME}[^\s/?#@:]*:)(?P<password>[^\s/?#]+)(?P<at>@)")
_URL_USER = re.compile(rf"(?P<head>{_SCHEME})(?P<user>[^\s/?#@:\[\]]+)(?P<at>@)")
# 5. user:password@host without a scheme (a URL an HTTP client quoted without it)
_BARE_USERINFO = re.compile(
    r"(?P<head>(?<![\w/@:.%~+-])[\w.~%+-]+:)(?P<password>[^\s/?#@:\[\]]+)(?P<at>@)"
    r"(?=[A-Za-z0-9\[])"
)

# Secrets this process was configured with (`register_secret`), in every form they may be written in.
_REGISTERED: set[str] = set()

# 2. Auth headers and parameters. A value never ends with a full stop (the end of a sentence).
_AUTH_SCHEMES = r"(?:basic|bearer|digest|token|negotiate|ntlm|apikey|aws4-hmac-sha256)"
_AUTHORIZATION = re.compile(
    rf"(?P<head>\bauthorization[\"']?\s*[:=]\s*[\"']?(?:(?P<scheme>{_AUTH_SCHEMES})\s+)?)"
    rf"(?!{_AUTH_SCHEMES}\b)(?P<value>[^\s\"',;<>(){{}}\[\]]*[^\s\"',;<>(){{}}\[\].])",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<head>\bbearer\s+)(?P<value>[A-Za-z0-9._~+/=-]*[A-Za-z0-9_~+/=-])", re.IGNORECASE)
_KEY_NAME = (
    r"(?<![A-Za-z0-9])"  # `OPENAI_API_KEY` matches from `API_KEY`; no prefix repeat, so no backtracking blow-up
    r"(?:api[-_]?key|api[-_]?token|access[-_]?token|refresh[-_]?token|auth[-_]?token|id[-_]?token"
    r"|session[-_]?token|security[-_]?token|bearer[-_]?token|hf[-_]?token|github[-_]?token|gh[-_]?token"
    r"|client[-_]?secret|secret[-_]?key|secret[-_]?access[-_]?key|private[-_]?key|password|passwd)"
)
_KEY_VALUE = re.compile(
    rf"(?P<head>{_KEY_NAME}[\"']?\s*[:=]\s*)"
    r"(?:\"(?P<dq>[^\"\n]*)\"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s\"'&,;<>(){}\[\]]*[^\s\"'&,;<>(){}\[\].]))",
    re.IGNORECASE,
)
_QUERY_PARAM = re.compile(
    r"(?P<head>[?&](?:key|token|api[-_]?key|access[-_]?token|auth|sig|signature|secret|client[-_]?secret"
    r"|password|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|x-goog-credential)=)"
    r"(?P<value>[^&#\s\"'<>()\[\]]*[^&#\s\"'<>()\[\].])",
    re.IGNORECASE,
)

# literal parts of `_KEY_NAME`, one of which a text must hold for `_KEY_VALUE` to match
_KEY_WORDS = ("key", "token", "secret", "passw")

# 3. Key shapes: (pattern, whether the body must look random (`_looks_random`), the literal prefixes one
# of which a text must hold for the pattern to run).
_B = r"(?<![A-Za-z0-9_-])"  # not inside a longer word
_KEY_SHAPES = (
    (re.compile(_B + r"sk-(?P<body>[A-Za-z0-9_-]{16,})"), True, ("sk-",)),  # OpenAI, Anthropic, DeepSeek...
    (re.compile(_B + r"AIza(?P<body>[0-9A-Za-z_-]{30,})"), False, ("AIza",)),  # Google
    (re.compile(_B + r"hf_(?P<body>[A-Za-z0-9]{16,})"), True, ("hf_",)),  # Hugging Face
    (re.compile(_B + r"gh[pousr]_(?P<body>[A-Za-z0-9]{30,})"), False, ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (re.compile(_B + r"github_pat_(?P<body>[A-Za-z0-9_]{30,})"), False, ("github_pat_",)),  # GitHub fine-grained
    (re.compile(_B + r"gsk_(?P<body>[A-Za-z0-9]{20,})"), True, ("gsk_",)),  # Groq
    (re.compile(_B + r"(?:AKIA|ASIA)(?P<body>[0-9A-Z]{16})(?![A-Za-z0-9])"), False, ("AKIA", "ASIA")),  # AWS
)


def _mixed(segment: str) -> bool:
    """Whether a run of letters and digits mixes kinds of characters as random strings do: a letter and a
    digit, or a lowercase letter and an uppercase one after the first character (a capitalised word is not
    mixed)."""
    has_digit = any(c.isdigit() for c in segment)
    has_alpha = any(c.isalpha() for c in segment)
    has_lower = any(c.islower() for c in segment)
    inner_upper = any(c.isupper() for c in segment[1:])
    return (has_digit and has_alpha) or (has_lower and inner_upper)


def _looks_random(token: str, min_length: int = 16) -> bool:
    """Whether a token looks like a generated credential rather than a word or a name: at least `min_length`
    long, with an alphanumeric run of 8+ characters that is `_mixed`."""
    if len(token) < min_length:
        return False
    return any(len(seg) >= 8 and _mixed(seg) for seg in re.split(r"[^A-Za-z0-9]+", token))


def _usable(values: Iterable[str]) -> list[str]:
    """The strings of at least `MIN_SECRET_LENGTH` characters (and not part of the marker), longest first,
    without duplicates: the values long enough to be redacted exactly."""
    kept = {v for v in values if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH and v not in REDACTED}
    return sorted(kept, key=lambda v: (-len(v), v))


def env_secrets() -> list[str]:
    """The values (of at least `MIN_SECRET_LENGTH` characters, longest first) of the environment variables
    whose name looks like a credential (`environment.credential_values`), read now."""
    return _usable(credential_values())


def register_secret(*values: str | None) -> None:
    """Makes `redact` remove these values from now on, in this process, wherever they appear.

    Each value is kept as given, URL-encoded and URL-decoded. Values under `MIN_SECRET_LENGTH`
    characters are not removed as exact text (they are still removed in URL and header forms).
    """
    for value in values:
        if isinstance(value, str) and value:
            _REGISTERED.update({value, urllib.parse.quote(value, safe=""), urllib.parse.unquote(value)})


def registered_secrets() -> list[str]:
    """The registered values long enough to be redacted exactly, longest first."""
    return _usable(_REGISTERED)


def strip_url_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """A base URL without its `user:password@`, and the (user, password) it held, registered as secrets.

    The password, `user:password` and its Basic-auth base64 form are registered (`register_secret`), so
    they are redacted wherever a server or a client echoes them.

    Args:
        url: A base URL such as `http://user:pass@host:8080/v1`.

    Returns:
        (the URL without credentials, (user, password) URL-decoded) or (url, None) when it has none.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return url, None
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return url, None
    user, _, password = userinfo.partition(":")
    user, password = urllib.parse.unquote(user), urllib.parse.unquote(password)
    pair = f"{user}:{password}"
    register_secret(password, pair, userinfo, base64.b64encode(pair.encode()).decode())
    if not password:  # a lone user name is the key (`https://KEY@host`)
        register_secret(user)
    return urllib.parse.urlunsplit(parts._replace(netloc=host)), (user, password)


def basic_auth(credentials: tuple[str, str]) -> str:
    """The `Authorization` header of a (user, password) pair (`strip_url_credentials` registered its secrets)."""
    return "Basic " + base64.b64encode(f"{credentials[0]}:{credentials[1]}".encode()).decode()


def _redact_exact(text: str, values: list[str]) -> str:
    """Replaces exact occurrences of the values (already `_usable`), and of their percent-encoded forms."""
    forms = set(values) | {urllib.parse.quote(v, safe="") for v in values}
    found = [f for f in _usable(forms) if f in text]
    if not found:
        return text
    return re.sub("|".join(re.escape(f) for f in found), REDACTED, text)


def _sub_value(pattern: re.Pattern[str], text: str, keep=lambda value: False) -> str:
    """Replaces the `value` group of each match of `pattern` unless it is already the marker or `keep(value)`."""

    def replace(m: re.Match[str]) -> str:
        value = m.group("value")
        if value == REDACTED or keep(value):
            return m.group(0)
        return m.group(0)[: m.start("value") - m.start()] + REDACTED + m.group(0)[m.end("value") - m.start() :]

    return pattern.sub(replace, text)


def _redact_urls(text: str) -> str:
    """Replaces the password, and a lone username that looks like a key, of every URL in the text."""
    text = _URL_PASSWORD.sub(lambda m: m.group("head") + REDACTED + m.group("at"), text)

    def user(m: re.Match[str]) -> str:
        name = m.group("user")
        if name == REDACTED or not _looks_random(name, MIN_SECRET_LENGTH):
            return m.group(0)
        return m.group("head") + REDACTED + m.group("at")

    return _URL_USER.sub(user, text)


def _redact_authorization(text: str) -> str:
    """Replaces the credential of `Authorization` headers (`Authorization: Basic <b64>` and the like); without
    a scheme (`Authorization: <key>`) only a random-looking value, so that prose such as "Authorization: users
    must ..." is kept."""

    def replace(m: re.Match[str]) -> str:
        value = m.group("value")
        unsure = m.group("scheme") is None and not _looks_random(value, MIN_SECRET_LENGTH)
        if unsure or value.lower() in _PLACEHOLDERS:
            return m.group(0)
        return m.group("head") + REDACTED

    return _AUTHORIZATION.sub(replace, text)


def _redact_key_values(text: str) -> str:
    """Replaces the value after a credential's name (`api_key=`, `"password": "..."`, `x-api-key:`), but not
    a placeholder such as `None` or `null`."""

    def replace(m: re.Match[str]) -> str:
        group = next(g for g in ("dq", "sq", "bare") if m.group(g) is not None)
        value = m.group(group)
        if value.strip().lower() in _PLACEHOLDERS:
            return m.group(0)
        start, end = m.start(group) - m.start(), m.end(group) - m.start()
        return m.group(0)[:start] + REDACTED + m.group(0)[end:]

    return _KEY_VALUE.sub(replace, text)


def _redact_shapes(text: str) -> str:
    """Replaces well-known key shapes wherever they appear."""

    def replace(m: re.Match[str], check: bool) -> str:
        return m.group(0) if check and not _looks_random(m.group("body")) else REDACTED

    for pattern, check, prefixes in _KEY_SHAPES:
        if any(p in text for p in prefixes):
            text = pattern.sub(functools.partial(replace, check=check), text)
    return text


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """Remove every credential from a text.

    Args:
        text: Any text: an error message, a log line, a trace, a report.
        secrets: Exact values to remove as well (values under `MIN_SECRET_LENGTH` characters are ignored);
            the values of credential-named environment variables (`env_secrets`) are always removed.

    Returns:
        The text with each credential replaced by `REDACTED`; unchanged if it holds none.
    """
    if not text:
        return text
    text = _redact_exact(text, _usable([*secrets, *env_secrets(), *_REGISTERED]))
    # each pattern runs only where its literal part occurs: a trace of megabytes is redacted in milliseconds
    lower = text.lower()
    if "@" in text:
        if "://" in text:
            text = _redact_urls(text)
        text = _BARE_USERINFO.sub(
            lambda m: m.group(0) if m.group("password") == REDACTED else m.group("head") + REDACTED + m.group("at"),
            text,
        )
    if "authorization" in lower:
        text = _redact_authorization(text)
    if "bearer" in lower:
        text = _sub_value(_BEARER, text, keep=lambda v: not _looks_random(v, MIN_SECRET_LENGTH))
    if any(word in lower for word in _KEY_WORDS):
        text = _redact_key_values(text)
    if "=" in text:
        text = _sub_value(_QUERY_PARAM, text)
    return _redact_shapes(text)


def redact_obj(obj: Any) -> Any:
    """A copy of a JSON-like value with `redact` applied to every string in it (keys included)."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return {redact(k) if isinstance(k, str) else k: redact_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(redact_obj(v) for v in obj)
    return obj


def redact_json(obj: Any, **dumps: Any) -> str:
    """`json.dumps(obj, **dumps)` with every credential removed, still valid JSON.

    The text is checked as a whole first (one pass); only when it holds a credential are the strings
    redacted one by one, so that a replacement can never break the JSON's syntax.
    """
    import json

    text = json.dumps(obj, **dumps)
    if redact(text) == text:
        return text
    return json.dumps(redact_obj(json.loads(text)), **dumps)


class RedactingStream:
    """A text stream (sys.stdout, sys.stderr) that redacts what is written to it, line by line.

    Text is held until a newline or a carriage return (a progress bar's redraw), so a credential
    written in pieces is still seen whole; `flush` writes what is held.
    """

    def __init__(self, stream: Any):
        self.stream = stream
        self._held = ""

    def write(self, text: str) -> int:
        self._held += text
        cut = max(self._held.rfind("\n"), self._held.rfind("\r"))
        if cut >= 0:
            ready, self._held = self._held[: cut + 1], self._held[cut + 1 :]
            self.stream.write(redact(ready))
        return len(text)

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, ""
            self.stream.write(redact(held))
        self.stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...
        return getattr(self.stream, name)


def redact_url(url: str) -> str:
    """A URL fit to print: its password, and a lone username that looks like a key, replaced.

    Credentials in the query string (`?key=...`) and known key shapes are replaced as by `redact`.

    Args:
        url: A URL such as an `--api-base`.

    Returns:
        The URL with `user:[REDACTED]@` or `[REDACTED]@` in its authority; unchanged if it has no credential.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return redact(url)
    userinfo, at, host = parts.netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password and password != REDACTED:
            userinfo = f"{user}:{REDACTED}"
        elif not colon and _looks_random(user, MIN_SECRET_LENGTH):
            userinfo = REDACTED
        url = urllib.parse.urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))
    return redact(url)


class RedactingFilter(logging.Filter):
    """A logging filter that removes credentials from each record it sees.

    The message is formatted (`record.getMessage()`), redacted, and stored back in `record.msg` with
    `record.args = None`; a formatted traceback is redacted into `record.exc_text`. Install it on a
    handler (`handler.addFilter(RedactingFilter())`) to cover the records of every logger that reaches it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Redacts the record in place; returns whether it passes `logging.Filter`'s name check."""
        try:
            message = record.getMessage()
        except Exception:  # a malformed %-format: keep what there is
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return super().filter(record)
