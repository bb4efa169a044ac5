"""An OpenAI-compatible chat endpoint that answers after a fixed latency.

Usage: python benchmarks/throughput/mock_openai.py --port 8765 --latency 0.1

Written on raw asyncio streams so that the server itself costs as little CPU as possible:
the benchmark measures the client framework, not the mock. Every request gets
the same completion after ``--latency`` seconds; its text parses for every framework measured
(emery's "Answer: N" regex, DSPy's ``[[ ## answer ## ]]`` fields, gepa's raw text).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

BODY = json.dumps(
    {
        "id": "chatcmpl-mock",
        "object": "chat.completion",
        "created": 0,
        "model": "mock",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "[[ ## answer ## ]]\nAnswer: 42\n\n[[ ## completed ## ]]",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 20, "completion_tokens": 3, "total_tokens": 23},
    }
).encode()
MODELS = json.dumps({"object": "list", "data": [{"id": "mock", "object": "model"}]}).encode()


def response(body: bytes) -> bytes:
    head = (
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: keep-alive\r\n\r\n"
    )
    return head.encode() + body


async def handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, latency: float
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            started = time.monotonic()
            if head.startswith(b"GET"):
                writer.write(response(MODELS))
            else:
                await asyncio.sleep(max(0.0, latency - (time.monotonic() - started)))
                writer.write(response(BODY))
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve(port: int, latency: float) -> None:
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, latency), "127.0.0.1", port, backlog=4096
    )
    print(f"mock OpenAI endpoint on http://127.0.0.1:{port}/v1 (latency {latency}s)", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description="OpenAI-compatible mock with fixed latency")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.port, args.latency))


if __name__ == "__main__":
    main()
