"""Compare embedders for dense-only retrieval quality and indexing speed on the dev sets.

A measurement tool, not product code: it cuts simple function-level chunks with
`ast` (the shape the evals README's baselines use), embeds them with each
candidate, and scores dense-only search with `codeqa.evals.metrics` (the README's metrics).

    .venv/bin/python -m codeqa.evals.embedder_bench --evals path/to/evals \
        --corpora path/to/corpora --embedders wordllama minilm-int8:128 minilm-int8:256 \
        --out embedder_bench.json

The roofline (ops per chunk, this run's fp32 and int8 matmul peaks, chunks/s of each
graph form and its fraction of those peaks, cosine with the packaged graph):

    .venv/bin/python -m codeqa.evals.embedder_bench --evals /work/shared/evals \
        --corpora /root/corpora --roofline 600 --out roofline.json
"""

from __future__ import annotations

import argparse
import ast
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from codeqa.evals.dataset import Question, load_dataset
from codeqa.evals.metrics import QuestionScores, RankedResult, score_question, summarise
from codeqa.retrieval.config import model_cache_dir
from codeqa.retrieval.embedders.registry import Embedder, embedding_text, load_embedder
from codeqa.retrieval.records import Chunk, ChunkKind
from codeqa.tui.settings import user_cache_root

TOP_K = 10
WINDOW_LINES = 50
TEXT_SUFFIXES = {".py", ".rst", ".md", ".txt", ".toml", ".cfg"}
MAX_FILE_BYTES = 1_000_000


def load_questions(path: Path, corpora: set[str]) -> list[Question]:
    """The questions of `path` asked about one of `corpora` that name a gold file."""
    return [q for q in load_dataset(path) if q.corpus in corpora and q.gold_file_set]


def chunk_corpus(root: Path) -> list[Chunk]:
    chunks: list[Chunk] = []
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.suffix not in TEXT_SUFFIXES:
            continue
        if path.stat().st_size > MAX_FILE_BYTES:
            continue
        rel = path.relative_to(root).as_posix()
        text = path.read_text(encoding="utf-8", errors="replace")
        chunks.extend(_python_chunks(rel, text) if path.suffix == ".py" else _windows(rel, text, 1))
    return chunks


