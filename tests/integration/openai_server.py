"""A local OpenAI-compatible chat server for tests: real HTTP on 127.0.0.1, answers from a handler.

The handler returns the reply text, or an `Error` to answer with an HTTP error (status, message,
headers such as Retry-After), as real providers do. `delay` stalls every answer (or, a function of the
request body, the answers it picks; `abandoned` lists the requests whose client hung up while they
stalled); `completion_tokens` sets the usage a reply reports (a reply reporting its request's max_tokens
was cut there).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web


@dataclass
class Error:
    """An HTTP error reply in OpenAI's error format."""

    status: int
    message: str = "error"
    headers: dict[str, str] = field(default_factory=dict)


class LocalOpenAIServer:
    """Serves POST /v1/chat/completions on a free loopback port; `requests` keeps what arrived."""

    def __init__(
        self,
        handler,
        delay: float | Callable[[dict], float] = 0.0,
        completion_tokens: Callable[[dict], int] | None = None,
    ):
        self.handler = handler
        self.delay = delay
        self.abandoned: list[dict] = []
        self.in_flight = self.most_in_flight = 0  # requests being answered now, and the most ever at once
        self.completion_tokens = completion_tokens or (lambda body: 7)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self.port = None

    async def _complete(self, request: web.Request) -> web.Response:
        self.in_flight += 1  # one event loop: no lock needed
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._answer(request)
        finally:
            self.in_flight -= 1

    async def _answer(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        if callable(self.delay):
            stall = self.delay(body)
            while stall > 0 and not (request.transport is None or request.transport.is_closing()):
                await asyncio.sleep(0.05)
                stall -= 0.05
            if stall > 0:  # the client hung up (its timeout) before the answer was due
                self.abandoned.append(body)
        elif self.delay:
            await asyncio.sleep(self.delay)
        reply = self.handler(body["messages"])
        if isinstance(reply, Error):
            return web.json_response(
                {"error": {"message": reply.message, "type": "error", "code": reply.status}},
                status=reply.status,
                headers=reply.headers,
            )
        completion = self.completion_tokens(body)
        limit = body.get("max_tokens") or body.get("max_completion_tokens")
        return web.json_response(
            {
                "id": f"chatcmpl-{len(self.requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "length" if limit and completion >= limit else "stop",
                    }
                ],
                "usage": {"prompt_tokens": 12, "completion_tokens": completion, "total_tokens": 12 + completion},
            }
        )

    async def _start(self):
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._complete)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5)  # do not wait for stalled replies
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def __enter__(self) -> LocalOpenAIServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _stop(self):
        await self._runner.cleanup()
        stalled = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in stalled:  # replies still sleeping in `delay`
            task.cancel()
        await asyncio.gather(*stalled, return_exceptions=True)

    def __exit__(self, *exc):
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"
