"""How fast a vector fill goes when a served embedding model sets no limit of its own.

    python -m codeqa.evals.bench_embed_fill REPO [--store lancedb|weaviate] [--concurrency N ...]
        [--baseline CHECKOUT]

Builds REPO's keyword index once (not timed), then for each concurrency fills its vectors
from empty, with a fresh vector cache, through litellm against the stand-in server
(evals/embedding_server.py: an OpenAI-compatible endpoint that answers at once, in a
process of its own). What it prints is codeqa's own ceiling, end to end: reading the
chunks that lack vectors, the requests and their decoding, the vector cache and the
store's writes. A team's GPU server is slower than the stand-in, so its own speed sets
the pace, as long as this ceiling is above it.

Speeds on a shared machine move with its load; compare rows of one run, and read the
load average printed with them. `--baseline CHECKOUT` (another checkout with its own .venv)
fills with that checkout's code too, interleaved with this one's at each concurrency, each
fill in a process of its own, and prints their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codeqa.retrieval.config import API_KEY_ENV, IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index

MODEL = "openai/standin"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=Path)
    parser.add_argument("--store", default="lancedb")
    parser.add_argument("--weaviate-url", default=None, help="a server or cluster to fill")
    parser.add_argument("--weaviate-grpc-port", type=int, default=None, help="its gRPC port")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--work", type=Path, default=None, help="folder for the indexes")
    parser.add_argument("--baseline", type=Path, help="another checkout with its own .venv")
    args = parser.parse_args(argv)
    if args.baseline is not None:
        return _interleaved(args)

    work = args.work or Path(tempfile.mkdtemp(prefix="bench-fill-"))
    server = subprocess.Popen(
        [sys.executable, "-m", "codeqa.evals.embedding_server", "--dim", str(args.dim)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int((server.stdout.readline() if server.stdout else "port 0").split()[1])
        os.environ["OPENAI_API_KEY"] = os.environ.get("OPENAI_API_KEY", "sk-standin")
        for concurrency in args.concurrency:
            run = work / f"concurrency-{concurrency}"
            settings = IndexSettings(
                index_dir=run / "index",
                embed_model=MODEL,
                embed_api_base=f"http://127.0.0.1:{port}/v1",
                embed_concurrency=concurrency,
                store=args.store,
                weaviate_url=args.weaviate_url,
                weaviate_grpc_port=args.weaviate_grpc_port,
                weaviate_api_key=os.environ.get(API_KEY_ENV),  # a cluster's key, as codeqa reads it
                cache_root=run / "cache",
                vector_cache=run / "vectors.sqlite",  # empty: every vector is asked for
            )
            report = build_index(args.repo, settings, embed=False)  # not timed
            with open_index(args.repo, settings) as index:
                started = time.perf_counter()
                filled = index.fill_vectors()
                seconds = time.perf_counter() - started
            print(
                f"concurrency {concurrency}: {filled:,} of {report.chunks_total:,} chunks in "
                f"{seconds:.1f} s = {filled / seconds:,.0f} chunks/s into {args.store} "
                f"(load {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        server.terminate()
        server.wait()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _interleaved(args: argparse.Namespace) -> int:
    """Each concurrency filled by the baseline's code, then by this checkout's."""
    ways = {"baseline": args.baseline / ".venv" / "bin" / "python", "this": Path(sys.executable)}
    for concurrency in args.concurrency:
        speeds = {}
        for way, python in ways.items():
            command = [str(python), "-m", "codeqa.evals.bench_embed_fill", str(args.repo)]
            command += ["--store", args.store, "--dim", str(args.dim)]
            command += ["--concurrency", str(concurrency)]
            if args.weaviate_url:
                command += ["--weaviate-url", args.weaviate_url]
            if args.weaviate_grpc_port:
                command += ["--weaviate-grpc-port", str(args.weaviate_grpc_port)]
            # No .pyc files written into a baseline checkout that is not ours.
            env = os.environ | {"PYTHONDONTWRITEBYTECODE": "1"}
            done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            line = done.stdout.strip().splitlines()[-1]
            speeds[way] = float(line.split(" = ")[1].split()[0].replace(",", ""))
            print(f"{way}: {line}", flush=True)
        ratio = speeds["this"] / speeds["baseline"]
        print(f"concurrency {concurrency}: this / baseline = {ratio:.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
