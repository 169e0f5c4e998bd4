"""Speed and memory of indexing, answering and search on a real corpus, next to references.

    .venv/bin/python -m codeqa.evals.bench_index path/to/corpora/django-2.2-wheel \
        --questions path/to/evals/swebench-loc-dev.jsonl \
        --short-questions path/to/evals/sweqa-dev.jsonl

Prints, on a fresh copy of the corpus with an empty vector cache:
- references: bare tree-sitter parse time of the same files (the floor any indexer pays),
  and this CPU's measured peak for a large fp32 matmul (numpy) and onnxruntime's int8 GEMM
  (a MatMulInteger model built in memory; needs the `onnx` package, else it says so);
- the operations one MiniLM pass costs a chunk, at the token lengths of this corpus's chunks;
- seconds to the first answer: a `codeqa ask` process from nothing (no index) to its answer;
- cold index time to BM25-searchable and to fully embedded (chunks/s, and as a fraction of
  the peaks above), no-op re-index, re-index after editing one file;
- CLI wall time of `codeqa search` and offline `codeqa ask` on the built index (median of 5);
- batch query latency p50/p95 per mode; and each step's peak RSS.
Each step runs in its own process so its peak RSS is its own.
Query latency is reported for each question set given: --questions (e.g. whole GitHub
issues) and --short-questions (one-line questions; those of another corpus still
exercise the same code path), each next to the BM25-only reference of the same run.
Timings are wall-clock: on a busy machine they are slower and noisier.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

_STEP = r"""
import json, sys, time
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.indexing import build_index
repo, index_dir, embed, cache = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4]
settings = IndexSettings(index_dir=Path(index_dir), vector_cache=Path(cache) if cache else None)
report = build_index(Path(repo), settings, embed=embed)
print(json.dumps({"searchable_s": report.seconds_to_searchable, "total_s": report.seconds_total,
                  "files": report.files_seen, "changed": report.files_changed,
                  "chunks": report.chunks_total, "embedded": report.vectors_embedded,
                  "pending": report.vectors_pending}))
"""

_QUERIES = r"""
import json, statistics, sys, time
from pathlib import Path
from codeqa.retrieval.offline import prepare_offline_environment
prepare_offline_environment()
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.records import SearchMode
repo, index_dir = sys.argv[1], sys.argv[2]
question_sets = json.loads(Path(sys.argv[3]).read_text())
t0 = time.perf_counter()
index = open_index(Path(repo), IndexSettings(index_dir=Path(index_dir)))
index.search("warm up", SearchMode.HYBRID, 10)
opened = time.perf_counter() - t0
out = {"open_s": opened}
for kind, questions in question_sets.items():
    out[kind] = {}
    for mode in (SearchMode.BM25, SearchMode.VECTOR, SearchMode.HYBRID):
        times = []
        for q in questions:
            t = time.perf_counter()
            index.search(q, mode, 10)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        out[kind][mode.value] = {"p50_ms": statistics.median(times),
                                 "p95_ms": times[int(0.95 * (len(times) - 1))], "n": len(times)}
print(json.dumps(out))
"""


@dataclass(frozen=True, slots=True)
class EncoderShape:
    """The sizes that set a BERT-style encoder's arithmetic."""

    layers: int
    hidden: int
    ffn: int
    heads: int


# all-MiniLM-L6-v2, the default embedder.
MINILM_L6 = EncoderShape(layers=6, hidden=384, ffn=1536, heads=12)

# Square matrices for the peak measurements: large enough that a product takes tens of
# milliseconds on two cores (so call overhead is noise), small enough to stay in memory.
PEAK_MATRIX_SIZE = 2048
PEAK_REPEATS = 5

# The question of the CLI timings and the first answer, and of the latency runs when no
# --questions are given: short, as typed at a prompt; any corpus answers it with something.
CLI_QUESTION = "how are querysets evaluated lazily"


@dataclass(frozen=True, slots=True)
class Measured:
    """One process run under /usr/bin/time: its stdout, wall seconds and peak RSS."""

    stdout: str
    seconds: float
    rss_mib: float