def _python_chunks(rel: str, text: str) -> list[Chunk]:
    lines = text.splitlines()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return _windows(rel, text, 1)
    covered = [False] * (len(lines) + 2)
    chunks: list[Chunk] = []

    def visit(node: ast.AST, owner: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                start = min([d.lineno for d in child.decorator_list] + [child.lineno])
                end = child.end_lineno or child.lineno
                symbol = f"{owner}.{child.name}" if owner else child.name
                if isinstance(child, ast.ClassDef):
                    methods = [
                        n
                        for n in child.body
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                    ]
                    if methods:
                        first = min(
                            [d.lineno for d in methods[0].decorator_list] + [methods[0].lineno]
                        )
                        head_end = max(start, first - 1)
                        chunks.append(
                            _chunk(rel, lines, start, head_end, symbol, ChunkKind.DECLARATION)
                        )
                        for i in range(start, head_end + 1):
                            covered[i] = True
                        visit(child, symbol)
                        continue
                chunks.append(_chunk(rel, lines, start, end, symbol, ChunkKind.DECLARATION))
                for i in range(start, end + 1):
                    covered[i] = True

    visit(tree, None)
    run: list[int] = []
    for number in range(1, len(lines) + 1):
        if not covered[number]:
            run.append(number)
        if run and (covered[number] or number == len(lines) or len(run) >= WINDOW_LINES):
            body = [n for n in run if lines[n - 1].strip()]
            if body:
                chunks.append(_chunk(rel, lines, run[0], run[-1], None, ChunkKind.PREAMBLE))
            run = []
    return chunks


def _windows(rel: str, text: str, first: int) -> list[Chunk]:
    lines = text.splitlines()
    out = []
    for start in range(0, len(lines), WINDOW_LINES):
        end = min(start + WINDOW_LINES, len(lines))
        if any(line.strip() for line in lines[start:end]):
            out.append(_chunk(rel, lines, start + first, end, None, ChunkKind.WINDOW))
    return out


def _chunk(
    rel: str, lines: list[str], start: int, end: int, symbol: str | None, kind: ChunkKind
) -> Chunk:
    text = "\n".join(lines[start - 1 : end])
    header = f"# {rel}" + (f" :: {symbol}" if symbol else "")
    return Chunk(rel, start, end, "python", kind, symbol, None, text, header)


def make_embedder(spec: str) -> Embedder:
    """`name` or `minilm-int8:<max_tokens>[:<tokens_per_batch>[:<threads>]]`."""
    name, *params = spec.split(":")
    if name == "minilm-int8" and params:
        from codeqa.retrieval.embedders.onnx import OnnxEmbedder

        values = [int(p) for p in params]
        names = ("max_tokens", "tokens_per_batch", "threads")
        kwargs: dict[str, Any] = dict(zip(names, values, strict=False))
        return OnnxEmbedder(**kwargs, model_cache=model_cache_dir(user_cache_root()))
    return load_embedder(spec, model_cache_dir(user_cache_root()))


def embed_timed(
    embedder: Embedder, texts: list[str], cache: Path | None
) -> tuple[np.ndarray, float, float]:
    """Vectors, wall seconds and CPU seconds of this process (robust to a busy machine)."""
    if cache is not None and cache.exists():
        data = np.load(cache)
        return data["vectors"], float(data["seconds"]), float(data["cpu_seconds"])
    started, cpu_started = time.perf_counter(), time.process_time()
    vectors = embedder.embed(texts)
    seconds = time.perf_counter() - started
    cpu_seconds = time.process_time() - cpu_started
    if cache is not None:
        np.savez(cache, vectors=vectors, seconds=seconds, cpu_seconds=cpu_seconds)
    return vectors, seconds, cpu_seconds


def evaluate(
    embedder: Embedder,
    spec: str,
    questions: list[Question],
    corpora_root: Path,
    cache_dir: Path | None,
) -> dict[str, object]:
    by_corpus: dict[str, list[Question]] = {}
    for q in questions:
        by_corpus.setdefault(q.corpus, []).append(q)
    scores: list[QuestionScores] = []
    embed_seconds = 0.0
    cpu_seconds = 0.0
    chunk_count = 0
    per_corpus = {}
    for corpus, qs in by_corpus.items():
        chunks = chunk_corpus(corpora_root / corpus)
        texts = [embedding_text(c) for c in chunks]
        safe = spec.replace(":", "_")
        cache = cache_dir / f"{safe}__{corpus}.npz" if cache_dir is not None else None
        vectors, seconds, cpu = embed_timed(embedder, texts, cache)
        per_corpus[corpus] = {
            "chunks": len(chunks),
            "embed_s": round(seconds, 1),
            "cpu_s": round(cpu, 1),
        }
        embed_seconds += seconds
        cpu_seconds += cpu
        chunk_count += len(chunks)
        queries = embedder.embed([q.question for q in qs])
        sims = queries @ vectors.T
        for q, row in zip(qs, sims, strict=True):
            top = [chunks[i] for i in np.argsort(-row)[:TOP_K]]
            ranked = [RankedResult(c.path, c.start_line, c.end_line) for c in top]
            scores.append(score_question(ranked, q))
    means = summarise(scores).means
    metrics = {name: round(value, 3) for name, value in means.items() if value is not None}
    return {
        "metrics": metrics,
        "questions": len(questions),
        "chunks": chunk_count,
        "embed_s": round(embed_seconds, 1),
        "chunks_per_s": round(chunk_count / embed_seconds, 1),
        "cpu_s": round(cpu_seconds, 1),
        "chunks_per_cpu_s": round(chunk_count / cpu_seconds, 1),
        "per_corpus": per_corpus,
    }


def throughput(
    embedder: Embedder, texts: list[str], unsorted_batch: int | None
) -> dict[str, float]:
    """Chunks per wall second and per CPU second of this process."""
    started, cpu_started = time.perf_counter(), time.process_time()
    if unsorted_batch:
        for i in range(0, len(texts), unsorted_batch):
            embedder.embed(texts[i : i + unsorted_batch])
    else:
        embedder.embed(texts)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return {"per_s": round(len(texts) / wall, 1), "per_cpu_s": round(len(texts) / cpu, 1)}


def matmul_peaks(repeats: int = 5) -> dict[str, float]:
    """GFLOP/s of numpy's fp32 2048² matmul and onnxruntime's u8·s8 MatMulInteger (best of N)."""
    from codeqa.evals.bench_index import fp32_matmul_peak, int8_gemm_peak

    # The int8 product in the model's own FFN-in shape (a batch of 16 x 128 tokens,
    # 384 -> 1536), timed more often since each run is short.
    int8 = int8_gemm_peak(2048, repeats * 4, inner=384, columns=1536)
    if int8 is None:
        raise SystemExit("the roofline needs the `onnx` package (pip install -e .)")
    return {
        "fp32_gflops": round(fp32_matmul_peak(2048, repeats) / 1e9, 1),
        "int8_gops": round(int8 / 1e9, 1),
    }


def ops_per_chunk(token_lengths: np.ndarray, int8_linears: tuple[str, ...]) -> dict[str, float]:
    """GOP per chunk of MiniLM-L6 at these lengths, as bench_index counts them, and the
    part of it the form runs in int8."""
    from codeqa.evals.bench_index import MINILM_L6, mean_ops_per_chunk

    hidden, ffn = MINILM_L6.hidden, MINILM_L6.ffn
    macs_per_token = {
        "qkv": 3 * hidden * hidden,
        "attn_out": hidden * hidden,
        "ffn_in": hidden * ffn,
        "ffn_out": ffn * hidden,
    }
    total = mean_ops_per_chunk([int(length) for length in token_lengths])
    int8 = (2 * MINILM_L6.layers * sum(macs_per_token[name] for name in int8_linears)) * float(
        token_lengths.mean()
    )
    return {"total": total / 1e9, "int8": int8 / 1e9, "fp32": (total - int8) / 1e9}


def roofline(texts: list[str]) -> dict[str, object]:
    """Chunks/s of each graph form next to this CPU's measured matmul peaks."""
    from codeqa.retrieval.embedders.onnx import (
        FUSED_FP32,
        FUSED_Q8_ALL,
        FUSED_Q8_QKV_FFN_IN,
        OnnxEmbedder,
    )

    peaks = matmul_peaks()
    reference = OnnxEmbedder(form=None)
    reference.load()
    tokenizer = reference._model().tokenizer
    started = time.perf_counter()
    lengths = np.array([len(e.ids) for e in tokenizer.encode_batch(texts)])
    tokenize_s = time.perf_counter() - started
    out: dict[str, object] = {
        "peaks": peaks,
        "chunks": len(texts),
        "mean_word_pieces": round(float(lengths.mean()), 1),
        "at_cap": round(float((lengths >= reference.max_tokens).mean()), 2),
        "tokenize_chunks_per_s": round(len(texts) / tokenize_s, 1),
    }
    baseline: np.ndarray | None = None
    for form in (None, FUSED_FP32, FUSED_Q8_QKV_FFN_IN, FUSED_Q8_ALL):
        embedder = OnnxEmbedder(form=form, model_cache=model_cache_dir(user_cache_root()))
        embedder.embed(texts[:16])  # load and warm up
        vectors, wall, cpu = embed_timed(embedder, texts, None)
        if baseline is None:
            baseline = vectors
        cosine = (vectors * baseline).sum(axis=1)
        ops = ops_per_chunk(lengths, form.int8_linears if form else ())
        per_s = len(texts) / wall
        bound_s = ops["fp32"] / peaks["fp32_gflops"] + ops["int8"] / peaks["int8_gops"]
        out[form.label if form else "packaged"] = {
            "chunks_per_s": round(per_s, 1),
            "chunks_per_cpu_s": round(len(texts) / cpu, 1),
            "gflop_per_chunk": {name: round(value, 3) for name, value in ops.items()},
            "roofline_chunks_per_s": round(1 / bound_s, 1),
            "fraction_of_roofline": round(per_s * bound_s, 2),
            "fraction_of_fp32_peak": round(per_s * ops["total"] / peaks["fp32_gflops"], 2),
            "cosine_mean": round(float(cosine.mean()), 5),
            "cosine_min": round(float(cosine.min()), 5),
        }
        print(json.dumps(out), flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--evals", type=Path, required=True, help="folder holding the dev sets' JSONL files"
    )
    parser.add_argument(
        "--corpora", type=Path, required=True, help="folder holding one folder per corpus"
    )
    parser.add_argument("--embedders", nargs="+", default=["wordllama", "minilm-int8"])
    parser.add_argument("--sets", nargs="+", default=["sweqa", "django"])
    parser.add_argument(
        "--throughput-sample",
        type=int,
        default=0,
        help="only measure chunks/s on this many django chunks (sorted vs unsorted)",
    )
    parser.add_argument(
        "--roofline",
        type=int,
        default=0,
        metavar="N",
        help="chunks/s of each graph form on N django chunks against this CPU's matmul peaks",
    )
    parser.add_argument("--unsorted", action="store_true", help="also time unsorted batches of 32")
    parser.add_argument(
        "--cache", type=Path, help="keep each embedder's vectors here and reuse them next run"
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.cache is not None:
        args.cache.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {}
    if args.roofline:
        chunks = chunk_corpus(args.corpora / "django-2.2-wheel")
        picked = np.random.default_rng(0).choice(
            len(chunks), size=min(args.roofline, len(chunks)), replace=False
        )
        results = roofline([embedding_text(chunks[i]) for i in picked])
    elif args.throughput_sample:
        chunks = chunk_corpus(args.corpora / "django-2.2-wheel")
        rng = np.random.default_rng(0)
        picked = rng.choice(
            len(chunks), size=min(args.throughput_sample, len(chunks)), replace=False
        )
        texts = [embedding_text(chunks[i]) for i in picked]
        for spec in args.embedders:
            embedder = make_embedder(spec)
            embedder.embed(texts[:8])  # warm-up
            row: dict[str, object] = {"sorted": throughput(embedder, texts, None)}
            if spec.startswith("minilm") and args.unsorted:
                row["unsorted_batch32"] = throughput(embedder, texts, 32)
            results[spec] = row
            print(spec, row, flush=True)
    else:
        sets = {
            "sweqa": (
                args.evals / "sweqa-dev.jsonl",
                {"requests-2.32.5-sdist", "flask-3.1.1-sdist"},
            ),
            "django": (args.evals / "swebench-loc-dev.jsonl", {"django-2.2-wheel"}),
        }
        for spec in args.embedders:
            embedder = make_embedder(spec)
            for name in args.sets:
                path, corpora = sets[name]
                row = evaluate(
                    embedder, spec, load_questions(path, corpora), args.corpora, args.cache
                )
                results[f"{spec} {name}"] = row
                print(spec, name, json.dumps(row), flush=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
