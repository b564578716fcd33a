"""The run's machinery: the run context (each node's life), the scheduler (task pool, caps, rate limits,
retries, budgets), the journal that lets a run resume, the stage log, events and progress, the output folder
(atomic writes, one run per folder), the executor that spreads jobs over processes or Ray, the stage base,
and the text keys these share. The LM boundary lives in `deepresearch.programs.lm`, citation logic in
`deepresearch.programs.citing`, file formats in `deepresearch.programs.formats`."""
