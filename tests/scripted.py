"""A deterministic LM for tests, replaced only at DSPy's LM boundary (an lm15 engine).

Handlers receive the chat messages DSPy rendered and return the raw completion text, so DSPy's
real adapters parse every answer. Route on the system message (which signature is asking) and on
the last user message (what it was asked), never on call order.
"""

from __future__ import annotations

import asyncio
import inspect
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
INPUT_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with |\Z)", re.S)


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


def answer_format(messages: Messages, fields: dict[str, Any]) -> str:
    """The completion in the format DSPy asked for: a JSON object (JSON adapters) or chat fields."""
    if "Outputs will be a JSON object" in messages[0]["content"]:
        return json.dumps(fields)
    return chat_format(fields)


def is_signature_prompt(messages: Messages) -> bool:
    """Whether DSPy rendered these messages for a signature (else a plain prompt)."""
    return messages[0]["role"] == "system" and "Your output fields are:" in messages[0]["content"]


def output_fields(messages: Messages) -> list[tuple[str, str]]:
    """(name, type) of the output fields the asking signature declares."""
    block = messages[0]["content"].split("Your output fields are:")[1].split("All interactions")[0]
    return FIELD_DECL.findall(block)


def inputs_of(messages: Messages) -> dict[str, str]:
    """The rendered input fields of the last user message, as raw text."""
    return {k: v.strip() for k, v in INPUT_FIELD.findall(messages[-1]["content"])}


def shown_candidates(messages: Messages, docs) -> dict[str, str]:
    """The gathering assessor's candidates in the last prompt, as their key -> the id of the doc in `docs` with
    the same title whose text holds the start of the text shown (the prompt shows keys, not doc ids)."""
    shown = {}
    for p in json.loads(inputs_of(messages)["candidates"]):
        text = p["text"].split(" …")[0]
        same = [d for d in docs if d.title == p["title"]]
        matches = [d.doc_id for d in same if d.text == text] or [d.doc_id for d in same if text[:60] in d.text]
        assert matches, f"candidate {p['paper_id']} matches none of the docs given"
        shown[p["paper_id"]] = matches[0]  # identical docs (same title and text) are interchangeable
    return shown


def instructions_of(messages: Messages) -> str:
    return messages[0]["content"].split("your objective is:")[-1].strip()


class ScriptedEngine:
    """Answers with handler(messages) (or handler(messages, request), to read e.g. the temperature);
    counts calls; optional latency for the async path: seconds, or a function of the request's messages.
    Each reply's usage reports `tokens` (prompt, completion), `cached` of the prompt read from a prompt cache."""

    def __init__(
        self, handler: Handler, delay: float = 0.0, tokens: tuple[int, int] = (10, 5), cached: int | None = None
    ):
        self.handler, self.delay, self.tokens, self.cached = handler, delay, tokens, cached
        self._wants_request = len(inspect.signature(handler).parameters) == 2  # handler(messages, request)
        self.calls = 0
        self.prompts: list[Messages] = []
        self._lock = threading.Lock()

    def _respond(self, request) -> Response:
        messages = request_to_chat(request)
        with self._lock:
            self.calls += 1
            self.prompts.append(messages)
        text = self.handler(messages, request) if self._wants_request else self.handler(messages)
        return Response(
            id=None,
            model=request.model,
            message=Message.assistant(text),
            finish_reason="stop",
            usage=Usage(input_tokens=self.tokens[0], output_tokens=self.tokens[1], cache_read_tokens=self.cached),
        )

    def complete(self, request) -> Response:
        return self._respond(request)


class AsyncScriptedEngine:
    def __init__(self, sync: ScriptedEngine):
        self.sync = sync

    async def complete(self, request) -> Response:
        delay = self.sync.delay(request_to_chat(request)) if callable(self.sync.delay) else self.sync.delay
        if delay:
            await asyncio.sleep(delay)
        return self.sync._respond(request)


def scripted_lm(
    handler: Handler, delay: float = 0.0, model: str = "fake/scripted", cached: int | None = None, **kw
) -> dspy.LM:
    """A dspy.LM whose completions come from `handler`; `lm.scripted` is the engine (calls, prompts)."""
    engine = ScriptedEngine(handler, delay=delay, cached=cached)
    lm = dspy.LM(model, engine=engine, async_engine=AsyncScriptedEngine(engine), cache=False, **kw)
    lm.scripted = engine
    return lm


def input_fields(messages: Messages) -> list[str]:
    """Names of the input fields the asking signature declares."""
    block = messages[0]["content"].split("Your input fields are:")[1].split("Your output fields are:")[0]
    return [name for name, _ in FIELD_DECL.findall(block)]


def routed_handler(routes: dict[type, Callable[[Messages], dict[str, Any]] | dict[str, Any]]) -> Handler:
    """Routes by signature: each key is a Signature class, recognised by its input and output field
    names in the system prompt (so routing survives instructions rewritten by an optimizer).

    A route's value is the output dict, or a callable of the messages returning it. A `reasoning`
    field is filled in when the predictor is a ChainOfThought.
    """

    def key(inputs, outputs) -> tuple:
        return tuple(inputs), tuple(o for o in outputs if o != "reasoning")

    table = {key(sig.input_fields, sig.output_fields): answer for sig, answer in routes.items()}

    def handler(messages: Messages, request=None) -> str:
        if not is_signature_prompt(messages):  # e.g. the one-request preflight of the command line
            return "OK"
        names = [n for n, _ in output_fields(messages)]
        answer = table.get(key(input_fields(messages), names))
        if answer is None:
            raise AssertionError(f"no scripted route for prompt: {messages[0]['content'][:300]}")
        if callable(answer):
            wants_request = len(inspect.signature(answer).parameters) == 2
            out = answer(messages, request) if wants_request else answer(messages)
        else:
            out = dict(answer)
        if "reasoning" in names and "reasoning" not in out:
            out = {"reasoning": "Scripted.", **out}
        return answer_format(messages, {n: out[n] for n in names if n in out})

    return handler


def default_for(type_name: str) -> Any:
    """A well-typed placeholder for an output field, from the type DSPy printed for it."""
    t = type_name.strip()
    if t == "bool":
        return True
    if t == "int":
        return 1
    if t == "float":
        return 0.5
    if t.startswith(("list", "tuple")):
        return []
    if t.startswith("dict"):
        return {}
    if t.startswith("Literal["):
        return re.findall(r"'([^']*)'", t)[0]
    return "placeholder"


def universal_handler(overrides: dict[str, Any] | None = None) -> Handler:
    """Answers any signature (optimizers' internal ones included): overridden fields, else typed defaults.

    An override is a value or a callable of the messages. Answers in JSON when DSPy asked for JSON.
    """
    overrides = overrides or {}

    def handler(messages: Messages) -> str:
        if not is_signature_prompt(messages):
            return "OK"
        out = {}
        for name, type_name in output_fields(messages):
            value = overrides.get(name)
            out[name] = value(messages) if callable(value) else (value if value is not None else default_for(type_name))
        return answer_format(messages, out)

    return handler
