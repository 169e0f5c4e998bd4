"""JS/TS definitions wrapped in a call or an expression are chunked under their bound name."""

from __future__ import annotations

from codeqa.retrieval.chunking.chunker import ChunkLimits, chunk_file
from codeqa.retrieval.records import ChunkKind, SourceFile

# Every declaration is its own chunk, however small: the names are what is under test.
LIMITS = ChunkLimits(whole_file_max_lines=0, min_declaration_lines=1)


def _declared(path: str, language: str, text: str) -> set[str]:
    chunks = chunk_file(SourceFile(path, language, text, "0" * 64), LIMITS)
    return {c.symbol for c in chunks if c.kind is ChunkKind.DECLARATION and c.symbol}


def test_default_export_behind_a_condition_takes_the_function_name() -> None:
    source = (
        "const isHttpAdapterSupported = typeof process !== 'undefined';\n"
        "export default isHttpAdapterSupported && function httpAdapter(config) {\n"
        "  return dispatch(config);\n"
        "}\n"
    )
    assert "httpAdapter" in _declared("lib/adapters/http.js", "javascript", source)


def test_anonymous_default_export_behind_a_condition_is_named_default() -> None:
    source = "export default isXHRAdapterSupported && function (config) {\n  return 1;\n}\n"
    assert _declared("lib/adapters/xhr.js", "javascript", source) == {"default"}


def test_constant_bound_to_a_factory_call_with_a_function_argument_takes_the_constant_name() -> (
    None
):
    source = (
        'export const $ZodString = /*@__PURE__*/ core.$constructor("$ZodString", (inst, def) => {\n'
        "  inst._zod.parse = (payload) => payload;\n"
        "});\n"
        'export const $ZodNumber = core.$constructor("$ZodNumber", (inst, def) => {\n'
        "  inst._zod.parse = (payload) => payload;\n"
        "});\n"
    )
    assert _declared("src/v4/core/schemas.ts", "typescript", source) == {
        "$ZodString",
        "$ZodNumber",
    }


def test_react_forward_ref_and_memo_components_take_their_variable_names() -> None:
    source = (
        "const Button = forwardRef((props, ref) => {\n  return <button ref={ref} />;\n});\n"
        "const Row = React.memo(function RowInner(props) {\n  return <tr />;\n});\n"
    )
    assert _declared("src/Button.tsx", "tsx", source) == {"Button", "Row"}


def test_module_exports_of_a_named_function_takes_the_function_name() -> None:
    source = (
        "module.exports = function createApplication() {\n  return app;\n};\n"
        "exports.json = cond ? function (body) {\n  return body;\n} : null;\n"
    )
    assert _declared("lib/express.js", "javascript", source) == {
        "createApplication",
        "exports.json",
    }


def test_a_constant_holding_a_plain_call_is_not_a_declaration() -> None:
    source = "const router = express.Router();\nconst total = sum(1, 2);\n"
    assert _declared("app.js", "javascript", source) == set()
