"""The program hosts every strategy alike: program.py names none of them, in a string or a name, so
whatever differs between strategies is the strategy object's (its stages, planned nodes, research,
`prune_reasons`). Docstrings may describe the strategies to a reader."""

import ast
import inspect

from deepresearch.programs.research import program
from deepresearch.programs.research.strategies import STRATEGIES

RESEARCH = "deepresearch.programs.research."


def _strategy_module(module: str) -> str:
    """The module's name inside the research package (where each strategy has its file), else ''."""
    return module.removeprefix(RESEARCH) if module.startswith(RESEARCH) else ""


def _named(tree: ast.AST) -> set[str]:
    """Every string constant (docstrings left out), identifier, and research module imported in `tree`."""
    docstrings = {
        id(n.body[0].value)
        for n in ast.walk(tree)
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and n.body
        and isinstance(n.body[0], ast.Expr)
        and isinstance(n.body[0].value, ast.Constant)
    }
    found: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings:
            found.add(n.value)
        elif isinstance(n, ast.Name):
            found.add(n.id)
        elif isinstance(n, ast.Attribute):
            found.add(n.attr)
        elif isinstance(n, ast.alias):
            found |= {n.name, n.asname or "", _strategy_module(n.name)}
        elif isinstance(n, ast.ImportFrom) and n.module:
            found.add(_strategy_module(n.module))
    return found


def test_the_program_names_no_strategy():
    strategies = {name for name in STRATEGIES} | {type(s).__name__ for s in STRATEGIES.values()}
    assert {"parallel", "Parallel", "eco"} <= strategies  # the table the check reads is the real one
    named = _named(ast.parse(inspect.getsource(program)))
    assert "finish" in named  # the walk sees names and imports
    assert sorted(named & strategies) == []


def test_the_check_would_see_a_strategy_named_in_code():
    code = 'from deepresearch.programs.research.parallel import PRUNE_REASONS\nx = c.strategy == "hero"\n'
    assert {"parallel", "hero"} <= _named(ast.parse(code))
    assert "eco" not in _named(ast.parse('"""The eco strategy."""\n'))


def test_each_strategy_says_why_it_prunes():
    assert all(isinstance(s.prune_reasons, tuple) for s in STRATEGIES.values())
    assert any(s.prune_reasons for s in STRATEGIES.values())  # the adaptive tree prunes; the others do not