def encoder_ops(tokens: int, shape: EncoderShape = MINILM_L6) -> int:
    """Arithmetic operations (2 per multiply-add) of one encoder pass over `tokens` word pieces.

    Only the matrix products, which are nearly all of the work: per layer the Q, K, V and
    output projections (4·L·d·d multiply-adds), the feed-forward pair (2·L·d·f), and
    attention's scores QKᵀ and weighted sum of V (each heads·L·L·(d/heads)). LayerNorm,
    GELU, softmax and the embedding lookup are O(L·d) and left out.
    """
    length, width = tokens, shape.hidden
    head_width = width // shape.heads
    projections = 4 * length * width * width
    feed_forward = 2 * length * width * shape.ffn
    attention = 2 * shape.heads * length * length * head_width
    return 2 * shape.layers * (projections + feed_forward + attention)


def mean_ops_per_chunk(token_lengths: Sequence[int], shape: EncoderShape = MINILM_L6) -> float:
    """Operations per chunk averaged over chunks of these lengths (padding not counted)."""
    if not token_lengths:
        return 0.0
    return sum(encoder_ops(length, shape) for length in token_lengths) / len(token_lengths)


def fraction_of_peak(chunks_per_s: float, ops_per_chunk: float, peak_ops_per_s: float) -> float:
    """How much of a measured peak the embedding throughput uses."""
    return chunks_per_s * ops_per_chunk / peak_ops_per_s


