"""The LM boundary: everything between the program and a language model. Building a `dspy.LM` from a model
string with its key from the environment, the reply format (structured output) and preflight (`models`); the
session a command opens from its LM options (`session`; the options are `deepresearch.cli.lm_options`) and
the settings' names and defaults (`defaults`); many servers behind one model name
(`router`); per-stage accounting of requests and tokens and each call's output limit (`usage`); whether the
LM answered at all, or every call failed (`replies`); and the redaction that keeps API keys and other
credentials out of traces, logs and errors (`secrets`)."""
