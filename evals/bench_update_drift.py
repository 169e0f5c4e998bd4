"""An index updated by edits, deletes and renames against a clean build of the same files:
how many top 10s differ, per search mode.

    .venv/bin/python -m codeqa.evals.bench_update_drift /root/corpora/requests-2.32.5-sdist \
        /tmp/drift --store weaviate --embed-model minilm-int8

The corpus is copied to WORK/repo and indexed; then a function is appended to one file,
another is deleted, a third edited, a fourth renamed and a fifth edited by one character,
with `build_index` after each step (as `codeqa index` runs); then a clean build of the result
goes to WORK/clean, and 20 questions about requests are asked of both in every mode.
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import replace
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import SearchMode

QUERIES = (
    "how are cookies stored in a session",
    "retry on connection errors",
    "proxy configuration from environment",
    "encode multipart form data",
    "follow redirects and strip authorization",
    "parse the content type header",
    "stream the response body in chunks",
    "verify the TLS certificate",
    "timeout for connect and read",
    "basic authentication header",
    "digest authentication",
    "url with unicode host idna",
    "prepare the request body json",
    "raise for status code",
    "iterate over lines of the response",
    "default headers user agent",
    "mount a transport adapter",
    "connection pool size",
    "guess the encoding from content",
    "hooks called on response",
)
Tops = dict[tuple[str, str], list[tuple[str, int]]]


def top_tens(repo: Path, settings: IndexSettings) -> Tops:
    with open_index(repo, settings) as index:
        return {
            (query, mode.value): [
                (hit.chunk.path, hit.chunk.start_line) for hit in index.search(query, mode, 10)
            ]
            for query in QUERIES
            for mode in SearchMode
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("work", type=Path, help="a scratch folder (emptied first)")
    parser.add_argument("--store", default="weaviate", choices=("lancedb", "weaviate"))
    parser.add_argument("--embed-model", default="minilm-int8")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    repo = args.work / "repo"
    shutil.copytree(args.corpus, repo)
    base = IndexSettings(store=args.store, embed_model=args.embed_model)
    updated = replace(base, index_dir=args.work / "updated")
    clean = replace(base, index_dir=args.work / "clean")
    build_index(repo, updated)
    files = sorted(p for p in repo.rglob("*.py") if "test" not in p.name)
    appended = "\n\ndef appended_session_cookie_helper(jar):\n    return dict(jar)\n"
    files[3].write_text(files[3].read_text() + appended)
    build_index(repo, updated)
    files[5].unlink()
    files[7].write_text(files[7].read_text() + "\n# touched\n")
    build_index(repo, updated)
    files[9].rename(files[9].with_name("renamed_" + files[9].name))
    files[11].write_text(files[11].read_text().replace("def ", "def  ", 1))
    build_index(repo, updated)
    build_index(repo, clean)
    before, after = top_tens(repo, clean), top_tens(repo, updated)
    differing = [key for key in before if before[key] != after[key]]
    for mode in SearchMode:
        count = sum(1 for _, m in differing if m == mode.value)
        print(f"{mode.value}: {count} of {len(QUERIES)} top 10s differ from a clean build")


if __name__ == "__main__":
    main()
