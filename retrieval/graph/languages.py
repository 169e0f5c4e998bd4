"""Which tree-sitter node types define, call, import and inherit, per language.

One table per grammar, like `chunking/grammars.py`: the walker in `extract.py` stays generic.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

_fs = frozenset


@dataclass(frozen=True, slots=True)
class GraphSpec:
    """Node types of one grammar that the graph reads."""

    functions: frozenset[str]
    classes: frozenset[str]
    # Call node type → the field holding what is called (`None`: Java's object + name).
    calls: dict[str, str | None]
    imports: frozenset[str]
    # Names that mean "this object" inside a method (Go's receiver name is added per method).
    self_names: frozenset[str]
    # Containers that name the scope of their members without being definitions (Rust impl).
    scopes: frozenset[str] = _fs()
    # Rust: macro invocations, whose arguments the grammar leaves as tokens (`assert_eq!(
    # from_str::<T>(s)?, …)`, serde_json's `tri!(…)`); the calls in them are read from those.
    macros: frozenset[str] = _fs()
    # Rust's `macro_rules! name`: a definition `name!`, which a macro's invocation reaches
    # (macros have names of their own: `value_parser!` is not the method `value_parser`).
    macro_definitions: frozenset[str] = _fs()
    # JS/TS: `const f = () => …` defines f; `const x = require("m")` imports m; any other
    # top-level `const`/`let`/`var` defines a variable.
    variable_declarators: frozenset[str] = _fs()
    # What defines a variable or constant outside any function: Python's module-level
    # assignments, Rust's `const`/`static`, Go's `const`/`var`.
    variables: frozenset[str] = _fs()
    # What binds a name, to a class (`s = Session()`, `s = new Session()`, `s: Session`, Go's
    # `s := &Session{}`, Rust's `let s = Session { … }`), to a function's result (`s =
    # make()`, Go's `s := NewSession()`, Rust's `let s = Session::new()`) or to something
    # unknown (`for s in …`), so that `s.send()` can be followed to Session.send, or not.
    bindings: frozenset[str] = _fs()
    # Fields declared in a class or struct body: definitions `Class.field` with their
    # declared type, which calls through the field (`s.store.Get()`) follow, from any file.
    fields: frozenset[str] = _fs()
    # Java: a method sees its class's fields by their bare names (`excluder.excludeField()`
    # calls a method of the field `excluder` unless a local or parameter has that name).
    implicit_fields: bool = False
    # C: every name is the file's, as its linker and preprocessor see them (a struct
    # declared in another's body, a typedef's struct): no definition is qualified by another.
    flat_names: bool = False
    # C: what declares a function's parameters and locals; a call by one of their names
    # goes through a function pointer, and stays unresolved.
    locals: frozenset[str] = _fs()
    # C: an import names a file as written (`#include "a/b.h"`), by its path from the
    # including file or an include folder, and brings in all it defines.
    imports_files: bool = False


_JS = GraphSpec(
    functions=_fs(
        {
            "function_declaration",
            "generator_function_declaration",
            "method_definition",
            "abstract_method_signature",
        }
    ),
    classes=_fs(
        {
            "class_declaration",
            "abstract_class_declaration",
            "interface_declaration",
            "enum_declaration",
        }
    ),
    calls={"call_expression": "function", "new_expression": "constructor"},
    # An `export … from` re-exports a module's names, as an import would bind them.
    imports=_fs({"import_statement", "export_statement"}),
    self_names=_fs({"this"}),
    variable_declarators=_fs({"variable_declarator"}),
    bindings=_fs(
        {
            "variable_declarator",
            "assignment_expression",
            "required_parameter",
            "optional_parameter",
            "public_field_definition",
            "field_definition",
            "for_in_statement",
        }
    ),
    fields=_fs({"public_field_definition"}),
)

SPECS: dict[str, GraphSpec] = {
    "python": GraphSpec(
        functions=_fs({"function_definition"}),
        classes=_fs({"class_definition"}),
        calls={"call": "function"},
        imports=_fs({"import_statement", "import_from_statement"}),
        self_names=_fs({"self", "cls"}),
        variables=_fs({"assignment"}),
        bindings=_fs(
            {
                "assignment",
                "named_expression",
                "typed_parameter",
                "typed_default_parameter",
                "for_statement",
                "as_pattern",
            }
        ),
    ),
    "javascript": _JS,
    "typescript": _JS,
    "tsx": _JS,
    "go": GraphSpec(
        functions=_fs({"function_declaration", "method_declaration"}),
        classes=_fs({"type_spec"}),
        calls={"call_expression": "function"},
        imports=_fs({"import_spec"}),
        self_names=_fs(),
        variables=_fs({"const_spec", "var_spec"}),
        # Parameters (`s *Store`) and struct fields (`store *Store`, for `s.store.Get()`).
        bindings=_fs(
            {"short_var_declaration", "var_spec", "parameter_declaration", "field_declaration"}
        ),
        fields=_fs({"field_declaration"}),
    ),
    "rust": GraphSpec(
        functions=_fs({"function_item", "function_signature_item"}),
        classes=_fs({"struct_item", "enum_item", "union_item", "trait_item"}),
        calls={"call_expression": "function"},
        imports=_fs({"use_declaration", "mod_item"}),
        self_names=_fs({"self", "Self"}),
        scopes=_fs({"impl_item"}),
        macros=_fs({"macro_invocation"}),
        macro_definitions=_fs({"macro_definition"}),
        variables=_fs({"const_item", "static_item"}),
        bindings=_fs({"let_declaration"}),
    ),
    "java": GraphSpec(
        functions=_fs({"method_declaration", "constructor_declaration"}),
        classes=_fs(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
            }
        ),
        calls={"method_invocation": None, "object_creation_expression": "type"},
        imports=_fs({"import_declaration"}),
        # Not `super`: `super.m()` means the base's m, which `self.m` would not find first.
        self_names=_fs({"this"}),
        bindings=_fs(
            {
                "local_variable_declaration",
                "field_declaration",
                "formal_parameter",
                "enhanced_for_statement",
            }
        ),
        fields=_fs({"field_declaration"}),
        implicit_fields=True,
    ),
    "c": GraphSpec(
        functions=_fs({"function_definition"}),
        classes=_fs({"struct_specifier", "union_specifier", "enum_specifier"}),
        calls={"call_expression": "function"},
        imports=_fs({"preproc_include"}),
        self_names=_fs(),
        # File-level variables (not `extern` ones, nor prototypes: declarations of what is
        # defined elsewhere), typedefs and `#define`s.
        variables=_fs({"declaration", "type_definition", "preproc_def", "preproc_function_def"}),
        flat_names=True,
        locals=_fs({"parameter_declaration", "declaration"}),
        imports_files=True,
    ),
}

# File-name conventions for tests, per language family; a folder named like this marks
# every file under it as a test too.
# (`test/` alone is not enough: django/test/ is the test framework, shipped code.)
_TEST_FOLDERS = _fs({"tests", "__tests__", "spec", "specs"})


def is_test_path(path: str) -> bool:
    """Whether `path` is a test file by its language's naming convention."""
    folder, name = posixpath.split(path)
    stem, _, extension = name.partition(".")
    parts = folder.split("/")
    if any(part in _TEST_FOLDERS for part in parts) or "src/test" in folder:
        return True
    if extension == "py":
        return stem.startswith("test_") or stem.endswith("_test") or stem == "conftest"
    if extension == "go":
        return stem.endswith("_test")
    if extension == "java":
        return stem.endswith(("Test", "Tests"))
    if extension in ("c", "h"):
        return stem.startswith("test_") or stem.endswith("_test")
    # JS/TS: `x.test.ts`, `x.spec.js`.
    return ".test." in name or ".spec." in name
