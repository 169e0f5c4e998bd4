"""`codeqa eval` as a user runs it: the shipped sample end to end, errors, and --compare."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from codeqa.evals.dataset import load_dataset
from codeqa.evals.metrics import METRIC_NAMES, RankedResult, score_question, summarise
from codeqa.evals.runner import CorpusLocator, codeqa_source_root
from codeqa.tui.cli import main
from codeqa.tui.cli.eval import sample_dataset_path
from conftest import JSON_FILES, JSON_PACKAGE, as_a_user_who_cannot_read


@pytest.fixture(scope="module")
def sample_corpora(tmp_path_factory) -> Path:
    """A corpora folder whose `codeqa` corpus holds copies of the files the sample asks about.

    Copies rather than the live tree: indexing all of codeqa would make the test slow,
    and the copies keep the gold paths exactly as they are in the source tree.
    """
    corpora = tmp_path_factory.mktemp("corpora")
    root = codeqa_source_root()
    for question in load_dataset(sample_dataset_path()):
        for path in question.gold_file_set:
            target = corpora / "codeqa" / path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(root / path, target)
    return corpora


def run_eval(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_sample_runs_end_to_end_and_summary_matches_per_question_results(
    sample_corpora, tmp_path, capsys
):
    out = tmp_path / "results.jsonl"
    code, stdout, stderr = run_eval(
        capsys,
        "--corpora", str(sample_corpora),
        "--index-root", str(tmp_path / "indexes"),
        "--mode", "bm25",
        "--json",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout)
    questions = {q.id: q for q in load_dataset(sample_dataset_path())}
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == list(questions)
    assert "corpus codeqa:" in stderr and "questions" in stderr  # progress went to stderr

    # Every result names real lines of a real file in the corpus.
    for row in rows:
        assert 1 <= len(row["results"]) <= 10
        for r in row["results"]:
            lines = (sample_corpora / "codeqa" / r["path"]).read_text().splitlines()
            assert 1 <= r["start"] <= r["end"] <= len(lines)

    # The summary is exactly the mean of the per-question results written to --out.
    rescored = summarise(
        [
            score_question(
                [RankedResult(r["path"], r["start"], r["end"]) for r in row["results"]],
                questions[row["id"]],
            )
            for row in rows
        ]
    )
    overall = summary["modes"]["bm25"]["overall"]
    assert overall["questions"] == len(questions) == overall["with_gold_lines"]
    for name in METRIC_NAMES:
        assert overall["metrics"][name] == pytest.approx(rescored.means[name], abs=1e-4)
    assert summary["modes"]["bm25"]["codeqa"]["metrics"] == overall["metrics"]
    assert list(summary["modes"]) == ["bm25"] and summary["about"]["modes"] == "bm25"
    assert {row["mode"] for row in rows} == {"bm25"}


def test_markdown_table_of_one_corpus_shows_its_overall_row(sample_corpora, tmp_path, capsys):
    code, stdout, _ = run_eval(
        capsys,
        "--corpora", str(sample_corpora),
        "--index-root", str(tmp_path / "indexes"),
        "--mode", "bm25",
        "--limit", "2",
    )  # fmt: skip
    assert code == 0
    header = next(line for line in stdout.splitlines() if line.startswith("| mode | corpus"))
    assert all(name in header for name in METRIC_NAMES)
    rows = [line for line in stdout.splitlines() if line.startswith("| bm25 |")]
    assert len(rows) == 1 and rows[0].startswith("| bm25 | **overall** | 2/2/2 |")


def test_compare_prints_both_runs_with_deltas(sample_corpora, tmp_path, capsys):
    summaries = []
    for top in ("1", "10"):
        code, stdout, _ = run_eval(
            capsys,
            "--corpora", str(sample_corpora),
            "--index-root", str(tmp_path / "indexes"),
            "--mode", "bm25",
            "--top", top,
            "--json",
        )  # fmt: skip
        assert code == 0
        path = tmp_path / f"top{top}.json"
        path.write_text(stdout)
        summaries.append(json.loads(stdout)["modes"]["bm25"]["overall"]["metrics"])
    code, stdout, _ = run_eval(
        capsys, "--compare", str(tmp_path / "top1.json"), str(tmp_path / "top10.json")
    )
    assert code == 0
    assert "results: 1 → 10" in stdout
    row = next(line for line in stdout.splitlines() if "| lines_returned@10 |" in line)
    a, b = summaries[0]["lines_returned@10"], summaries[1]["lines_returned@10"]
    cells = [cell.strip() for cell in row.split("|")[1:-1]]
    assert cells[3:5] == [f"{a:.0f}", f"{b:.0f}"]
    assert cells[5] == ("±0" if round(b - a) == 0 else f"+{b - a:.0f}")


def test_missing_corpus_is_one_line_error_before_any_indexing(tmp_path, capsys):
    dataset = tmp_path / "set.jsonl"
    dataset.write_text(json.dumps({"id": "1", "corpus": "nowhere-1.0", "question": "why?"}) + "\n")
    code, stdout, stderr = run_eval(
        capsys, str(dataset), "--corpora", str(tmp_path), "--index-root", str(tmp_path / "i")
    )
    assert code == 1 and stdout == ""
    assert stderr.strip() == f"codeqa: error: corpus 'nowhere-1.0' is not at {tmp_path}/nowhere-1.0"
    assert not (tmp_path / "i").exists()


def test_a_corpora_folder_that_may_not_be_read_is_one_line_error(tmp_path):
    # Python's is_dir raised PermissionError through the command: a traceback.
    dataset = tmp_path / "set.jsonl"
    dataset.write_text(json.dumps({"id": "1", "corpus": "pkg-1.0", "question": "why?"}) + "\n")
    corpora = tmp_path / "corpora"
    corpora.mkdir()
    prefix = as_a_user_who_cannot_read(corpora)
    try:
        done = subprocess.run(
            [*prefix, sys.executable, "-m", "codeqa.tui", "eval", str(dataset)]
            + ["--corpora", str(corpora), "--index-root", str(tmp_path / "i")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        corpora.chmod(0o700)
    assert done.returncode == 1
    assert done.stderr == (
        f"codeqa: error: corpus folder {corpora}/pkg-1.0 cannot be read: permission denied\n"
    )


def test_malformed_dataset_is_reported_with_its_line(tmp_path, capsys):
    dataset = tmp_path / "set.jsonl"
    dataset.write_text('{"id": "1", "corpus": "c", "question": "q"}\n{"id": "2", "corpus": "c"}\n')
    code, _, stderr = run_eval(capsys, str(dataset), "--corpora", str(tmp_path))
    assert code == 1
    assert stderr.strip() == (f"codeqa: error: {dataset}:2: missing required field 'question'")


def test_compare_rejects_a_file_that_is_not_a_summary(tmp_path, capsys):
    not_summary = tmp_path / "results.jsonl"
    not_summary.write_text('{"id": "1"}\n')
    code, _, stderr = run_eval(capsys, "--compare", str(not_summary), str(not_summary))
    assert code == 1
    assert "is not JSON" in stderr or "is not a codeqa eval summary" in stderr


def test_bad_repo_override_is_a_usage_error(capsys):
    code, _, stderr = run_eval(capsys, "--repo", "codeqa")
    assert code == 1 and "--repo expects ID=PATH" in stderr


def test_corpus_id_codeqa_maps_to_the_source_tree_unless_overridden(tmp_path):
    assert CorpusLocator().path_for("codeqa") == codeqa_source_root()
    assert (codeqa_source_root() / "retrieval" / "records.py").is_file()
    assert CorpusLocator(overrides={"codeqa": tmp_path}).path_for("codeqa") == tmp_path
    (tmp_path / "codeqa").mkdir()
    assert CorpusLocator(corpora_dir=tmp_path).path_for("codeqa") == tmp_path / "codeqa"


def test_agent_mode_scores_offline_answers_and_their_citations(sample_corpora, tmp_path, capsys):
    out = tmp_path / "agent.jsonl"
    code, stdout, stderr = run_eval(
        capsys,
        "--corpora", str(sample_corpora),
        "--index-root", str(tmp_path / "indexes"),
        "--mode", "bm25",
        "--agent",
        "--limit", "3",
        "--json",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["about"]["agent"] == "yes" and summary["about"]["model"] is None
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3
    for row in rows:
        agent = row["agent"]
        assert agent["tokens/answer"] == 0  # offline: no model, no tokens
        # citations_valid agrees with the cited lines' existence in the corpus
        valid = bool(agent["cited"])
        for cited in agent["cited"]:
            path, _, span = cited.rpartition(":")
            start, end = (int(n) for n in span.split("-"))
            file = sample_corpora / "codeqa" / path
            valid &= file.is_file() and 1 <= start <= end <= len(file.read_text().splitlines())
        assert agent["citations_valid"] == float(valid)
    means = summary["modes"]["bm25"]["overall"]["metrics"]
    assert means["errors"] == 0
    assert means["citations_valid"] == pytest.approx(
        sum(r["agent"]["citations_valid"] for r in rows) / 3, abs=1e-4
    )


def test_cited_line_at_1_scores_only_the_first_citation_against_the_gold_lines(tmp_path):
    from codeqa.agent.answer import Answer, Citation
    from codeqa.evals.agent_scores import score_answer
    from codeqa.evals.dataset import GoldRange, Question

    (tmp_path / "a.py").write_text("x = 1\n" * 50)
    question = Question("q", "c", "Where is x set?", gold_lines=(GoldRange("a.py", 20, 30),))

    def scored(*cited: tuple[int, int]) -> dict:
        citations = [Citation("a.py", start, end) for start, end in cited]
        return score_answer(Answer("", citations, [], [], None), question, tmp_path, 0.0).as_dict()

    second_on_gold = scored((1, 5), (25, 26))
    assert second_on_gold["citation_hit"] == 1.0 and second_on_gold["cited_file@1"] == 1.0
    assert second_on_gold["cited_line@1"] == 0.0  # the right file, the wrong place first
    assert scored((29, 40), (1, 5))["cited_line@1"] == 1.0
    assert scored()["cited_line@1"] == 0.0
    no_gold_lines = Question("q", "c", "Where is x set?", gold_files=("a.py",))
    answer = Answer("", [Citation("a.py", 1, 2)], [], [], None)
    assert score_answer(answer, no_gold_lines, tmp_path, 0.0).cited_line_at_1 is None


def overall_rows(stdout: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.split("|")[1:-1]]
        for line in stdout.splitlines()
        if line.startswith("| ") and "| **overall** |" in line
    ]


def test_mode_sweep_runs_every_mode_on_one_index_with_a_row_per_mode(
    sample_corpora, tmp_path, capsys
):
    indexes, out = tmp_path / "indexes", tmp_path / "results.jsonl"
    code, stdout, stderr = run_eval(
        capsys,
        "--corpora", str(sample_corpora),
        "--index-root", str(indexes),
        "--mode", "all",
        "--embed-model", "wordllama",  # a small static model: embedding is not the point here
        "--limit", "2",
        "--out", str(out),
    )  # fmt: skip
    assert code == 0, stderr
    assert [row[:3] for row in overall_rows(stdout)] == [
        ["hybrid", "**overall**", "2/2/2"],
        ["bm25", "**overall**", "2/2/2"],
        ["vector", "**overall**", "2/2/2"],
    ]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["mode"] for r in rows] == ["hybrid"] * 2 + ["bm25"] * 2 + ["vector"] * 2
    assert stderr.count("index ready") == 1  # one index serves every mode
    # A non-default embedder gets its own index folder; the default one is untouched.
    assert (indexes / "codeqa@three-tier@wordllama" / "manifest.json").is_file()
    assert not (indexes / "codeqa").exists()

    code, stdout, _ = run_eval(
        capsys,
        "--corpora", str(sample_corpora),
        "--index-root", str(indexes),
        "--mode", "vector,bm25",
        "--embed-model", "wordllama",
        "--limit", "2",
        "--json",
    )  # fmt: skip
    assert code == 0
    summary = json.loads(stdout)
    assert list(summary["modes"]) == ["vector", "bm25"]
    for groups in summary["modes"].values():
        assert list(groups) == ["overall", "codeqa"] and groups["overall"]["questions"] == 2


def test_unknown_mode_is_a_usage_error(capsys):
    code, stdout, stderr = run_eval(capsys, "--mode", "bm25,fuzzy")
    assert code == 1 and stdout == ""
    assert stderr.strip() == (
        "codeqa: error: --mode: unknown mode 'fuzzy'; choose from hybrid, bm25, vector or all"
    )


def test_windows_chunker_builds_its_own_index_of_fixed_overlapping_windows(
    sample_corpora, tmp_path, capsys
):
    from codeqa.retrieval.config import IndexSettings
    from codeqa.retrieval.errors import IndexMismatch
    from codeqa.retrieval.index import open_index
    from codeqa.retrieval.records import ChunkKind

    # The sample's files are short (one window each); add a long one to see windows cut.
    repo = tmp_path / "codeqa"
    shutil.copytree(sample_corpora / "codeqa", repo)
    long_file = "retrieval/chunking/chunker.py"
    (repo / long_file).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(codeqa_source_root() / long_file, repo / long_file)
    line_count = len((repo / long_file).read_text().splitlines())
    assert line_count > 300

    indexes = tmp_path / "indexes"
    for chunker in ("windows", "three-tier"):
        code, _, stderr = run_eval(
            capsys,
            "--repo", f"codeqa={repo}",
            "--index-root", str(indexes),
            "--mode", "bm25",
            "--chunker", chunker,
            "--limit", "1",
        )  # fmt: skip
        assert code == 0, stderr

    windows = open_index(
        repo, IndexSettings(index_dir=indexes / "codeqa@windows", chunker="windows")
    )
    three_tier = open_index(repo, IndexSettings(index_dir=indexes / "codeqa"))
    try:
        chunks = windows.chunks_for_path(long_file)
        assert {c.kind for c in chunks} == {ChunkKind.WINDOW}
        # Windows start every 90 lines (100 lines, 10 overlapping); the 2,000-char cap may
        # split a window, but no chunk crosses the window it came from.
        window_starts = range(1, line_count + 1, 90)
        for chunk in chunks:
            assert any(s <= chunk.start_line and chunk.end_line <= s + 99 for s in window_starts)
            assert len(chunk.text) <= 2_000
        # A window's first chunk starts at its first non-blank line (leading blanks say nothing).
        lines = (repo / long_file).read_text().splitlines()
        first_text = {
            next(n for n in range(s, s + 100) if lines[n - 1].strip())
            for s in window_starts
            if s + 99 <= line_count
        }
        assert first_text <= {c.start_line for c in chunks}
        assert ChunkKind.DECLARATION in {c.kind for c in three_tier.chunks_for_path(long_file)}
    finally:
        windows.close()
        three_tier.close()
    # Each index refuses the other chunker's settings rather than mixing chunks.
    with pytest.raises(IndexMismatch, match="chunker"):
        open_index(repo, IndexSettings(index_dir=indexes / "codeqa@windows"))


def test_scoring_without_vectors_works_on_a_fresh_index_root_with_two_releases(tmp_path, capsys):
    # Releases of one project share chunks and an --index-root shares one vector cache. A
    # hybrid search embeds its keyword candidates into that cache, so an index built after
    # the first release's questions would take those vectors and no longer be keyword-only.
    corpora = tmp_path / "corpora"
    questions = []
    for release in ("1.0", "1.1"):
        folder = corpora / f"json-{release}"
        folder.mkdir(parents=True)
        for name in JSON_FILES:
            shutil.copy(JSON_PACKAGE / name, folder / name)
        questions.append(
            {
                "id": release,
                "corpus": f"json-{release}",
                "question": "How does the scanner turn a JSON string literal into a str?",
                "gold_files": ["scanner.py"],
            }
        )
    dataset = tmp_path / "set.jsonl"
    dataset.write_text("".join(json.dumps(q) + "\n" for q in questions))
    code, stdout, stderr = run_eval(
        capsys, str(dataset),
        "--corpora", str(corpora),
        "--index-root", str(tmp_path / "indexes"),
        "--embed-model", "wordllama",
        "--without-vectors",
        "--json",
    )  # fmt: skip
    assert code == 0, stderr
    summary = json.loads(stdout)
    assert summary["about"]["vectors"] == "none filled"
    assert summary["modes"]["hybrid"]["overall"]["questions"] == 2


def test_scoring_without_vectors_refuses_an_index_that_holds_them(tmp_path, capsys):
    corpora = tmp_path / "corpora"
    (corpora / "json-1.0").mkdir(parents=True)
    for name in JSON_FILES:
        shutil.copy(JSON_PACKAGE / name, corpora / "json-1.0" / name)
    dataset = tmp_path / "set.jsonl"
    question = {"id": "1", "corpus": "json-1.0", "question": "How are floats parsed?"}
    dataset.write_text(json.dumps(question) + "\n")
    common = ["--corpora", str(corpora), "--index-root", str(tmp_path / "indexes")]
    common += ["--embed-model", "wordllama"]
    assert run_eval(capsys, str(dataset), *common)[0] == 0  # a run that fills the vectors

    code, stdout, stderr = run_eval(capsys, str(dataset), *common, "--without-vectors")
    assert code == 1 and stdout == ""
    index = tmp_path / "indexes" / "json-1.0@three-tier@wordllama"
    cache = tmp_path / "indexes" / "vectors.sqlite"
    assert stderr.strip().splitlines()[-1] == (
        f"codeqa: error: the index at {index} holds vectors (filled, or found in the vector "
        f"cache {cache} when it was built); scoring without them needs a new --index-root"
    )
