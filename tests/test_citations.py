"""Citations: every form a model writes is found; only lines actually shown survive."""

from __future__ import annotations

import pytest
from codeqa.agent.answer import Citation
from codeqa.agent.citations import parse_citations, verify_citations


def cited(text: str) -> list[str]:
    return [str(match.citation) for match in parse_citations(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see src/app/models.py:12 for that", ["src/app/models.py:12"]),
        ("defined in src/app/models.py:12-40.", ["src/app/models.py:12-40"]),
        ("GitHub style src/app/models.py#L12-L40 too", ["src/app/models.py:12-40"]),
        ("GitHub single line src/app/models.py#L7", ["src/app/models.py:7"]),
        ("colon-L style src/app/models.py:L12-L40", ["src/app/models.py:12-40"]),
        ("en dash src/app/models.py:12–40", ["src/app/models.py:12-40"]),
        ("backticked `src/app/models.py:3-5` ok", ["src/app/models.py:3-5"]),
        (
            "space in path `docs/user guide/setup notes.md:3-9`",
            ["docs/user guide/setup notes.md:3-9"],
        ),
        ("bare file name models.py:8", ["models.py:8"]),
        ("reversed range models.py:40-12", ["models.py:12-40"]),
        ("wordy `utils.py`, lines 10-20", ["utils.py:10-20"]),
        ("wordy utils.py (line 7)", ["utils.py:7"]),
        ("markdown link [here](pkg/mod.py#L2-L4)", ["pkg/mod.py:2-4"]),
        ("two in parens (a/b.py:3, c/d.py:4-6)", ["a/b.py:3", "c/d.py:4-6"]),
        ("a backticked name without extension `Makefile:4`", ["Makefile:4"]),
    ],
)
def test_citation_forms_are_recognised(text, expected):
    assert cited(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the meeting is at 12:30 today",
        "served on http://example.com:8080/path",
        "ratio 3:4 and version 1.2:3 of nothing",
        "a line number of 0 is no citation: models.py:0",
    ],
)
def test_things_that_look_like_citations_are_not(text):
    assert cited(text) == []


def lines_of(files: dict[str, int]):
    return lambda path: files.get(path)


def test_citation_inside_a_shown_range_is_kept_as_written():
    result = verify_citations(
        "It parses here (pkg/mod.py:12-14).", [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 50})
    )
    assert result.text == "It parses here (pkg/mod.py:12-14)."
    assert result.citations == [Citation("pkg/mod.py", 12, 14)]
    assert result.notes == []


def test_citation_spanning_two_adjacent_shown_ranges_is_kept():
    result = verify_citations(
        "pkg/mod.py:8-15",
        [("pkg/mod.py", 1, 10), ("pkg/mod.py", 11, 20)],
        lines_of({"pkg/mod.py": 50}),
    )
    assert result.citations == [Citation("pkg/mod.py", 8, 15)]


def test_citation_overhanging_a_shown_range_is_narrowed_to_the_shown_lines():
    result = verify_citations(
        "See `pkg/mod.py:15-30`.", [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 50})
    )
    assert result.text == "See `pkg/mod.py:15-20`."
    assert result.repaired == 1
    assert "pkg/mod.py:15-30" in result.notes[0]


def test_citation_of_unshown_lines_in_a_shown_file_moves_to_the_nearest_shown_excerpt():
    result = verify_citations(
        "See pkg/mod.py:41-42.",
        [("pkg/mod.py", 1, 5), ("pkg/mod.py", 30, 38)],
        lines_of({"pkg/mod.py": 50}),
    )
    assert result.citations == [Citation("pkg/mod.py", 30, 38)]
    assert result.repaired == 1


def test_citation_of_a_file_never_shown_is_removed_and_the_text_tidied():
    result = verify_citations(
        "Tokens are read (lexer.py:3-9) and parsed (pkg/mod.py:12).",
        [("pkg/mod.py", 10, 20)],
        lines_of({"pkg/mod.py": 50, "lexer.py": 30}),
    )
    assert result.text == "Tokens are read and parsed (pkg/mod.py:12)."
    assert result.removed == 1
    assert result.citations == [Citation("pkg/mod.py", 12, 12)]
    assert "lexer.py:3-9" in result.notes[0]


def test_fabricated_file_is_removed_from_a_list_of_citations():
    result = verify_citations(
        "Both matter (ghost/none.py:1-2, pkg/mod.py:11).",
        [("pkg/mod.py", 10, 20)],
        lines_of({"pkg/mod.py": 50}),
    )
    assert result.text == "Both matter (pkg/mod.py:11)."


def test_short_path_is_completed_to_the_one_shown_file_it_names():
    result = verify_citations(
        "In mod.py:12 and ./pkg/mod.py:13.", [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 50})
    )
    assert result.citations == [Citation("pkg/mod.py", 12, 12), Citation("pkg/mod.py", 13, 13)]
    assert result.text == "In pkg/mod.py:12 and pkg/mod.py:13."


def test_absolute_path_inside_the_repo_is_made_relative():
    result = verify_citations(
        "/home/me/repo/pkg/mod.py:12",
        [("pkg/mod.py", 10, 20)],
        lines_of({"pkg/mod.py": 50}),
        repo_root="/home/me/repo",
    )
    assert result.citations == [Citation("pkg/mod.py", 12, 12)]


def test_citation_past_the_end_of_a_file_that_shrank_is_clipped():
    result = verify_citations(
        "pkg/mod.py:10-20", [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 15})
    )
    assert result.citations == [Citation("pkg/mod.py", 10, 15)]


