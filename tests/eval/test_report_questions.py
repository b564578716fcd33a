import json

import pytest

from deepresearch.eval.questions import QuestionsError, load_eco_questions, load_question_file, load_questions


def test_ecology_questions_are_numbered_like_the_report_files(data_dir):
    questions = load_eco_questions(data_dir / "deepresearch_eco" / "questions.csv")
    assert len(questions) == 49
    assert [q.qid for q in questions] == [str(i) for i in range(1, 50)]
    first = questions[0]
    assert first.text == "What is the effect of management extensification on grasslands plant diversity?"
    assert first.reference_answer.startswith("Management extensification affects grassland biodiversity.")
    # the form's index column repeats 44 and skips 45; ids follow the rows instead
    assert [q.metadata["form_index"] for q in questions[43:45]] == ["44", "44"]
    purposes = [q.metadata["purpose"] for q in questions]
    assert (
        purposes.count("Idea generation") == 16 and purposes.count("Collecting evidence for/against a hypothesis") == 13
    )


def test_named_sets_are_found_under_the_data_folder(data_dir):
    assert len(load_questions("eco", data_dir=data_dir, limit=5)) == 5
    assert load_questions(str(data_dir / "deepresearch_eco"))[48].qid == "49"


def test_jsonl_records_with_key_points(tmp_path):
    path = tmp_path / "drg.jsonl"
    path.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {
                    "id": "q7",
                    "query": "Is coffee healthy?",
                    "key_points": [{"point": "Moderate intake is safe."}, "Dose matters."],
                },
                {"question": "Why is the sky blue?", "answer": "Rayleigh scattering."},
            ]
        )
    )
    qs = load_question_file(path)
    assert (qs[0].qid, qs[0].text, qs[0].key_points) == (
        "q7",
        "Is coffee healthy?",
        ("Moderate intake is safe.", "Dose matters."),
    )
    assert (qs[1].qid, qs[1].reference_answer, qs[1].key_points) == ("2", "Rayleigh scattering.", ())


def test_text_and_json_lists(tmp_path):
    (tmp_path / "q.txt").write_text("First question?\n\nSecond question?\n")
    assert [q.text for q in load_questions(str(tmp_path / "q.txt"))] == ["First question?", "Second question?"]
    (tmp_path / "q.json").write_text(json.dumps({"data": [{"question": "Third?"}]}))
    assert load_questions(str(tmp_path / "q.json"))[0].text == "Third?"


def test_bad_inputs_say_what_to_do(tmp_path):
    (tmp_path / "bad.jsonl").write_text('{"question": "ok"}\nnot json\n')
    with pytest.raises(QuestionsError, match="line 2 is not JSON"):
        load_question_file(tmp_path / "bad.jsonl")
    (tmp_path / "empty.jsonl").write_text('{"id": 3}\n')
    with pytest.raises(QuestionsError, match="no question text"):
        load_question_file(tmp_path / "empty.jsonl")
    with pytest.raises(QuestionsError, match="unknown question set"):
        load_questions("nonsense")


def test_hub_sets_fail_clearly_when_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(QuestionsError, match="pass a local question file"):
        load_questions("researchy", data_dir=tmp_path)
