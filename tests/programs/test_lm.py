"""deepresearch.programs.lm.models: output schemas with grammar bounds, the choice of adapter, and errors a user can act on."""

from __future__ import annotations

import asyncio
import json

import dspy
import pytest
from dspy.utils import exceptions as x

from deepresearch.programs.lm.models import (
    GRAMMAR_LIMITS,
    LMConfigError,
    SchemaAdapter,
    explain,
    make_lm,
    output_schema,
    structured_adapter,
)
from deepresearch.programs.stages.extractor import Extractor
from deepresearch.programs.stages.merger import Merger
from deepresearch.programs.stages.planner import Planner
from deepresearch.signatures.extract import ExtractLearnings
from deepresearch.signatures.taxonomy import PaperCard, PlacePapers
from deepresearch.signatures.types import Learning, Source, Task
from tests.scripted import inputs_of


def test_the_schema_carries_the_bounds_the_signature_states_in_words():
    schema = output_schema(dspy.Predict(ExtractLearnings).signature)
    props = schema["properties"]
    assert schema["required"] == ["quotes", "follow_up_questions"]
    assert props["quotes"]["maxItems"] == 5 and props["quotes"]["items"]["type"] == "integer"
    assert props["quotes"]["minItems"] == 1  # the passages were kept as evidence: the model quotes at least one
    assert props["follow_up_questions"]["maxItems"] == 3
    assert props["follow_up_questions"]["items"]["maxLength"] == GRAMMAR_LIMITS["follow_up_questions"]["items"]


def _unbounded_strings(part, path=""):
    """Paths of strings in a schema that the grammar lets run on (no maxLength, no enum)."""
    if isinstance(part, dict):
        if part.get("type") == "string" and "maxLength" not in part and "enum" not in part:
            yield path
        for key, value in part.items():
            yield from _unbounded_strings(value, f"{path}/{key}")
    elif isinstance(part, list):
        for value in part:
            yield from _unbounded_strings(value, path)


