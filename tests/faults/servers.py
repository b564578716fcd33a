"""Fault-injecting behaviour for the local OpenAI-compatible server (tests/integration/openai_server.py).

Each mode wraps a handler of `LocalOpenAIServer`: `echoing` writes what the server was sent (its
Authorization header, and anything else given) into the text of every reply, as a careless or hostile
server might; `obedient` makes every writer and extractor reply carry a line a corpus document told it
to write, as a model that follows injected instructions would.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Callable

from tests.integration.openai_server import LocalOpenAIServer


def echoing(handler: Callable, server: Callable[[], LocalOpenAIServer], extra: Callable[[], list[str]] = list):
    """`handler`'s replies with the request's Authorization header (and `extra()` strings) written into
    every finding, query and report sentence the scripted research LM produces."""

    def reply(messages):
        text = handler(messages)
        if not isinstance(text, str):
            return text
        auth = server().headers[-1].get("Authorization", "")
        echoed = " ".join([auth, urllib.parse.quote(auth, safe=""), *extra()])
        for marker in ("Finding from", "aspect", "The evidence is mixed"):
            text = text.replace(marker, f"{marker} (server saw {echoed})")
        return text

    return reply
