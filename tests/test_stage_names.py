"""No stage name is typed as a string in library code: it is written once, in the stage's `StageSpec`, and
read from the stage registry (`deepresearch.programs.stages.registry.STAGES`) everywhere else, so the program,
optimize, eval, usage, the trace and the CLI cannot drift apart. Tests and docs may spell names out."""

import ast
from pathlib import Path

import deepresearch
from deepresearch.programs.stages.registry import STAGES

ROOT = Path(deepresearch.__file__).parent
LIBRARY = ("programs", "optimize", "eval", "signatures", "cli")
# The one plain copy of the names: what --help quotes without loading DSPy (the registry imports every stage's
# module); tests/test_cli_help.py checks it against the registry.
NAME_LIST = "programs/stages/names.py"

# Stage names that are also ordinary words of another vocabulary. A literal of one of these is a stage
# name only in a stage position (see `_stage_positions`); elsewhere it means the other thing.
AMBIGUOUS = {
    "breadth": "ResearchConfig.breadth (the tree's breadth) and the ECO rubric's breadth criterion",
    "answer": "ResearchConfig.answer, Report.answer and the clarifications' {question, answer} records",
    "taxonomy": "ResearchConfig.taxonomy, Report.taxonomy and the `taxonomy` program of optimize and eval",
    "search": "the retriever's search method, the scheduler's search retries and concurrency limit",
    "verify": "ResearchConfig.verify, the verify policy (`--verify`)",
}
# Callables whose argument at this position is a stage name.
STAGE_ARGS = {"call_predictor": 0, "call": 0, "_late_call": 1, "fail": 1, "failed": 1, "check_node_citations": 1}


def _files() -> list[Path]:
    files = [p for d in LIBRARY for p in (ROOT / d).rglob("*.py")]
    files += ROOT.glob("*.py")
    return sorted(set(files) - {ROOT / NAME_LIST})


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }


def _name(node: ast.AST) -> str | None:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None


def _stage_positions(tree: ast.AST) -> set[int]:
    """The constants a stage name would stand in: a `stage=` argument, a stage argument of a call that
    takes one (`STAGE_ARGS`), a key of `modules[...]` or `stage_table()[...]`, a value given to or
    compared with a `stage`, a key of a `*_STAGES` table."""
    found = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            found |= {id(k.value) for k in n.keywords if k.arg == "stage"}
            at = STAGE_ARGS.get(_name(n.func) or "")
            if at is not None and len(n.args) > at:
                found.add(id(n.args[at]))
        elif isinstance(n, ast.Subscript):
            base = n.value.func if isinstance(n.value, ast.Call) else n.value
            if _name(base) in ("modules", "stage_table"):
                found.add(id(n.slice))
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(_name(t) == "stage" for t in targets):
                found.add(id(n.value))
            if any((_name(t) or "").endswith("STAGES") for t in targets) and isinstance(n.value, ast.Dict):
                found |= {id(k) for k in n.value.keys}
        elif isinstance(n, ast.Compare):
            sides = [n.left, *n.comparators]
            if any(_name(s) == "stage" for s in sides):
                found |= {id(s) for s in sides}
    return found


def stage_literals(path: Path) -> list[str]:
    """`file:line: 'name'` for each stage name typed as a string in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = {s.name for s in STAGES} | {a for s in STAGES for a in (s.research_attr, s.gather_attr) if a}
    docs, positions = _docstrings(tree), _stage_positions(tree)
    fstring_parts = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in ast.walk(n)}
    # a stage's own spec is where its names are written, once
    spec_parts = {
        id(v) for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) == "StageSpec" for v in ast.walk(n)
    }
    return sorted(
        f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}"
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and n.value in names
        and id(n) not in docs
        and id(n) not in fstring_parts
        and id(n) not in spec_parts
        and (n.value not in AMBIGUOUS or id(n) in positions)
    )


def test_no_stage_name_is_a_string_literal_in_library_code():
    found = [hit for path in _files() for hit in stage_literals(path)]
    assert not found, (
        "stage names typed as strings (use STAGES.<stage>.name / .research_attr from "
        "deepresearch.programs.stages.registry):\n" + "\n".join(found)
    )


def test_the_check_sees_literals_in_stage_positions(tmp_path):
    """The check itself: it flags a plain stage name anywhere, an ambiguous one only where a stage goes."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        'x = call_predictor("plan", p)\ny = {"breadth": 3}\nz = ctx.call("breadth")\n'
        'w = ctx.modules["answer"]\nstage = "search"\nv = "progress_scorer"\n',
        encoding="utf-8",
    )
    global ROOT
    root, ROOT = ROOT, tmp_path
    try:
        hits = stage_literals(probe)
    finally:
        ROOT = root
    assert hits == [
        "probe.py:1: 'plan'",
        "probe.py:3: 'breadth'",
        "probe.py:4: 'answer'",
        "probe.py:5: 'search'",
        "probe.py:6: 'progress_scorer'",
    ]


def test_every_ambiguous_name_is_a_registered_stage():
    assert set(AMBIGUOUS) <= set(STAGES.names())


def test_reference_page_lists_every_stage_with_its_tuning_metric():
    """docs/reference/stages.md holds the table generated from the registry (rewrite it with
    `python -m tests.stages_page --write`), so every stage and the metrics it is tuned on alone are listed."""
    from deepresearch.optimize.metrics import metric_names
    from tests.stages_page import section, written

    assert written() == section(), "docs/reference/stages.md is stale: run python -m tests.stages_page --write"
    rows = {line.split("|")[1].strip(): line for line in written().splitlines() if line.startswith("| `")}
    assert set(rows) == {f"`{s.name}`" for s in STAGES}
    for spec in STAGES:
        if spec.tuning is not None:
            assert all(f"`{m}`" in rows[f"`{spec.name}`"] for m in metric_names(spec.tuning.target)), spec.name


def test_reference_page_is_in_the_navigation():
    from tests.test_docs import nav_pages

    assert "reference/stages.md" in nav_pages()
