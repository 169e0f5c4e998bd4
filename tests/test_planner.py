"""The rule-based planner: which exact searches a question gets (no model, no index)."""

from __future__ import annotations

from codeqa.agent.planner import plan_offline
from codeqa.agent.state import Query, QueryKind
from codeqa.retrieval.search.query import analyze_query


def _texts(queries: list[Query], kind: QueryKind) -> list[str]:
    return [query.text for query in queries if query.kind is kind]


def test_the_planner_looks_up_the_names_and_files_that_search_lifts():
    # One reading of the question: a name search ranks up is a name the agent looks up,
    # and a word neither treats as code ("and/or", "IDs") is looked up by neither.
    question = (
        "Why does prepare(url) in src/requests/models.py drop the IDs and/or the "
        "__init__ defaults of PreparedRequest that `Session.merge_environment_settings` set?"
    )
    analysis = analyze_query(question)
    planned = plan_offline(question, limit=20)
    assert _texts(planned, QueryKind.SYMBOL) == list(analysis.symbols)
    assert _texts(planned, QueryKind.PATH) == list(analysis.paths)


def test_a_traceback_is_read_at_its_frames_lines_and_a_file_named_beside_it_is_read_too():
    question = (
        "It crashes when settings.toml holds no [db] section:\n"
        'Traceback (most recent call last):\n  File "app/cli.py", line 3, in <module>\n'
        '  File "app/loader.py", line 41, in load_config\n'
        "KeyError: 'missing section'\n"
    )
    planned = plan_offline(question, limit=20)
    assert Query(QueryKind.PATH, "app/cli.py", 3) in planned
    assert Query(QueryKind.PATH, "app/loader.py", 41) in planned
    assert Query(QueryKind.SYMBOL, "load_config") in planned
    assert Query(QueryKind.GREP, "'missing section'") in planned
    assert Query(QueryKind.SYMBOL, "KeyError") in planned
    assert Query(QueryKind.PATH, "settings.toml") in planned


def test_an_apostrophe_is_not_a_quote_to_grep_for():
    planned = plan_offline("Why does the session's timeout differ from the adapter's default?")
    assert _texts(planned, QueryKind.GREP) == []


def test_the_whole_question_is_searched_however_many_names_it_gives():
    # A pasted issue names more files and symbols than the plan has places for; the
    # search of the whole question, the one that reads all of it, still runs.
    question = (
        "After upgrading, `Session.send`, `HTTPAdapter.send`, `PreparedRequest.prepare_body`, "
        "`merge_setting`, `get_netrc_auth`, `rebuild_auth` and `rebuild_proxies` in "
        "requests/sessions.py and requests/adapters.py stopped sending the body."
    )
    planned = plan_offline(question, limit=8)
    assert len(planned) == 8
    assert Query(QueryKind.SEARCH, question) in planned
    assert len(_texts(planned, QueryKind.SYMBOL) + _texts(planned, QueryKind.PATH)) == 7
