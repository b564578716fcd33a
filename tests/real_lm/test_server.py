"""The real-LM plumbing, with plain DSPy: llama-server answers, bounds its replies, honours a JSON schema."""

from __future__ import annotations

import json

import dspy
import jsonschema

PLAN_SCHEMA = {
    "type": "object",
    "properties": {
        "queries": {
            "type": "array",
            "items": {"type": "string", "minLength": 1, "maxLength": 80},
            "minItems": 1,
            "maxItems": 3,
        }
    },
    "required": ["queries"],
    "additionalProperties": False,
}


def make_lm(server, max_tokens: int) -> dspy.LM:
    return dspy.LM(
        "openai/smollm2",
        api_base=server.base_url,
        api_key="local",
        max_tokens=max_tokens,
        temperature=0.0,
        num_retries=0,
        cache=False,
    )


def test_answers_a_prompt_with_bounded_text(llama_server):
    lm = make_lm(llama_server, max_tokens=32)

    outputs = lm("Name one planet of the solar system.")

    assert len(outputs) == 1
    text = outputs[0] if isinstance(outputs[0], str) else outputs[0]["text"]
    assert text.strip(), f"empty reply; server log {llama_server.log_path}"
    usage = lm.history[-1]["usage"]
    assert 0 < usage["completion_tokens"] <= 32, usage


def test_json_schema_response_format_is_enforced(llama_server):
    lm = make_lm(llama_server, max_tokens=256)
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "plan", "schema": PLAN_SCHEMA, "strict": True},
    }

    outputs = lm(
        messages=[
            {"role": "system", "content": "You plan web searches. Answer in JSON."},
            {"role": "user", "content": "Give up to three search queries about vitamin D and bone fractures."},
        ],
        response_format=response_format,
    )

    text = outputs[0] if isinstance(outputs[0], str) else outputs[0]["text"]
    plan = json.loads(text)
    jsonschema.validate(plan, PLAN_SCHEMA)
    assert 1 <= len(plan["queries"]) <= 3
    assert all(isinstance(q, str) and q for q in plan["queries"])