def test_every_string_a_model_writes_is_bounded_but_the_free_form_outputs():
    # a small model that runs on inside one string (a source id, a follow-up question) hits the token cap
    # and the whole reply is lost; only a repaired JSON text may be long
    import importlib
    import inspect
    import pkgutil

    from deepresearch import signatures

    free_form = {"RepairJSON": ["/properties/json_text"]}
    seen = 0
    for info in pkgutil.iter_modules(signatures.__path__):
        module = importlib.import_module(f"signatures.{info.name}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and issubclass(cls, dspy.Signature) and cls.__module__ == module.__name__:
                seen += 1
                schema = output_schema(dspy.ChainOfThought(cls).predict.signature)
                assert list(_unbounded_strings(schema)) == free_form.get(name, []), name
    assert seen >= 12


def _trial(i: int, *findings: str) -> Source:
    return Source(source_id=f"abc_{i}", title=f"Trial {i}", text=" ".join(findings))


def test_bounds_reach_only_the_decoder_a_longer_reply_still_parses(make_lm):
    sources = [_trial(i, f"Finding number {i} was reported by this trial.") for i in range(1, 8)]
    sent = []

    def handler(messages, request):
        sent.append(request)
        return json.dumps({"quotes": list(range(1, 8)), "follow_up_questions": []})  # 7 > maxItems 5

    lm = make_lm(handler)
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        out = asyncio.run(
            Extractor(max_learnings=10).acall(question="q", task=Task(query="q", goal="g"), sources=sources)
        )
    assert len(out.learnings) == 7  # parsed in full; the program's own limit decides what is kept
    assert sent[0].config.response_format is not None


def test_a_schema_request_ends_with_its_inputs_the_schema_says_the_rest(make_lm):
    sent, prompts = [], []

    def handler(messages, request):
        sent.append(request)
        prompts.append(messages)
        return json.dumps({"quotes": [1], "follow_up_questions": []})

    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        asyncio.run(
            Extractor().acall(
                question="q",
                task=Task(query="q", goal="g"),
                sources=[_trial(1, "Aspirin lowered the rate of stroke by 12%.")],
            )
        )
    last = prompts[0][-1]["content"]
    assert last.endswith('12%."}}]')  # the passages close the request: no reminder after them
    assert "Respond with" not in json.dumps(prompts[0])
    assert set(sent[0].config.response_format["schema"]["required"]) == {"quotes", "follow_up_questions"}


def test_a_quote_names_a_sentence_shown_and_is_cited_with_its_passage(make_lm):
    # sentences are numbered on across the passages: the grammar allows only a number shown, the code quotes
    # the sentence and cites its passage's source
    sources = [
        _trial(1, "Aspirin lowered the rate of stroke by 12%.", "The trial enrolled 2,000 adults."),
        _trial(2, "Bleeding rose in the aspirin group.", "Follow-up lasted five years in all arms."),
        _trial(3, "No effect on mortality was seen at all.", "Adherence was above ninety per cent."),
    ]
    sent, prompts = [], []

    def handler(messages, request):
        sent.append(request)
        prompts.append(json.dumps(messages))
        return json.dumps({"quotes": [4, 4, 9, 1], "follow_up_questions": []})

    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        out = asyncio.run(Extractor().acall(question="q", task=Task(query="q", goal="g"), sources=sources))
    # a number quoted twice is kept once; a number past the sentences shown is dropped and counted
    assert [(x.text, x.source_ids) for x in out.learnings] == [
        ("Follow-up lasted five years in all arms.", ["abc_2"]),
        ("Aspirin lowered the rate of stroke by 12%.", ["abc_1"]),
    ]
    assert out.invented == 1
    quotes = sent[0].config.response_format["schema"]["properties"]["quotes"]
    assert (quotes["items"]["type"], quotes["items"]["minimum"], quotes["items"]["maximum"]) == ("integer", 1, 6)
    assert "abc_" not in prompts[0]  # the model never sees, so never copies, an id


def test_the_lm_extractor_reads_each_passages_sentences_that_bear_most_on_the_task(make_lm):
    filler = [f"The cohort was described in section {i} of the methods." for i in range(1, 6)]
    sources = [
        _trial(1, *filler[:2], "Statin users reported muscle pain twice as often.", *filler[2:]),
        _trial(2, "Muscle pain under statins resolved after stopping the drug.", *filler),
    ]
    asked = []

    def handler(messages, request):
        asked.append(json.loads(inputs_of(messages)["passages"]))
        return json.dumps({"quotes": [2, 3], "follow_up_questions": []})

    task = Task(query="statin muscle pain", goal="how often statins cause muscle pain")
    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        out = asyncio.run(Extractor(sentences=2).acall(question="q", task=task, sources=sources))
    # two sentences a passage, the best for the task first in weight, kept in the paper's order
    (first, second) = asked[0]
    assert first["sentences"] == {"1": filler[0], "2": "Statin users reported muscle pain twice as often."}
    assert second["sentences"] == {"3": "Muscle pain under statins resolved after stopping the drug.", "4": filler[0]}
    assert [x.source_ids for x in out.learnings] == [["abc_1"], ["abc_2"]]


def test_an_id_the_model_copies_is_one_of_the_ids_shown(make_lm):
    # where a model must write an id (placing papers in a taxonomy), the ids become an enum in the grammar
    sent = []

    def handler(messages, request):
        sent.append(request)
        return json.dumps({"placements": [{"paper_id": "abc_2", "leaf": "Root > A"}]})

    papers = [PaperCard(paper_id=f"abc_{i}", title=f"t{i}") for i in range(1, 4)]
    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        out = dspy.Predict(PlacePapers)(topic="t", papers=papers, leaves=["Root > A", "Root > B"])
    assert [p.paper_id for p in out.placements] == ["abc_2"]
    ids = sent[0].config.response_format["schema"]["$defs"]["Placement"]["properties"]["paper_id"]
    assert (ids["type"], ids["enum"]) == ("string", ["abc_1", "abc_2", "abc_3"])


def test_a_list_the_call_bounds_gets_that_bound_in_the_grammar(make_lm):
    # "at most max_tasks": a small model that repeats one task until the list is full stops at the number asked
    sent = []

    def handler(messages, request):
        sent.append(request)
        return json.dumps({"reasoning": "r", "tasks": [{"query": "sparse attention", "goal": "g"}]})

    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        for n in (2, 9):
            asyncio.run(Planner().acall(question="q", known=[], max_tasks=n))
    first, second = (r.config.response_format["schema"]["properties"]["tasks"] for r in sent)
    assert first["maxItems"] == 2
    assert second["maxItems"] == GRAMMAR_LIMITS["tasks"]["maxItems"]  # never looser than the signature's own bound


def test_the_merger_can_name_only_learnings_it_was_shown_each_once(make_lm):
    sent = []

    def handler(messages, request):
        sent.append(request)
        return json.dumps({"order": [3, 1, 3, 7]})

    learnings = [Learning(text=f"Risk fell {i}0%.", source_ids=[f"s{i}_1", f"t{i}_1"]) for i in (1, 2, 3)]
    with dspy.context(lm=make_lm(handler), adapter=SchemaAdapter()):
        out = asyncio.run(Merger().acall(task=Task(query="q", goal="g"), learnings=learnings))
    # the code states each named learning once, as written, with its own sources; a number not shown is dropped
    assert out.summary == "Risk fell 30% [s3_1, t3_1]. Risk fell 10% [s1_1, t1_1]." and out.unknown == 1
    order = sent[0].config.response_format["schema"]["properties"]["order"]
    assert order["maxItems"] == 3 and (order["items"]["minimum"], order["items"]["maximum"]) == (1, 3)


@pytest.mark.parametrize(
    "mode,model,api_base,expected",
    [
        ("off", "openai/local", "http://127.0.0.1:9/v1", type(None)),
        ("schema", "openai/gpt-4o-mini", None, SchemaAdapter),
        ("auto", "openai/local", "http://127.0.0.1:9/v1", SchemaAdapter),
        ("auto", "openai/gpt-4o-mini", None, dspy.JSONAdapter),
        ("auto", "ollama_chat/some-unknown-model", None, type(None)),
    ],
)
def test_structured_mode_picks_the_adapter(mode, model, api_base, expected, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    adapter = structured_adapter(mode, make_lm(model, api_base=api_base))
    assert type(adapter) is expected


def test_unknown_mode_and_bad_settings_are_refused_before_any_request():
    with pytest.raises(LMConfigError, match="unknown structured mode"):
        structured_adapter("grammar", None)
    for temperature in (float("nan"), -1.0, 3.0):
        with pytest.raises(LMConfigError, match="temperature must be a number from 0 to 2"):
            make_lm("openai/local", api_base="http://127.0.0.1:9/v1", temperature=temperature)
    with pytest.raises(LMConfigError, match="timeout"):
        make_lm("openai/local", api_base="http://127.0.0.1:9/v1", timeout_s=0)


SECRET = "sk-proj-Zx81TestSecretValue0000aaaa"


@pytest.mark.parametrize(
    "err,lm_kind,expected",
    [
        (
            x.LMAuthError(f"Incorrect API key {SECRET}", status=401, provider="openai"),
            "hosted",
            "authentication error from openai; check OPENAI_API_KEY",
        ),
        (x.LMAuthError("bad key", status=401), "server", "check DEEPRESEARCH_API_KEY"),
        # the URL's credentials travel as Basic auth, so the server it names has none left to show
        (x.LMTransportError("connection refused"), "server", "could not reach http://h:1/v1"),
        (x.LMRateLimitError("slow down", status=429, provider="openai"), "hosted", "rate limited by openai"),
        (x.ContextWindowExceededError(model="openai/gpt-4o-mini"), "hosted", "context window"),
        (
            x.AdapterParseError(adapter_name="ChatAdapter", signature=ExtractLearnings, lm_response="garbage"),
            "hosted",
            "--structured schema",
        ),
        (asyncio.TimeoutError(), "server", "--lm-timeout"),
    ],
)
def test_explain_names_the_cause_and_the_fix_without_secrets(err, lm_kind, expected, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = (
        make_lm("openai/gpt-4o-mini", api_key="sk-x")
        if lm_kind == "hosted"
        else make_lm("openai/local", api_base=f"http://user:{SECRET}@h:1/v1")
    )
    text = explain(err, lm)
    assert expected in text and SECRET not in text


def test_a_draft_that_loops_keeps_each_repeated_sentence_once(make_lm):
    from deepresearch.programs.stages.writer import Writer
    from deepresearch.signatures.types import Finding

    risk = {"text": "Obesity raises diabetes risk.", "learnings": [1]}
    looped = [
        {"heading": "Answer", "sentences": [risk] * 39},
        {"heading": "Sources", "sentences": [risk, {"text": "Another point.", "learnings": [2]}]},
    ]
    lm = make_lm(lambda messages: json.dumps({"sections": looped}))
    summary = "Obesity raises diabetes risk [ab12cd34_1]. Another point [ef56ab78_1]."
    with dspy.context(lm=lm, adapter=SchemaAdapter()):
        out = asyncio.run(Writer().acall(question="q", findings=[Finding(query="q", summary=summary)]))
    assert out.report == (  # the loop is cut, and the report says a sentence once, under its first heading
        "## q\n\n### Answer\n\nObesity raises diabetes risk [ab12cd34_1].\n\n### Sources\n\nAnother point [ef56ab78_1]."
    )
    assert out.repeated == 39


def test_a_sentence_the_draft_already_said_in_its_section_is_left_out_once_and_nothing_else():
    from deepresearch.programs.stages.writer import drop_repeated_sentences

    # the 0.5B model's report on the demo question ended its paragraph with its second sentence again
    said = "Obesity should no longer be regarded simply as a cosmetic problem [ab12cd34_1]."
    draft = (
        f"## Answer\n\nYes. Obesity is associated with diabetes mellitus [ab12cd34_1]. {said} "
        f"The epidemic results from genetic susceptibility [ab12cd34_1]. *{said[:-1]}*. Yes.\n\n"
        f"- {said}\n- Another point that is long enough [ef56ab78_1].\n"
        f"- {said[:-13]}[ef56ab78_1].\n\n"
        f"### Elsewhere\n\n{said}\n\n| a | {said} |\n\n```\n{said}\n{said}\n```"
    )
    out, dropped = drop_repeated_sentences(draft)
    assert out == (
        "## Answer\n\nYes. Obesity is associated with diabetes mellitus [ab12cd34_1]. "
        f"{said[:-2]}, ef56ab78_1]. The epidemic results from genetic susceptibility [ab12cd34_1]. Yes.\n\n"
        "- Another point that is long enough [ef56ab78_1].\n\n"
        f"### Elsewhere\n\n{said}\n\n| a | {said} |\n\n```\n{said}\n{said}\n```"
    )
    # the emphasised copy and both list items go, the one citing another source giving that citation to the
    # sentence it repeats; short answers, tables, code and another section's sentence stay
    assert dropped == 3
    assert drop_repeated_sentences(out) == (out, 0)


def test_the_same_sentence_once_per_source_becomes_one_sentence_citing_them_all():
    from deepresearch.programs.stages.writer import drop_repeated_sentences

    # the 0.5B model's gallery report said one thing once per passage it read
    draft = "Obesity is a risk factor [aa11bb22_1]. Obesity is a risk factor [cc33dd44_1]. It is common. Obesity is a risk factor."
    assert drop_repeated_sentences(draft) == ("Obesity is a risk factor [aa11bb22_1, cc33dd44_1]. It is common.", 2)
    assert drop_repeated_sentences("Obesity is a risk factor. Obesity is a risk factor [cc33dd44_1].") == (
        "Obesity is a risk factor [cc33dd44_1].",
        1,
    )


def test_a_sentence_framed_as_what_the_passage_says_states_it_directly():
    from deepresearch.programs.stages.writer import drop_reporting_frames

    draft = (
        "## Findings\n\nThe passage states that obesity increases the risk of type 2 diabetes [a_1]. "
        "It also mentions that obesity is common in adults [b_1]. The study shows that weight loss helps [c_1].\n"
        "- The abstract notes waist size predicts risk [d_1].\n"
        "- It says so.\n\n"
        "> The passage states that quotes stay as written."
    )
    out, changed = drop_reporting_frames(draft)
    assert out == (
        "## Findings\n\nObesity increases the risk of type 2 diabetes [a_1]. "
        "Obesity is common in adults [b_1]. The study shows that weight loss helps [c_1].\n"
        "- Waist size predicts risk [d_1].\n"
        "- It says so.\n\n"
        "> The passage states that quotes stay as written."
    )
    assert changed == 3  # a study's finding keeps its frame; a frame with too little after it stays


def test_the_findings_shown_when_the_writer_fails_say_each_thing_once():
    from deepresearch.programs.research.finish import fallback_report
    from deepresearch.signatures.types import Finding

    said = "Obesity is a significant risk factor for type 2 diabetes [aa11bb22_1]."
    finding = Finding(query="Is obesity a risk factor?", summary=f"{said} Waist size predicts it [cc33dd44_1]. {said}")
    assert fallback_report("Q?", [finding]) == (
        f"## Q?\n\n### Is obesity a risk factor?\n\n{said} Waist size predicts it [cc33dd44_1]."
    )
