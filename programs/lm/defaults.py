"""The LM settings' names and defaults, in a module that imports nothing: the command line's --help reads
them without loading DSPy (`models` builds the LMs they describe)."""

from __future__ import annotations

OFFLINE = "offline"
SERVER_KEY_ENV = "DEEPRESEARCH_API_KEY"  # the key sent to an --api-base server
STRUCTURED_MODES = ("auto", "schema", "off")
DEFAULT_TIMEOUT_S = 120.0