def fp32_matmul_peak(size: int = PEAK_MATRIX_SIZE, repeats: int = PEAK_REPEATS) -> float:
    """Operations per second of numpy's best fp32 matrix product (its BLAS, all its threads)."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    a @ b  # warm-up: threads started, pages touched
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best


def int8_gemm_peak(
    size: int = PEAK_MATRIX_SIZE,
    repeats: int = PEAK_REPEATS,
    *,
    inner: int | None = None,
    columns: int | None = None,
) -> float | None:
    """Operations per second of onnxruntime's best int8 GEMM; None without the `onnx` package.

    The op is MatMulInteger with uint8 activations and int8 weights, the form the
    dynamically quantised MiniLM uses, on the embedder's own thread count. The product is
    (size x inner) by (inner x columns), square unless told otherwise.
    """
    m, k, n = size, inner or size, columns or size
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    import onnxruntime

    rng = np.random.default_rng(0)
    weights = rng.integers(-128, 128, (k, n), dtype=np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])],
        "int8_gemm",
        [helper.make_tensor_value_info("a", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
        initializer=[numpy_helper.from_array(weights, "b")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8  # what every onnxruntime of the last years reads
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count() or 1
    session = onnxruntime.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {"a": rng.integers(0, 256, (m, k), dtype=np.uint8)}
    session.run(None, feeds)
    best = min(_seconds(lambda: session.run(None, feeds)) for _ in range(repeats))
    return 2 * m * k * n / best


def _seconds(work) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def chunk_token_lengths(repo: Path) -> list[int]:
    """Word pieces MiniLM sees of each chunk of `repo`, chunked and cut as the indexer does."""
    from codeqa.retrieval.chunking.chunker import ChunkLimits, chunk_file
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.discovery.walk import discover
    from codeqa.retrieval.embedders.onnx import MAX_TOKENS, MINILM_L6_INT8
    from codeqa.retrieval.embedders.registry import embedding_text
    from codeqa.retrieval.indexing import discover_options
    from codeqa.retrieval.records import SourceFile
    from tokenizers import Tokenizer

    settings = IndexSettings()
    limits = ChunkLimits(strategy=settings.chunker)
    texts = [
        embedding_text(chunk)
        for item in discover(repo, discover_options(settings))
        if isinstance(item, SourceFile)
        for chunk in chunk_file(item, limits)
    ]
    packed = resources.files("codeqa.retrieval.data") / MINILM_L6_INT8.tokenizer_resource
    tokenizer = Tokenizer.from_str(gzip.decompress(packed.read_bytes()).decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return [len(encoding.ids) for encoding in tokenizer.encode_batch(texts)]


def run_measured(command: Sequence[str], env: dict[str, str] | None = None) -> Measured:
    """Run a command under /usr/bin/time; its stdout, wall seconds and peak RSS in MiB."""
    started = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-v", *command], capture_output=True, text=True, check=False, env=env
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} … failed:\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    if peak is None:
        raise SystemExit(f"/usr/bin/time -v printed no peak memory:\n{done.stderr[-3000:]}")
    return Measured(done.stdout, seconds, int(peak.group(1)) / 1024)


def run_step(code: str, *args: str) -> tuple[dict, float]:
    """Run a Python step under /usr/bin/time; return its JSON output and peak RSS in MiB."""
    measured = run_measured([sys.executable, "-c", code, *args])
    return json.loads(measured.stdout.strip().splitlines()[-1]), measured.rss_mib


def run_cli(words: Sequence[str], runs: int) -> tuple[float, float]:
    """Median wall seconds and largest peak RSS (MiB) of `codeqa WORDS` run `runs` times.

    Offline: $CODEQA_MODEL is dropped, so `ask` lists code locations without a model.
    """
    env = {name: value for name, value in os.environ.items() if name != "CODEQA_MODEL"}
    command = [sys.executable, "-m", "codeqa.tui", *words]
    measured = [run_measured(command, env) for _ in range(runs)]
    return statistics.median(m.seconds for m in measured), max(m.rss_mib for m in measured)


def read_jsonl(path: Path) -> list[dict]:
    """Only 'question' (and 'corpus') are read: any JSONL of questions can be timed."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def bare_parse_seconds(root: Path) -> tuple[float, int]:
    from tree_sitter_language_pack import get_parser

    parser = get_parser("python")
    files = sorted(root.rglob("*.py"))
    started = time.perf_counter()
    lines = 0
    for path in files:
        data = path.read_bytes()
        lines += data.count(b"\n")
        parser.parse(data)
    return time.perf_counter() - started, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--questions", type=Path, help="JSONL with 'question' (and 'corpus')")
    parser.add_argument(
        "--short-questions",
        type=Path,
        help="JSONL of short questions ('question'), timed as a second set, any corpus",
    )
    parser.add_argument("--max-questions", type=int, default=200)
    parser.add_argument(
        "--vector-cache",
        type=Path,
        help="reuse this vector cache (then the fill-in step times the cache, not the model)",
    )
    parser.add_argument(
        "--cli-runs", type=int, default=5, help="runs of each CLI command timed (default 5)"
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="codeqa-bench-"))
    repo = work / "repo"
    shutil.copytree(args.corpus, repo, symlinks=True)
    index_dir = work / "index"
    cache = str(args.vector_cache or "")
    questions = [CLI_QUESTION]
    if args.questions:
        rows = read_jsonl(args.questions)
        picked = [r["question"] for r in rows if r.get("corpus") == args.corpus.name]
        questions = (picked or [r["question"] for r in rows])[: args.max_questions]
    try:
        parse_s, lines = bare_parse_seconds(repo)
        print(f"corpus: {args.corpus.name}, {lines:,} lines of Python")
        print(f"reference  bare tree-sitter parse of the same .py files: {parse_s:6.2f} s")
        fp32_peak = fp32_matmul_peak()
        int8_peak = int8_gemm_peak()
        size = f"{PEAK_MATRIX_SIZE}x{PEAK_MATRIX_SIZE}"
        print(f"reference  fp32 matmul peak (numpy, {size}): {fp32_peak / 1e9:6.1f} GFLOP/s")
        if int8_peak is None:
            print("reference  int8 GEMM peak: not measured (the `onnx` package is not importable)")
        else:
            print(
                f"reference  int8 GEMM peak (onnxruntime MatMulInteger, {size}): "
                f"{int8_peak / 1e9:6.1f} GOP/s"
            )
        lengths = chunk_token_lengths(repo)
        ops = mean_ops_per_chunk(lengths)
        print(
            f"chunk lengths in MiniLM word pieces: mean {statistics.fmean(lengths):.1f}, "
            f"median {statistics.median(lengths):.0f}, max {max(lengths)} "
            f"({len(lengths)} chunks): {ops / 1e9:.2f} GOP a chunk"
        )

        # From nothing: no index, an empty vector cache (an explicit --index-dir keeps its
        # cache beside it), as a new user's first question.
        first = run_measured(
            [sys.executable, "-m", "codeqa.tui", "ask", CLI_QUESTION, "--repo", str(repo)]
            + ["--index-dir", str(work / "first-answer-index")],
            {name: value for name, value in os.environ.items() if name != "CODEQA_MODEL"},
        )
        print(
            f"first answer (codeqa ask, no index, empty cache): {first.seconds:6.2f} s   "
            f"peak RSS {first.rss_mib:5.0f} MiB"
        )

        cold, rss = run_step(_STEP, str(repo), str(index_dir), "0", cache)
        print(
            f"cold index (BM25 searchable, vectors pending): {cold['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({cold['files']} files, {cold['chunks']} chunks)"
        )
        full, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        rate = full["embedded"] / max(full["total_s"], 1e-9)
        print(
            f"vector fill-in of those chunks:                {full['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({full['embedded']} embedded, {rate:.0f} chunks/s)"
        )
        print(
            f"cold index fully embedded: {cold['total_s'] + full['total_s']:6.2f} s; "
            f"embedding at {rate * ops / 1e9:.1f} GOP/s = "
            f"{fraction_of_peak(rate, ops, fp32_peak):.1%} of the fp32 peak"
            + (
                f", {fraction_of_peak(rate, ops, int8_peak):.1%} of the int8 peak"
                if int8_peak
                else ""
            )
        )
        noop, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        print(
            f"no-op re-index:                                {noop['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({noop['changed']} changed)"
        )
        target = max(repo.rglob("*.py"), key=lambda p: p.stat().st_size)
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("\n\ndef codeqa_bench_added(x):\n    return x + 1\n")
        edit, rss = run_step(_STEP, str(repo), str(index_dir), "1", cache)
        print(
            f"re-index after editing {target.name}:         {edit['total_s']:6.2f} s   "
            f"peak RSS {rss:5.0f} MiB   ({edit['changed']} changed, {edit['embedded']} embedded)"
        )

        on_index = ["--repo", str(repo), "--index-dir", str(index_dir)]
        for words, label in (
            (["search", CLI_QUESTION, *on_index], "codeqa search"),
            (["ask", CLI_QUESTION, *on_index], "codeqa ask (offline)"),
        ):
            median_s, rss = run_cli(words, args.cli_runs)
            print(
                f"cli {label:<21} median of {args.cli_runs}: {median_s:6.2f} s   "
                f"peak RSS {rss:5.0f} MiB"
            )

        question_sets = {"questions": questions}
        if args.short_questions:
            rows = read_jsonl(args.short_questions)
            question_sets["short"] = [r["question"] for r in rows][: args.max_questions]
        questions_file = work / "questions.json"
        questions_file.write_text(json.dumps(question_sets))
        latency, rss = run_step(_QUERIES, str(repo), str(index_dir), str(questions_file))
        print(f"open index + first query: {latency['open_s']:.2f} s   peak RSS {rss:5.0f} MiB")
        for kind, asked in question_sets.items():
            source = args.short_questions if kind == "short" else args.questions
            print(
                f"{'short questions' if kind == 'short' else 'questions'}: "
                f"{source.name if source else 'built-in'} ({len(asked)}, "
                f"median {statistics.median(len(q) for q in asked):.0f} chars)"
            )
            for mode in ("bm25", "vector", "hybrid"):
                figures = latency[kind][mode]
                label = "reference " if mode == "bm25" else ""
                print(
                    f"{label}query latency {mode:<6} p50 {figures['p50_ms']:6.1f} ms  "
                    f"p95 {figures['p95_ms']:6.1f} ms  (n={figures['n']})"
                )
        print(f"median question length: {statistics.median(len(q) for q in questions):.0f} chars")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