def test_citation_of_a_deleted_file_is_removed_even_if_it_was_shown():
    result = verify_citations("pkg/mod.py:10-12", [("pkg/mod.py", 10, 20)], lines_of({}))
    assert result.citations == []
    assert result.removed == 1


def test_path_with_spaces_is_verified_like_any_other():
    path = "docs/user guide/setup notes.md"
    result = verify_citations(f"Install first (`{path}:3-4`).", [(path, 1, 9)], lines_of({path: 9}))
    assert result.citations == [Citation(path, 3, 4)]
    assert result.text == f"Install first (`{path}:3-4`)."


# A repository that has its own etc/passwd, so a suffix match would find "the same file".
REPO = "/home/me/repo"
SHOWN_WITH_PASSWD = [("etc/passwd", 1, 9), ("pkg/mod.py", 10, 20)]
FILES_WITH_PASSWD = {"etc/passwd": 9, "pkg/mod.py": 50}


@pytest.mark.parametrize(
    "reference",
    [
        "file:///etc/passwd:1",
        "`file:///etc/passwd:1`",
        "file://localhost/etc/passwd:1-5",
        "`/etc/passwd`:1",
        "/etc/passwd (L1-L5)",
        "/etc/passwd @ 1-5",
        "/etc/passwd#L1-L5",
        "/etc/passwd\uff1a1",  # full-width colon
        "/etc/passwd:1\uff0d5",  # full-width hyphen-minus
        "/etc/passwd:1\u22125",  # minus sign
        "/etc/pass\u200bwd:1",  # zero-width space inside the name
        "/etc/passwd:\u200b1",
        "../../etc/passwd:1-5",
        "`../../etc/passwd`, lines 1-5",
        "`/etc/passwd (L1-L5)`",
        "`/etc/passwd @ 1-5`",
        "~/etc/passwd:1",
        "C:\\Windows\\etc\\passwd:1",
        "C:/etc/passwd:1",
        "https://example.com/etc/passwd#L1-L5",
        "/home/me/other/etc/passwd:1",
        "/home/me/repo/../other/etc/passwd:1",
    ],
)
def test_reference_outside_the_repository_is_removed_however_it_is_spelled(reference):
    result = verify_citations(
        f"The users are listed in {reference} for login.",
        SHOWN_WITH_PASSWD,
        lines_of(FILES_WITH_PASSWD),
        repo_root=REPO,
    )
    assert result.citations == []
    assert "passwd" not in result.text
    assert result.text == "The users are listed in for login."
    assert result.removed == 1 and result.repaired == 0
    assert "pointed outside the repository" in result.notes[0]


def test_dotdot_path_is_not_repointed_to_the_repositorys_own_file_with_that_suffix():
    result = verify_citations(
        "See ../../etc/passwd:1-5 and etc/passwd:2.",
        SHOWN_WITH_PASSWD,
        lines_of(FILES_WITH_PASSWD),
        repo_root=REPO,
    )
    assert result.citations == [Citation("etc/passwd", 2, 2)]
    assert result.text == "See and etc/passwd:2."
    assert not any("Corrected" in note for note in result.notes)


@pytest.mark.parametrize(
    ("written", "kept"),
    [
        ("`pkg/mod.py`:12", "`pkg/mod.py:12`"),
        ("`pkg/mod.py` (L12-L14)", "`pkg/mod.py:12-14`"),
        ("pkg/mod.py (L12-L14)", "pkg/mod.py:12-14"),
        ("`pkg/mod.py (L12-L14)`", "`pkg/mod.py:12-14`"),
        ("pkg/mod.py @ 12-14", "pkg/mod.py:12-14"),
        ("pkg/mod.py#L12-L14", "pkg/mod.py:12-14"),
        ("pkg/mod.py\uff1a12", "pkg/mod.py:12"),
        ("pkg/mod.py:12\uff0d14", "pkg/mod.py:12-14"),
        ("pkg/mod.py:12\u201014", "pkg/mod.py:12-14"),
        ("pkg/mo\u200bd.py:12", "pkg/mod.py:12"),
        ("file:///home/me/repo/pkg/mod.py:12", "pkg/mod.py:12"),
        ("/home/me/repo/pkg/mod.py @ 12", "pkg/mod.py:12"),
        ("pkg/../pkg/mod.py:12", "pkg/mod.py:12"),
        ("pkg\\mod.py:12", "pkg/mod.py:12"),
    ],
)
def test_new_spellings_of_an_in_repo_citation_are_recognised_and_verified(written, kept):
    result = verify_citations(
        f"Parsed in {written}.", [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 50}), REPO
    )
    assert result.citations[0].path == "pkg/mod.py"
    assert result.text == f"Parsed in {kept}."
    assert result.removed == 0


def test_look_alike_characters_outside_citations_are_left_as_written():
    text = "Note\uff1a the zero\u200bwidth stays; see pkg/mod.py\uff1a12."
    result = verify_citations(text, [("pkg/mod.py", 10, 20)], lines_of({"pkg/mod.py": 50}))
    assert result.text == "Note\uff1a the zero\u200bwidth stays; see pkg/mod.py:12."


def test_absolute_path_without_line_numbers_stays_prose_and_is_never_a_citation():
    text = "It reads `/etc/passwd` and /etc/shadow at start-up."
    result = verify_citations(text, SHOWN_WITH_PASSWD, lines_of(FILES_WITH_PASSWD), REPO)
    assert result.text == text
    assert result.citations == []


def test_short_path_matching_two_shown_files_is_ambiguous_and_removed():
    result = verify_citations(
        "See mod.py:3.", [("a/mod.py", 1, 9), ("b/mod.py", 1, 9)], lines_of({"a/mod.py": 9})
    )
    assert result.citations == []
    assert result.removed == 1
