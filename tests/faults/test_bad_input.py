"""Input the commands used to accept and get wrong (issue 30, item 6): each is refused in one line, or done
right."""

from __future__ import annotations

import argparse
import json
import socket
import threading

import pytest

from deepresearch.cli import main
from deepresearch.programs.lm.models import make_lm, preflight
from tests.integration.openai_server import Error, LocalOpenAIServer
from tests.research_lm import research_handler


def one_line(capfd) -> str:
    err = capfd.readouterr().err
    lines = [line for line in err.strip().splitlines() if "error" in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("option", ["--budget", "--limit"])
def test_optimize_refuses_a_negative_budget_or_limit(capfd, clean_lm_env, option):
    code = main(
        [
            "optimize",
            "--program",
            "research",
            "--metric",
            "citation_f1",
            "--data",
            "scifact",
            "--lm",
            "openai/x",
            "--api-base",
            "http://127.0.0.1:9/v1",
            "--out",
            "compiled.json",
            option,
            "-1",
        ]
    )
    assert code == 2 and f"{option} must be >= 1, got -1" in one_line(capfd)


def test_a_nan_deadline_is_bad_input_not_a_research_failure(tmp_path, capfd, clean_lm_env):
    assert main(["run", "q", "--lm", "offline", "--deadline", "nan", "--out", str(tmp_path / "o")]) == 2
    assert "--deadline must be > 0, got nan" in one_line(capfd)
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_terminal_escape_codes_in_the_question_never_reach_the_report(tmp_path, capfd, clean_lm_env, scifact_head):
    question = "Does \x1b[31mobesity\x1b[0m raise \x1b]0;owned\x07diabetes risk?"
    assert (
        main(
            [
                "-q",
                "run",
                question,
                "--corpus",
                str(scifact_head(300)),
                "--lm",
                "offline",
                "--depth",
                "1",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    for name in ("report.md", "trace.json", "run.json"):
        text = (tmp_path / "o" / name).read_text()
        assert "\x1b" not in text and "\x07" not in text, name
    assert "Does obesity raise diabetes risk?" in (tmp_path / "o" / "report.md").read_text()


def test_a_csv_with_an_unterminated_quote_is_refused_naming_the_file(tmp_path, capfd):
    bad = tmp_path / "refs.csv"
    bad.write_text('title,abstract\n"Omega 3 study,Fish oil reduces risk\nSecond,Another abstract\n')
    assert main(["index", str(bad), "--out", str(tmp_path / "i")]) == 2
    line = one_line(capfd)
    assert str(bad) in line and "malformed" in line and "quote" in line


def test_an_undecodable_corpus_names_the_file(tmp_path, capfd):
    bad = tmp_path / "corpus.jsonl"
    bad.write_bytes(b'{"_id": "1", "title": "a", "text": "\xff\xfe bad"}\n')
    assert main(["index", str(bad), "--out", str(tmp_path / "i")]) == 2
    line = one_line(capfd)
    assert str(bad) in line and "not UTF-8" in line


def test_an_unknown_dense_model_and_a_saved_program_of_the_wrong_shape_are_one_line(
    tmp_path, capfd, clean_lm_env, scifact_head
):
    corpus = str(scifact_head(100))
    assert (
        main(
            [
                "-q",
                "run",
                "q",
                "--corpus",
                corpus,
                "--lm",
                "offline",
                "--retriever",
                "dense",
                "--dense-model",
                "no-such-model-anywhere",
                "--out",
                str(tmp_path / "d"),
            ]
        )
        == 2
    )
    assert "no-such-model-anywhere" in one_line(capfd)
    saved = tmp_path / "program.json"
    saved.write_text(json.dumps({"x": 1}))
    assert (
        main(
            [
                "-q",
                "run",
                "q",
                "--corpus",
                corpus,
                "--lm",
                "openai/x",
                "--api-base",
                "http://127.0.0.1:9/v1",
                "--no-preflight",
                "--program",
                str(saved),
                "--out",
                str(tmp_path / "p"),
            ]
        )
        == 2
    )
    line = one_line(capfd)
    assert str(saved) in line and "not a saved research program" in line


def test_eval_taxonomy_refuses_a_negative_limit(capfd, clean_lm_env):
    assert main(["eval", "taxonomy", "--limit", "-2", "--lm", "offline"]) == 2
    assert "--limit must be >= 1" in one_line(capfd)


def _truncating_server() -> int:
    """A server that answers 200 with a Content-Length of 500 and closes after 16 bytes of body."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(5)

    def serve():
        while True:
            conn, _ = sock.accept()
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(next(h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")).split(b":")[1])
            while len(body) < length:
                body += conn.recv(65536)
            conn.sendall(
                b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"id": "x", "choi'
            )
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return sock.getsockname()[1]


def test_a_truncated_reply_is_not_reported_as_an_unreachable_server(tmp_path, capfd, clean_lm_env):
    port = _truncating_server()
    assert (
        main(
            ["run", "q", "--lm", "openai/x", "--api-base", f"http://127.0.0.1:{port}/v1", "--out", str(tmp_path / "o")]
        )
        == 2
    )
    line = one_line(capfd)
    assert "was cut off" in line and "could not reach" not in line


def test_preflight_waits_out_a_429_with_retry_after(clean_lm_env):
    replies = iter([Error(429, "slow down", {"Retry-After": "1"})])

    with LocalOpenAIServer(lambda messages: next(replies, "OK")) as server:
        preflight(make_lm("openai/x", api_base=server.base_url, cache=False, num_retries=0))
        assert len(server.requests) == 2


OPTIMIZE = ["optimize", "--program", "research", "--metric", "recall", "--data", "scifact", "--out", "compiled.json"]
GATHER = ["eval", "gather", "--data", "scifact", "--out", "gathered"]


@pytest.mark.parametrize(
    "command,option,value,message",
    [
        (OPTIMIZE, "--workers", "0", "--workers must be >= 1, got 0"),
        (OPTIMIZE, "--threads", "0", "--threads must be >= 1, got 0"),  # a deprecated spelling, named as typed
        (OPTIMIZE, "--max-lm-calls", "0", "--max-lm-calls must be >= 1, got 0"),  # it made 4 LM calls
        (OPTIMIZE, "--budget", "0", "--budget must be >= 1, got 0"),
        (OPTIMIZE, "--limit", "0", "--limit must be >= 1, got 0"),
        (OPTIMIZE, "--iterations", "0", "--iterations must be >= 1, got 0"),
        (OPTIMIZE, "--depth", "0", "--depth must be >= 1, got 0"),
        (OPTIMIZE, "--breadth", "0", "--breadth must be >= 1, got 0"),
        (OPTIMIZE, "--hits", "0", "--hits must be >= 1, got 0"),
        (OPTIMIZE, "--max-output-tokens", "0", "--max-output-tokens must be >= 1, got 0"),
        (OPTIMIZE, "--k1", "-1", "--k1 must be >= 0, got -1.0"),
        (OPTIMIZE, "--b", "1.5", "--b must be from 0 to 1, got 1.5"),
        (GATHER, "--workers", "0", "--workers must be >= 1, got 0"),
        (GATHER, "--iterations", "0", "--iterations must be >= 1, got 0"),
        (GATHER, "--limit", "0", "--limit must be >= 1, got 0"),
        (GATHER, "--ranking-depth", "-1", "--ranking-depth must be >= 0, got -1"),
        (GATHER, "--bootstrap", "-1", "--bootstrap must be >= 0, got -1"),
        (GATHER, "--min-relevance", "-1", "--min-relevance must be >= 0, got -1"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else None,
)
def test_a_number_out_of_bounds_is_refused_in_one_line_before_any_lm_request(
    command, option, value, message, capfd, clean_lm_env, tmp_path
):
    with LocalOpenAIServer(research_handler()) as server:
        code = main([*command, "--lm", "openai/x", "--api-base", server.base_url, option, value])
    assert code == 2 and server.requests == []  # not even the preflight
    line = one_line(capfd)
    words = " ".join(w for w in command[:2] if not w.startswith("-"))  # optimize, eval gather
    assert line == f"deepresearch {words}: error: {message}"
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize(
    "command,table,key,message",
    [
        (OPTIMIZE, "optimize", "max-lm-calls", "key 'max-lm-calls' must be >= 1, got 0"),
        (OPTIMIZE, "optimize", "workers", "key 'workers' must be >= 1, got 0"),
        (GATHER, "eval.gather", "workers", "key 'workers' must be >= 1, got 0"),
        (GATHER, "eval.gather", "iterations", "key 'iterations' must be >= 1, got 0"),
    ],
)
def test_a_settings_file_is_held_to_the_bounds_of_the_command_line(
    command, table, key, message, capfd, clean_lm_env, tmp_path
):
    settings = tmp_path / "deepresearch.toml"
    settings.write_text(f"[{table}]\n{key} = 0\n")
    with LocalOpenAIServer(research_handler()) as server:
        code = main([*command, "--lm", "openai/x", "--api-base", server.base_url])
    assert code == 2 and server.requests == []
    line = one_line(capfd)
    assert f"{settings.name}: [{table}] {message}" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deepresearch.toml"]


def test_a_boolean_in_a_settings_file_is_no_number(capfd, clean_lm_env, tmp_path):
    # `deadline = true` became a 1-second deadline (true read as 1)
    settings = tmp_path / "deepresearch.toml"
    settings.write_text("[run]\ndeadline = true\n")
    assert main(["run", "q", "--lm", "offline", "--out", str(tmp_path / "o")]) == 2
    line = one_line(capfd)
    assert f"{settings.name}: [run] key 'deadline': expected a number, got true" in line
    assert not (tmp_path / "o").exists()
    settings.write_text("[optimize]\nbudget = false\n")
    assert main([*OPTIMIZE, "--lm", "openai/x", "--api-base", "http://127.0.0.1:9/v1"]) == 2
    assert "[optimize] key 'budget': expected an integer, got false" in one_line(capfd)


def test_a_key_of_a_command_group_table_is_refused_naming_its_commands_tables(capfd, clean_lm_env, tmp_path):
    # `[eval] workers = 0` was read by no command, silently: eval gather then ran on its default
    settings = tmp_path / "deepresearch.toml"
    settings.write_text("[eval]\nworkers = 0\n")
    with LocalOpenAIServer(research_handler()) as server:
        code = main([*GATHER, "--lm", "openai/x", "--api-base", server.base_url])
    assert code == 2 and server.requests == []
    line = one_line(capfd)
    assert f"{settings.name}: [eval] key 'workers'" in line and "[eval.gather]" in line
    assert not (tmp_path / "gathered").exists()


def _commands():
    """(words, parser) of every command, its parser as the dispatcher builds it."""
    import importlib

    from deepresearch import cli

    for prog, module, summary in cli.commands():
        yield tuple(prog.split()[1:]), cli.command_parser(prog, importlib.import_module(module), summary)


def _numbers():
    """(command words, the arguments it requires, the option, a value out of its bounds, the bound) for every
    numeric option of every command."""
    from deepresearch.cli.options import BOUNDS, FREE_NUMBERS

    out = []
    for words, parser in _commands():
        required = []
        for action in parser._actions:
            if action.required or (not action.option_strings and action.nargs not in ("?", "*")):
                required += [action.option_strings[0], "x"] if action.option_strings else ["x"]
        for group in parser._mutually_exclusive_groups:  # a required option with a deprecated spelling
            if group.required:
                required += [group._group_actions[0].option_strings[0], "x"]
        seen = set()
        for action in parser._actions:
            if action.type not in (int, float) or action.dest in FREE_NUMBERS or action.dest in seen:
                continue
            seen.add(action.dest)
            bound = BOUNDS.get(action.dest)
            value = None if bound is None else action.type(bound.minimum if bound.above else bound.minimum - 1)
            out.append((words, required, action.option_strings[0], value, bound))
    return out


NUMBERS = _numbers()


def test_every_numeric_option_of_every_command_has_bounds():
    unbounded = sorted({(" ".join(w), o) for w, _, o, _, bound in NUMBERS if bound is None})
    assert not unbounded, f"give these a bound in BOUNDS (or a reason in FREE_NUMBERS): {unbounded}"
    commands = {" ".join(w) for w, *_ in NUMBERS}
    assert {"run", "batch", "optimize", "index", "mcp", "eval gather", "eval report", "eval taxonomy"} <= commands


@pytest.mark.parametrize("words,required,option,value,bound", NUMBERS, ids=lambda v: None)
def test_every_number_out_of_bounds_is_refused_in_one_line_by_every_command(
    words, required, option, value, bound, capfd, clean_lm_env, tmp_path
):
    code = main([*words, *required, option, str(value)])
    assert code == 2
    expected = f"deepresearch {' '.join(words)}: error: {option} {bound.problem(value)}"
    assert one_line(capfd) == expected
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize("words,required,option,value,bound", NUMBERS, ids=lambda v: None)
def test_every_number_out_of_bounds_in_a_settings_file_is_refused_the_same_way(
    words, required, option, value, bound, capfd, clean_lm_env, tmp_path
):
    key = option.removeprefix("--")
    table = ".".join(words)
    (tmp_path / "deepresearch.toml").write_text(f"[{table}]\n{key} = {value}\n")
    code = main([*words, *required])
    assert code == 2
    line = one_line(capfd)
    assert f"deepresearch.toml: [{table}] key '{key}' {bound.problem(value)}" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deepresearch.toml"]


# ---- every option of batch, view, optimize and eval gather that takes a value, given a bad one ----------------

DEAD_SERVER = "http://127.0.0.1:9/v1"  # nothing listens: an LM request that slipped through fails, never answers
OPTIMIZE_BASE = [
    *("optimize", "--program", "research", "--metric", "recall", "--data", "scifact", "--limit", "4"),
    *("--out", "compiled.json", "--lm", "openai/x", "--api-base", DEAD_SERVER, "--no-preflight"),
]
GATHER_BASE = [
    *("eval", "gather", "--data", "scifact", "--limit", "2", "--out", "gathered"),
    *("--lm", "openai/x", "--api-base", DEAD_SERVER, "--no-preflight"),
]
BATCH_RUN = ["--", "--lm", "offline"]


def _batch(*args: str) -> list[str]:
    return ["batch", *args, *BATCH_RUN]


# (command, option (a positional's name), the command line, what its one line says). The working folder holds
# q.jsonl (one question), bad.json and bad.jsonl (not JSON), folder/ (empty) and file.txt.
_SHARED = [  # the retriever and LM options optimize and eval gather share: each is fed to both
    ("--corpus", ["--corpus", "missing"], "corpus not found: missing"),
    ("--corpus", ["--corpus", "bad.jsonl"], "bad.jsonl:1: line is not valid JSON"),
    ("--source", ["--source", "nope"], "unknown source 'nope'"),
    ("--index", ["--index", "missing"], "no index at missing"),
    ("--index", ["--index", "folder"], "no index at folder"),
    ("--retriever", ["--retriever", "nope"], "argument --retriever: invalid choice: 'nope'"),
    ("--qdrant-url", ["--retriever", "qdrant", "--qdrant-url", "notaurl"], "cannot reach Qdrant at notaurl"),
    ("--qdrant-mode", ["--qdrant-mode", "nope"], "argument --qdrant-mode: invalid choice: 'nope'"),
    (
        "--dense-model",
        ["--retriever", "dense", "--dense-model", "no-such-model-anywhere"],
        "cannot load embedding model 'no-such-model-anywhere'",
    ),
    ("--bm25-preset", ["--bm25-preset", "nope"], "argument --bm25-preset: invalid choice: 'nope'"),
    ("--tokenizer", ["--tokenizer", "nope"], "argument --tokenizer: invalid choice: 'nope'"),
    ("--idf", ["--idf", "nope"], "argument --idf: invalid choice: 'nope'"),
    ("--text-format", ["--text-format", "nope"], "argument --text-format: invalid choice: 'nope'"),
    ("--lm", ["--lm", "nonsense"], "LM 'nonsense' has no provider"),
    ("--api-base", ["--api-base", "notaurl"], "server URL 'notaurl' is not an http(s) URL"),
    ("--structured", ["--structured", "nope"], "argument --structured: invalid choice: 'nope'"),
    ("--cache-dir", ["--cache-dir", "file.txt"], "cannot use file.txt"),
    ("--ray", ["--ray", "nohost:99999"], "--ray 'nohost:99999' is no Ray cluster address"),
    ("--ray", ["--ray", "127.0.0.1:9"], "cannot reach the Ray cluster at --ray 127.0.0.1:9"),
]
BAD_VALUES = [
    ("batch", "questions", _batch("missing.jsonl", "--out", "runs"), "missing.jsonl: no such file"),
    ("batch", "questions", _batch("folder", "--out", "runs"), "folder: a folder; pass a JSONL file"),
    ("batch", "questions", _batch("bad.jsonl", "--out", "runs"), "bad.jsonl:1: not JSON"),
    ("batch", "--out", _batch("q.jsonl", "--out", "file.txt"), "--out file.txt is a file"),
    ("batch", "--ray", _batch("q.jsonl", "--out", "runs", "--ray", "nohost:99999"), "is no Ray cluster address"),
    ("batch", "--ray", _batch("q.jsonl", "--out", "runs", "--ray", "127.0.0.1:9"), "cannot reach the Ray cluster"),
    ("view", "run_dir", ["view", "missing", "--no-browser"], "missing is not a folder"),
    ("view", "run_dir", ["view", "file.txt", "--no-browser"], "file.txt is not a folder"),
    ("view", "run_dir", ["view", "folder", "--no-browser"], "folder holds no report.html and no trace.json"),
    ("optimize", "--program", [*OPTIMIZE_BASE, "--program", "nope"], "argument --program: invalid choice: 'nope'"),
    ("optimize", "--stage", [*OPTIMIZE_BASE, "--stage", "nope"], "--stage nope is not a stage of the research"),
    ("optimize", "--show", ["optimize", "--show", "missing.json"], "compiled program not found: missing.json"),
    ("optimize", "--show", ["optimize", "--show", "bad.json"], "bad.json is not a compiled program"),
    ("optimize", "--show", ["optimize", "--show", "folder"], "cannot use folder: it is a folder"),
    ("optimize", "--metric", [*OPTIMIZE_BASE, "--metric", "nope"], "unknown metric 'nope' for research"),
    ("optimize", "--optimizer", [*OPTIMIZE_BASE, "--optimizer", "nope"], "argument --optimizer: invalid choice"),
    ("optimize", "--teacher", [*OPTIMIZE_BASE, "--teacher", "nope"], "argument --teacher: invalid choice: 'nope'"),
    ("optimize", "--data", [*OPTIMIZE_BASE, "--data", "missing"], "--data missing: no such file, folder or dataset"),
    ("optimize", "--data", [*OPTIMIZE_BASE, "--data", "bad.jsonl", "--corpus", "scifact"], "bad.jsonl:1:"),
    (
        "optimize",
        "--from-runs",
        [*OPTIMIZE_BASE[:3], "--stage", "write", "--metric", "citation_f1", *OPTIMIZE_BASE[9:], "--from-runs", "x"],
        "no stages.jsonl under x",
    ),
    ("optimize", "--split", [*OPTIMIZE_BASE, "--split", "nosplit"], "qrels split 'nosplit' not found"),
    ("optimize", "--dev", [*OPTIMIZE_BASE, "--dev", "missing.jsonl"], "training file not found: missing.jsonl"),
    ("optimize", "--dev", [*OPTIMIZE_BASE, "--dev", "bad.jsonl"], "bad.jsonl:1:"),
    (
        "optimize",
        "--dev-split",
        [*OPTIMIZE_BASE, "--dev", "scifact", "--dev-split", "nosplit"],
        "qrels split 'nosplit' not found",
    ),
    (
        "optimize",
        "--candidates",
        [*OPTIMIZE_BASE, "--stage", "assess", "--metric", "f1", "--candidates", "missing.jsonl"],
        "candidates file not found: missing.jsonl",
    ),
    (
        "optimize",
        "--candidates",
        [*OPTIMIZE_BASE, "--stage", "assess", "--metric", "f1", "--candidates", "bad.jsonl"],
        "bad.jsonl:1: not a recorded candidate pool",
    ),
    (
        "optimize",
        "--record-candidates",
        [*OPTIMIZE_BASE, "--stage", "assess", "--metric", "f1", "--record-candidates", "folder"],
        "--record-candidates folder is a folder",
    ),
    ("optimize", "--judge-lm", [*OPTIMIZE_BASE, "--judge-lm", "nonsense"], "LM 'nonsense' has no provider"),
    (
        "optimize",
        "--judge-api-base",
        [*OPTIMIZE_BASE, "--judge-lm", "openai/j", "--judge-api-base", "notaurl"],
        "server URL 'notaurl' is not an http(s) URL",
    ),
    (
        "optimize",
        "--judge-cache",
        [*OPTIMIZE_BASE, "--judge-lm", "openai/j", "--judge-cache", "file.txt"],
        "cannot write to file.txt",
    ),
    ("optimize", "--prompt-lm", [*OPTIMIZE_BASE, "--prompt-lm", "nonsense"], "LM 'nonsense' has no provider"),
    ("optimize", "--preset", [*OPTIMIZE_BASE, "--preset", "nope"], "argument --preset: invalid choice: 'nope'"),
    ("optimize", "--seed", [*OPTIMIZE_BASE, "--seed", "x"], "argument --seed: invalid int value: 'x'"),
    ("optimize", "--out", [*OPTIMIZE_BASE, "--out", "folder"], "--out folder is a folder"),
    ("optimize", "--out", [*OPTIMIZE_BASE, "--out", "compiled.txt"], "should be a .json file"),
    (
        "optimize",
        "--lm-server",
        [*OPTIMIZE_BASE[:-3], "--no-preflight", "--lm-server", "notaurl"],  # without --api-base
        "LM server 'notaurl': the URL must start with http:// or https://",
    ),
    ("eval gather", "--data", [*GATHER_BASE, "--data", "missing"], "query file not found: missing"),
    ("eval gather", "--data", [*GATHER_BASE, "--data", "bad.jsonl"], "bad.jsonl:1: line is not valid JSON"),
    ("eval gather", "--data", [*GATHER_BASE, "--data", "folder"], "folder holds no queries.jsonl"),
    ("eval gather", "--qrels", [*GATHER_BASE, "--qrels", "nosplit"], "qrels split 'nosplit' not found"),
    ("eval gather", "--split", [*GATHER_BASE, "--split", "nosplit"], "qrels split 'nosplit' not found"),
    ("eval gather", "--method", [*GATHER_BASE, "--method", "nope"], "argument --method: invalid choice: 'nope'"),
    ("eval gather", "--distance", [*GATHER_BASE, "--distance", "nope"], "argument --distance: invalid choice"),
    ("eval gather", "--failed", [*GATHER_BASE, "--failed", "nope"], "argument --failed: invalid choice: 'nope'"),
    ("eval gather", "--protocol", [*GATHER_BASE, "--protocol", "nope"], "argument --protocol: invalid choice"),
    ("eval gather", "--program", [*GATHER_BASE, "--program", "missing.json"], "--program missing.json: no such"),
    ("eval gather", "--program", [*GATHER_BASE, "--program", "bad.json"], "--program bad.json is not a saved"),
    (
        "eval gather",
        "--full-text-cache",
        [*GATHER_BASE, "--full-text", "--full-text-cache", "file.txt"],
        "full-text cache file.txt is a file",
    ),
    ("eval gather", "--out", [*GATHER_BASE, "--out", "file.txt"], "cannot use file.txt: it exists"),
    ("eval gather", "--lm-server", [*GATHER_BASE[:-3], "--lm-server", "notaurl"], "LM server 'notaurl'"),
    *(("optimize", option, [*OPTIMIZE_BASE, *args], said) for option, args, said in _SHARED),
    *(("eval gather", option, [*GATHER_BASE, *args], said) for option, args, said in _SHARED),
]
# options that take a value but have no bad value of their own to try, and why
EXEMPT = {
    ("optimize", "--train"): "a deprecated spelling of --data",
    ("eval gather", "--queries"): "a deprecated spelling of --data",
    ("optimize", "--source-cache"): "read only with --source, whose searches need the network",
    ("eval gather", "--source-cache"): "read only with --source, whose searches need the network",
}
WALKED = ("batch", "view", "optimize", "eval gather")


def _valued_options() -> set[tuple[str, str]]:
    """(command, option or positional) of every option of the walked commands that takes a value, numbers
    (walked above, against BOUNDS) and the run options batch passes on (checked by run's own walk) aside."""
    found = set()
    for words, parser in _commands():
        if " ".join(words) not in WALKED:
            continue
        for action in parser._actions:
            if action.nargs == 0 or action.dest in ("help", "run_options"):
                continue
            if action.type in (int, float) and action.dest != "seed":  # seed: free, and no number is bad
                continue
            out = action.option_strings[0] if action.option_strings else action.dest
            found.add((" ".join(words), out))
    return found


def test_every_option_taking_a_value_has_a_bad_value_or_a_reason():
    walked = _valued_options()
    covered = {(command, option) for command, option, *_ in BAD_VALUES}
    missing = sorted(walked - covered - set(EXEMPT))
    assert not missing, f"give these a case in BAD_VALUES (or a reason in EXEMPT): {missing}"
    assert not (covered | set(EXEMPT)) - walked, "a case names an option the commands no longer have"


def _working_folder(path):
    (path / "q.jsonl").write_text('{"id": "q1", "question": "Does obesity increase the risk of diabetes?"}\n')
    (path / "bad.json").write_text("{not json")
    (path / "bad.jsonl").write_text("{not json\n")
    (path / "folder").mkdir()
    (path / "file.txt").write_text("notes")


def _exit_code(argv: list[str]) -> int:
    """The exit code of the command (argparse's own refusals exit from inside `main`)."""
    try:
        return main(argv)
    except SystemExit as done:
        return done.code


def _listing(path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


@pytest.mark.parametrize("command,option,argv,said", BAD_VALUES, ids=[f"{c}:{o}:{a[-1]}" for c, o, a, _ in BAD_VALUES])
def test_every_bad_value_is_refused_in_one_line_leaving_nothing(
    command, option, argv, said, capfd, clean_lm_env, tmp_path
):
    _working_folder(tmp_path)
    before = _listing(tmp_path)
    code = _exit_code(argv)
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err
    assert len(lines) == 1, err  # nothing but the one line
    assert lines[0].startswith(f"deepresearch {command}: error: ") and said in lines[0], lines[0]
    assert _listing(tmp_path) == before  # nothing created


@pytest.mark.parametrize(
    "argv,settings,said",
    [
        (["view", "folder"], "[view\n", "deepresearch.toml: not valid TOML"),
        (["view", "folder"], "[nosuchcommand]\nx = 1\n", "deepresearch.toml: unknown table [nosuchcommand]"),
        (["view", "folder"], "[view]\nnobrowser = true\n", "deepresearch.toml: [view] unknown key 'nobrowser'"),
        (["batch", "q.jsonl"], '[batch]\nout = ["a"]\n', "[batch] key 'out': Input should be a valid string"),
        (OPTIMIZE_BASE, '[optimize]\noptimizer = "nope"\n', "[optimize] key 'optimizer': Input should be 'gepa'"),
        (OPTIMIZE_BASE, "[optimize]\ndata = 3\n", "[optimize] key 'data': Input should be a valid string"),
        (GATHER_BASE, '[eval.gather]\nmethod = "nope"\n', "[eval.gather] key 'method': Input should be 'loop'"),
        (["--config", "missing.toml", "view", "folder"], None, "--config missing.toml: no such file"),
        (["--config", "folder", "view", "folder"], None, "--config folder: no such file"),
        (["--config", "bad.json", "view", "folder"], None, "bad.json: not valid TOML"),
    ],
)
def test_a_bad_settings_file_is_refused_in_one_line_naming_it(argv, settings, said, capfd, clean_lm_env, tmp_path):
    _working_folder(tmp_path)
    if settings is not None:
        (tmp_path / "deepresearch.toml").write_text(settings)
    before = _listing(tmp_path)
    code = _exit_code(argv)
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert said in lines[0], lines[0]
    assert _listing(tmp_path) == before


def _settable():
    """(command words, table, key) of every option of the walked commands that takes a value and that a
    settings file may hold (a positional is given on the command line only)."""
    out = []
    for words, parser in _commands():
        command = " ".join(words)
        if command not in WALKED:
            continue
        seen = set()
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0 or action.dest in ("help", "run_options"):
                continue
            option = action.option_strings[0]
            if (command, option) in EXEMPT or action.help == argparse.SUPPRESS or action.dest in seen:
                continue
            if action.type in (int, float) and action.dest != "seed":  # numbers: the walk above
                continue
            seen.add(action.dest)
            out.append((words, ".".join(words), action.dest, action.type is int))
    return out


@pytest.mark.parametrize("words,table,key,is_int", _settable(), ids=lambda v: v if isinstance(v, str) else None)
def test_every_option_a_settings_file_gives_a_value_of_the_wrong_kind_is_refused_in_one_line(
    words, table, key, is_int, capfd, clean_lm_env, tmp_path
):
    settings = tmp_path / "deepresearch.toml"
    settings.write_text(f"[{table}]\n{key} = {'true' if is_int else '3'}\n")  # a number for a name, a flag for a seed
    code = _exit_code(list(words))  # the file is read before the command line: nothing else is needed
    err = capfd.readouterr().err
    lines = err.strip().splitlines()
    assert code == 2 and "Traceback" not in err and len(lines) == 1, err
    assert f"deepresearch.toml: [{table}] key '{key}'" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deepresearch.toml"]
