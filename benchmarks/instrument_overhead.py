"""What ``ttftscope.instrument(client)`` costs per call, no tokenizer configured.

Two measurements, each side by side in one run, for non-streaming calls and for streams read
to the end (4 chunks):

- ``hooks``: the instrumentation's own work in the call, exactly: the wrapper ``instrument``
  installs, around a stand-in ``create`` that returns a canned SDK object at once
  (``ChatCompletion``, or a stream shaped like ``openai.Stream`` over canned chunks), against
  the bare stand-in. No SDK, no network: microseconds are not swamped by noise.
- ``sdk``: two real ``openai.OpenAI`` clients on an in-process ``httpx2.MockTransport`` that
  answers at once, one instrumented, calls interleaved one by one (order alternating); the
  difference of the median call times. On a busy machine this one is noisy.

Both use default settings plus token counts (TTFT, totals, queue from ``/metrics``, whose
scrape fails fast here and backs off). ``amortized`` adds the background worker's time to
finish the records (``flush``), which shares the interpreter with the caller. Prints figures;
the last line is one JSON object (``overhead_us_per_call``: the hook costs).

    python benchmarks/instrument_overhead.py --calls 20000
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ttftscope import Instrumentation, Settings, instrument, instrumentation
from ttftscope.config.schema import DebugSettings
from ttftscope.sdkinstrument.wrap import _wrap  # the very wrapper instrument() installs

_MESSAGES = [{"role": "user", "content": "hi"}]
_FULL = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "tiny",
    "choices": [
        {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 1, "total_tokens": 10},
}


def _chunk(content: str) -> bytes:
    delta = {"index": 0, "delta": {"content": content}, "finish_reason": None}
    obj = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "tiny"}
    return b"data: " + json.dumps({**obj, "choices": [delta]}).encode() + b"\n\n"


_SSE = b"".join(_chunk(c) for c in ("", "Hel", "lo", "!")) + b"data: [DONE]\n\n"


def _handler(request: httpx2.Request) -> httpx2.Response:
    if b'"stream":true' in request.content.replace(b" ", b""):
        return httpx2.Response(200, content=_SSE, headers={"content-type": "text/event-stream"})
    return httpx2.Response(200, json=_FULL)


def _client() -> OpenAI:
    http = httpx2.Client(transport=httpx2.MockTransport(_handler))
    return OpenAI(api_key="sk-bench", base_url="http://127.0.0.1:9/v1", http_client=http)


def _call(client: OpenAI, stream: bool) -> None:
    if stream:
        for _ in client.chat.completions.create(model="tiny", messages=_MESSAGES, stream=True):  # type: ignore[arg-type]
            pass
    else:
        client.chat.completions.create(model="tiny", messages=_MESSAGES)  # type: ignore[arg-type]


class _CannedStream:
    """What the wrapper sees of an ``openai.Stream``: ``_iterator`` and ``close``."""

    def __init__(self, chunks: list[ChatCompletionChunk]) -> None:
        self._iterator = iter(chunks)

    def __iter__(self) -> Iterator[ChatCompletionChunk]:
        yield from self._iterator

    def close(self) -> None:
        pass


def _stand_in(stream_chunks: list[ChatCompletionChunk]) -> Callable[..., Any]:
    full = ChatCompletion.model_validate(_FULL)

    def create(**kwargs: Any) -> Any:
        return _CannedStream(stream_chunks) if kwargs.get("stream") else full

    return create


def _consume(fn: Callable[..., Any], stream: bool) -> None:
    if stream:
        for _ in fn(model="tiny", messages=_MESSAGES, stream=True):
            pass
    else:
        fn(model="tiny", messages=_MESSAGES)


def _interleaved(a: Callable[[], None], b: Callable[[], None], calls: int) -> tuple[float, float]:
    """Median µs per call of ``a`` and of ``b``, called alternately (order flipping)."""
    ta: list[int] = []
    tb: list[int] = []
    clock = time.perf_counter_ns
    for i in range(calls):
        for fn, out in ((a, ta), (b, tb)) if i % 2 else ((b, tb), (a, ta)):
            t0 = clock()
            fn()
            out.append(clock() - t0)
    return statistics.median(ta) / 1e3, statistics.median(tb) / 1e3


def _flushed_us(handle: Instrumentation, calls: int) -> float:
    t0 = time.perf_counter_ns()
    handle.flush(timeout=300)
    return (time.perf_counter_ns() - t0) / 1e3 / calls


def _hooks(handle: Instrumentation, stream: bool, calls: int) -> dict[str, float]:
    chunks = [ChatCompletionChunk.model_validate_json(c[6:]) for c in _SSE.split(b"\n\n")[:4]]
    bare = _stand_in(chunks)
    wrapped = _wrap(handle, bare, "chat")
    plain, inst = _interleaved(
        lambda: _consume(bare, stream), lambda: _consume(wrapped, stream), calls
    )
    return {
        "plain_us_per_call": plain,
        "overhead_us_per_call": inst - plain,
        "amortized_overhead_us_per_call": inst - plain + _flushed_us(handle, calls),
    }


def _sdk(plain: OpenAI, inst: OpenAI, stream: bool, calls: int) -> dict[str, float]:
    a, b = _interleaved(lambda: _call(plain, stream), lambda: _call(inst, stream), calls)
    return {
        "plain_us_per_call": a,
        "overhead_us_per_call": b - a,
        "amortized_overhead_us_per_call": b - a + _flushed_us(instrumentation(inst), calls),
    }


def run(calls: int, sdk_calls: int) -> dict[str, Any]:
    """Measure every mode side by side; returns the summary dict."""
    logging.getLogger("ttftscope.instrument").setLevel(logging.ERROR)  # the failing scrape
    settings = Settings(debug=DebugSettings(log_token_count=True))
    plain, inst = _client(), instrument(_client(), settings=settings)
    handle = instrumentation(inst)
    for stream in (False, True):  # warm up: imports, connections, pydantic caches
        _sdk(plain, inst, stream, 50)
    out: dict[str, Any] = {"calls": calls, "sdk_calls": sdk_calls}
    for name, stream in (("non_stream", False), ("stream", True)):
        out[f"hooks_{name}"] = _hooks(handle, stream, calls)
        out[f"sdk_{name}"] = _sdk(plain, inst, stream, sdk_calls)
    out["recorded"], out["dropped"] = handle.stats.recorded, handle.stats.dropped
    handle.close()
    plain.close()
    inst.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--calls", type=int, default=20_000, help="calls per hook measurement")
    ap.add_argument("--sdk-calls", type=int, default=2_000, help="calls per SDK measurement")
    args = ap.parse_args()
    result = run(args.calls, args.sdk_calls)
    print(f"{'us per call':<18}{'plain':>10}{'+ in call':>12}{'+ with worker':>15}")
    for name in ("hooks_non_stream", "hooks_stream", "sdk_non_stream", "sdk_stream"):
        r = result[name]
        print(
            f"{name.replace('_', ' ', 1):<18}{r['plain_us_per_call']:>10.1f}"
            f"{r['overhead_us_per_call']:>+12.1f}{r['amortized_overhead_us_per_call']:>+15.1f}"
        )
    print(f"records: {result['recorded']}, dropped: {result['dropped']}")
    hooks = {n: result[f"hooks_{n}"]["overhead_us_per_call"] for n in ("non_stream", "stream")}
    print(json.dumps({"overhead_us_per_call": hooks, **result}))


if __name__ == "__main__":
    main()
