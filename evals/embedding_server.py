"""A stand-in OpenAI-compatible embedding server that answers at once: a measuring device.

It plays a team's GPU embedding server (TEI, vLLM, Ollama, a hosted API) for the fill's
benchmark and tests, so that what they measure is codeqa's own ceiling: the server adds
no model time. Each text's vector is a pure function of the text (a seeded Gaussian,
unit length), so two runs, or a run and a resumed run, store the same vectors.

It can also misbehave the ways real servers do, to test the client: answer a share of
requests with 429 and a Retry-After header, wait before answering, or refuse a request
carrying more texts than its cap with a 422 as TEI does (`--max-client-batch-size`, 32 by
default there).

    python -m codeqa.evals.embedding_server --dim 384      # prints "port N", serves until killed

Loopback only: it is a test device, never a service.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DEFAULT_DIM = 384


def standin_vector(text: str, dim: int) -> np.ndarray:
    """The stand-in's vector for `text`: deterministic, unit length, float32."""
    seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=8).digest())
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


class _Behaviour:
    """What the server does besides answering: throttling and delay, counted."""

    def __init__(
        self,
        dim: int,
        throttle_every: int,
        retry_after_s: float,
        delay_s: float,
        base64: bool,
        max_batch: int,
    ):
        self.dim = dim
        self.max_batch = max_batch
        self.refused = 0
        self.base64 = base64
        self.throttle_every = throttle_every
        self.retry_after_s = retry_after_s
        self.delay_s = delay_s
        self.requests = 0
        self.throttled = 0
        self.texts = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.arrivals: list[float] = []  # time.monotonic() of each request, in order
        self.asked: Counter[str] = Counter()  # how often each text was embedded
        self.lock = threading.Lock()


def _handler(behaviour: _Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = (
            "HTTP/1.1"  # keep-alive: clients reuse connections, as with a real server
        )

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass  # a measuring device stays quiet

        def do_GET(self) -> None:  # noqa: N802
            if self.path.rstrip("/").endswith("/stats"):
                with behaviour.lock:
                    stats = {
                        "requests": behaviour.requests,
                        "throttled": behaviour.throttled,
                        "texts": behaviour.texts,
                        "most_in_flight": behaviour.most_in_flight,
                    }
                self._send(200, json.dumps(stats).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if not self.path.rstrip("/").endswith("/embeddings"):
                self._send(404, b'{"error": "not found"}')
                return
            with behaviour.lock:
                behaviour.arrivals.append(time.monotonic())
                behaviour.requests += 1
                number = behaviour.requests
                throttle = behaviour.throttle_every > 0 and number % behaviour.throttle_every == 0
                if throttle:
                    behaviour.throttled += 1
                behaviour.in_flight += 1
                behaviour.most_in_flight = max(behaviour.most_in_flight, behaviour.in_flight)
            try:
                if throttle:
                    error = b'{"error": {"message": "rate limited", "type": "rate_limit"}}'
                    headers = {"Retry-After": f"{behaviour.retry_after_s:g}"}
                    self._send(429, error, headers)
                    return
                if behaviour.delay_s:
                    time.sleep(behaviour.delay_s)
                request = json.loads(body)
                if request.get("encoding_format") == "base64" and not behaviour.base64:
                    error = b'{"error": {"message": "encoding_format base64 is not supported"}}'
                    self._send(400, error)
                    return
                texts = request["input"]
                texts = [texts] if isinstance(texts, str) else texts
                if behaviour.max_batch and len(texts) > behaviour.max_batch:
                    with behaviour.lock:
                        behaviour.refused += 1
                    message = (
                        f"batch size {len(texts)} > maximum allowed batch size "
                        f"{behaviour.max_batch}"
                    )
                    self._send(
                        422, json.dumps({"error": message, "error_type": "Validation"}).encode()
                    )
                    return
                as_base64 = request.get("encoding_format") == "base64"
                data = []
                for index, text in enumerate(texts):
                    vector = standin_vector(str(text), behaviour.dim)
                    embedding: object = (
                        base64.b64encode(vector.tobytes()).decode()
                        if as_base64
                        else vector.tolist()
                    )
                    data.append({"object": "embedding", "index": index, "embedding": embedding})
                with behaviour.lock:
                    behaviour.texts += len(texts)
                    behaviour.asked.update(str(text) for text in texts)
                answer = {
                    "object": "list",
                    "data": data,
                    "model": request.get("model", "standin"),
                    "usage": {"prompt_tokens": 0, "total_tokens": 0},
                }
                self._send(200, json.dumps(answer).encode())
            finally:
                with behaviour.lock:
                    behaviour.in_flight -= 1

        def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

    return Handler


def make_server(
    dim: int = DEFAULT_DIM,
    *,
    port: int = 0,
    throttle_every: int = 0,
    retry_after_s: float = 1.0,
    delay_s: float = 0.0,
    base64: bool = True,
    max_batch: int = 0,
) -> StandinServer:
    """A stand-in on 127.0.0.1 (`server.server_address[1]` is its port); serve_forever() runs it.

    `base64`: False plays a server that refuses OpenAI's base64 form with a 400.
    `max_batch`: a request with more texts is refused with TEI's 422 (0: no cap).
    """
    behaviour = _Behaviour(dim, throttle_every, retry_after_s, delay_s, base64, max_batch)
    return StandinServer(("127.0.0.1", port), _handler(behaviour), behaviour)


class StandinServer(ThreadingHTTPServer):
    """The stand-in, with what it saw (`behaviour`: requests, throttles, arrivals)."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        behaviour: _Behaviour,
    ) -> None:
        super().__init__(address, handler)
        self.behaviour = behaviour


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=DEFAULT_DIM)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--throttle-every", type=int, default=0, help="answer every Nth with 429")
    parser.add_argument("--retry-after", type=float, default=1.0, help="seconds, with each 429")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--no-base64", action="store_true", help="refuse base64 with a 400")
    parser.add_argument(
        "--max-batch", type=int, default=0, help="refuse requests of more texts with a 422"
    )
    args = parser.parse_args(argv)
    server = make_server(
        args.dim,
        port=args.port,
        throttle_every=args.throttle_every,
        retry_after_s=args.retry_after,
        delay_s=args.delay,
        base64=not args.no_base64,
        max_batch=args.max_batch,
    )
    print(f"port {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
