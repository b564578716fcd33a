"""Citation logic: how a report's claims stay tied to their sources. Stable source ids and report
renumbering (`citations`), the guard that keeps a rewritten text's citations among its inputs
(`citation_guard`), each sentence's references, sources and learnings (`provenance`), the claim sentences
and the lexical-entailment rule the verify stage and `eval` share (`entailment`), and the check that keeps
instruction-like corpus text out of a report (`injection`)."""
