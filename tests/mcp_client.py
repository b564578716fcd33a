"""The MCP SDK's own stdio client talking to the real `deepresearch mcp` command, for tests/test_mcp.py and
tests/real_lm/test_mcp.py."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

COMMAND = Path(sys.executable).parent / "deepresearch"  # the console script of [project.scripts]


def server_env(**extra: str) -> dict[str, str]:
    """The server's environment: the client passes only a few variables (PATH, HOME...) of its own, so there is
    no DEEPRESEARCH_LM (offline unless --lm) and no DEEPRESEARCH_DATA (scifact is the corpus the package embeds)."""
    return {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", **extra}


@contextlib.asynccontextmanager
async def serving(folder: Path, *options: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """A session with `deepresearch mcp OPTIONS` started in `folder`; its stderr goes to folder/server.log."""
    params = StdioServerParameters(command=str(COMMAND), args=["mcp", *options], env=env or server_env(), cwd=folder)
    with open(folder / "server.log", "w") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def converse(
    folder: Path,
    talk: Callable[[ClientSession], Awaitable[Any]],
    *options: str,
    env: dict[str, str] | None = None,
    limit_s: float = 60,
) -> Any:
    """What `talk(session)` returns, run against a fresh server; fails past `limit_s`, server start included."""

    async def main():
        with anyio.fail_after(limit_s):
            async with serving(folder, *options, env=env) as session:
                return await talk(session)

    return anyio.run(main)
