"""A research run in a process of its own, for the resume tests: `python -m tests.programs.resume_worker
PRESET JOURNAL [--resume]`. The LM is scripted (deterministic) and slow enough to be killed midway."""

from __future__ import annotations

import sys

import dspy

from deepresearch.programs.research import DeepResearch
from deepresearch.retrievers.bm25 import BM25Retriever
from deepresearch.retrievers.corpus import load_corpus
from tests.programs.resume_cases import QUESTION, case
from tests.scripted import scripted_lm


def main(argv: list[str]) -> None:
    name, journal, data = argv[0], argv[1], argv[2]
    config, handler = case(name)
    retriever = BM25Retriever(load_corpus(data))
    with dspy.context(lm=scripted_lm(handler, delay=0.15)):
        out = DeepResearch(retriever=retriever, config=config)(
            question=QUESTION, journal=journal, resume="--resume" in argv
        )
    print(out.report.status)


if __name__ == "__main__":
    main(sys.argv[1:])
