"""A deterministic LM for tests, replaced only at DSPy's LM boundary (an lm15 engine).

Handlers receive the chat messages DSPy rendered and return the raw completion text, so DSPy's
real adapters parse every answer. Route on the system message (which signature is asking) and on
the last user message (what it was asked), never on call order.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import dspy
from dspy.lm15 import Message, Response, Usage

Messages = list[dict[str, str]]
Handler = Callable[[Messages], str]

FIELD_DECL = re.compile(r"^\d+\. `(\w+)` \((.*?)\):", re.M)
INPUT_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with the corresponding|\Z)", re.S)


def request_to_chat(request) -> Messages:
    msgs = []
    if request.system is not None:
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
        msgs.append({"role": "system", "content": system})
    msgs.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
    return msgs


def chat_format(fields: dict[str, Any]) -> str:
    """A completion in ChatAdapter's format."""
    body = "\n\n".join(f"[[ ## {k} ## ]]\n{v if isinstance(v, str) else json.dumps(v)}" for k, v in fields.items())
    return body + "\n\n[[ ## completed ## ]]"


def output_fields(messages: Messages) -> list[tuple[str, str]]:
    """(name, type) of the output fields the asking signature declares."""
    block = messages[0]["content"].split("Your output fields are:")[1].split("All interactions")[0]
    return FIELD_DECL.findall(block)


def inputs_of(messages: Messages) -> dict[str, str]:
    """The rendered input fields of the last user message, as raw text."""
    return {k: v.strip() for k, v in INPUT_FIELD.findall(messages[-1]["content"])}


def instructions_of(messages: Messages) -> str:
    return messages[0]["content"].split("your objective is:")[-1].strip()


class ScriptedEngine:
    """Answers with handler(messages); counts calls; optional latency for the async path."""

    def __init__(self, handler: Handler, delay: float = 0.0, tokens: tuple[int, int] = (10, 5)):
        self.handler, self.delay, self.tokens = handler, delay, tokens
        self.calls = 0
        self.prompts: list[Messages] = []
        self._lock = threading.Lock()

    def _respond(self, request) -> Response:
        messages = request_to_chat(request)
        with self._lock:
            self.calls += 1
            self.prompts.append(messages)
        text = self.handler(messages)
        return Response(id=None, model=request.model, message=Message.assistant(text), finish_reason="stop",
                        usage=Usage(input_tokens=self.tokens[0], output_tokens=self.tokens[1]))

    def complete(self, request) -> Response:
        return self._respond(request)


class AsyncScriptedEngine:
    def __init__(self, sync: ScriptedEngine):
        self.sync = sync

    async def complete(self, request) -> Response:
        if self.sync.delay:
            await asyncio.sleep(self.sync.delay)
        return self.sync._respond(request)


def scripted_lm(handler: Handler, delay: float = 0.0, model: str = "fake/scripted", **kw) -> dspy.LM:
    """A dspy.LM whose completions come from `handler`; `lm.scripted` is the engine (calls, prompts)."""
    engine = ScriptedEngine(handler, delay=delay)
    lm = dspy.LM(model, engine=engine, async_engine=AsyncScriptedEngine(engine), cache=False, **kw)
    lm.scripted = engine
    return lm


def routed_handler(routes: dict[type, Callable[[Messages], dict[str, Any]] | dict[str, Any]]) -> Handler:
    """Routes by signature: each key is a Signature class, recognised by its instructions in the system prompt.

    A route's value is the output dict, or a callable of the messages returning it. A `reasoning`
    field is filled in when the predictor is a ChainOfThought.
    """

    def handler(messages: Messages) -> str:
        system = messages[0]["content"]
        for sig, answer in routes.items():
            if sig.instructions.strip().splitlines()[0] in system:
                out = answer(messages) if callable(answer) else dict(answer)
                names = [n for n, _ in output_fields(messages)]
                if "reasoning" in names and "reasoning" not in out:
                    out = {"reasoning": "Scripted.", **out}
                return chat_format({n: out[n] for n in names if n in out})
        raise AssertionError(f"no scripted route for prompt: {system[:300]}")

    return handler
