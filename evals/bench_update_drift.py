"""An index updated by edits, deletes and renames against a clean build of the same files:
how many top 10s differ, per search mode.

    .venv/bin/python -m codeqa.evals.bench_update_drift /root/corpora/requests-2.32.5-sdist \
        /tmp/drift --store weaviate --embed-model minilm-int8
    .venv/bin/python -m codeqa.evals.bench_update_drift /root/corpora/django-2.2-wheel \
        /tmp/drift --store weaviate --queries django --edit one-file --no-embed

The corpus is copied to WORK/repo and indexed; then (`--edit mixed`) a function is appended
to one file, another is deleted, a third edited, a fourth renamed and a fifth edited by one
character, with `build_index` after each step (as `codeqa index` runs), or (`--edit
one-file`) a function is appended to one file; then a clean build of the result goes to
WORK/clean, and 20 questions about the corpus (`--queries`) are asked of both in every mode.
`--no-embed` builds both without vectors (`build_index(embed=False)`) and compares BM25 only.
For each mode it prints how many top 10s differ and how many of their 200 places hold
another chunk; before that, each update's time, what of it went to the keyword index's
settle (Weaviate: a copy of the tenant into a fresh one, where an update left drift) and
the drift it left, and the clean build's time.
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import replace
from pathlib import Path

from codeqa.retrieval.config import IndexSettings
from codeqa.retrieval.index import open_index
from codeqa.retrieval.indexing import build_index
from codeqa.retrieval.records import IndexReport, SearchMode

REQUESTS_QUERIES = (
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
DJANGO_QUERIES = (
    "queryset filter with Q objects",
    "database migration autodetector renamed field",
    "csrf token check on post",
    "template variable resolution dot lookup",
    "url resolver reverse with arguments",
    "password hashing pbkdf2",
    "session stored in signed cookies",
    "model form validation clean",
    "admin list display ordering",
    "cache key generation memcached",
    "select related joins in the sql compiler",
    "middleware process response",
    "send mail with attachments",
    "static files storage manifest hash",
    "timezone aware datetime conversion",
    "paginator page out of range",
    "foreign key on delete cascade",
    "translation gettext lazy",
    "file upload handler memory",
    "test client login",
)
QUERIES = {"requests": REQUESTS_QUERIES, "django": DJANGO_QUERIES}
Tops = dict[tuple[str, str], list[tuple[str, int]]]


def top_tens(
    repo: Path, settings: IndexSettings, queries: tuple[str, ...], modes: list[SearchMode]
) -> Tops:
    with open_index(repo, settings) as index:
        return {
            (query, mode.value): [
                (hit.chunk.path, hit.chunk.start_line) for hit in index.search(query, mode, 10)
            ]
            for query in queries
            for mode in modes
        }


def edit_mixed(repo: Path, settings: IndexSettings, embed: bool) -> list[IndexReport]:
    """Append, delete, touch, rename and retouch five files, updating after each step."""
    files = sorted(p for p in repo.rglob("*.py") if "test" not in p.name)
    appended = "\n\ndef appended_session_cookie_helper(jar):\n    return dict(jar)\n"
    files[3].write_text(files[3].read_text() + appended)
    reports = [build_index(repo, settings, embed=embed)]
    files[5].unlink()
    files[7].write_text(files[7].read_text() + "\n# touched\n")
    reports.append(build_index(repo, settings, embed=embed))
    files[9].rename(files[9].with_name("renamed_" + files[9].name))
    files[11].write_text(files[11].read_text().replace("def ", "def  ", 1))
    reports.append(build_index(repo, settings, embed=embed))
    return reports


def edit_one_file(repo: Path, settings: IndexSettings, embed: bool) -> list[IndexReport]:
    """Append one function to the largest source file (a typical one-file edit)."""
    largest = max(
        (p for p in repo.rglob("*.py") if "test" not in p.name), key=lambda p: p.stat().st_size
    )
    appended = "\n\ndef appended_helper(value):\n    return value\n"
    largest.write_text(largest.read_text() + appended)
    print(f"edited {largest.relative_to(repo)}")
    return [build_index(repo, settings, embed=embed)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("work", type=Path, help="a scratch folder (emptied first)")
    parser.add_argument("--store", default="weaviate", choices=("lancedb", "weaviate"))
    parser.add_argument("--embed-model", default="minilm-int8")
    parser.add_argument("--queries", default="requests", choices=sorted(QUERIES))
    parser.add_argument("--edit", default="mixed", choices=("mixed", "one-file"))
    parser.add_argument("--no-embed", action="store_true", help="no vectors; BM25 only")
    args = parser.parse_args()
    embed = not args.no_embed
    modes = list(SearchMode) if embed else [SearchMode.BM25]
    queries = QUERIES[args.queries]
    shutil.rmtree(args.work, ignore_errors=True)
    repo = args.work / "repo"
    shutil.copytree(args.corpus, repo)
    base = IndexSettings(store=args.store, embed_model=args.embed_model)
    updated = replace(base, index_dir=args.work / "updated")
    clean = replace(base, index_dir=args.work / "clean")
    build_index(repo, updated, embed=embed)
    reports = (edit_mixed if args.edit == "mixed" else edit_one_file)(repo, updated, embed)
    for number, report in enumerate(reports, 1):
        print(
            f"update {number}: {report.seconds_total:.1f} s, of which keyword index "
            f"{report.seconds_keyword_index:.1f} s; drift left {report.keyword_drift}"
        )
    built = build_index(repo, clean, embed=embed)
    print(f"clean build: {built.seconds_total:.1f} s, {built.chunks_total} chunks")
    before = top_tens(repo, clean, queries, modes)
    after = top_tens(repo, updated, queries, modes)
    for mode in modes:
        keys = [key for key in before if key[1] == mode.value]
        differing = [key for key in keys if before[key] != after[key]]
        moved = sum(
            1
            for key in keys
            for place, hit in enumerate(before[key])
            if place >= len(after[key]) or after[key][place] != hit
        )
        print(
            f"{mode.value}: {len(differing)} of {len(queries)} top 10s differ from a clean "
            f"build; {moved} of {10 * len(queries)} places hold another chunk"
        )


if __name__ == "__main__":
    main()
