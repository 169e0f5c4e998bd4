"""What counts as a declaration in each tree-sitter grammar; how to read names, signatures, imports.

Node type names differ per grammar (Go's `method_declaration`, Rust's `impl_item`, Elixir's
`call` whose target is `def`), so each language gets a small spec; the chunker stays generic.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache

from tree_sitter import Node, Parser

ROLE_CLASS = "class"
ROLE_FUNCTION = "function"

# Node type fragments that make a declaration "callable" (shown as `Function:` in headers);
# everything else (classes, structs, impls, modules, namespaces…) is shown as `Class:`.
_FUNCTION_TYPE_WORDS = (
    "function",
    "method",
    "constructor",
    "init_declaration",
    "deinit",
    "subscript",
)

# Body node types, for signatures: the signature is the declaration text before its body.
_BODY_TYPES = frozenset(
    {
        "block",
        "body_statement",
        "compound_statement",
        "declaration_list",
        "do_block",
        "field_declaration_list",
        "enumerator_list",
        "indented_block",
        "statement_block",
    }
)

# Nested declarations are looked for this many levels below a declaration (class → body → method
# is two; C# namespace → declaration_list → class → … stays within three).
NESTED_SEARCH_DEPTH = 3
# Big top-level statements are searched deeper: a UMD/IIFE wrapper puts a library's functions
# at expression_statement → call → parenthesized → function → statement_block → declaration.
STATEMENT_SEARCH_DEPTH = 6

# Elixir has no declaration nodes: `defmodule Foo do … end` is a call whose target names the macro.
_ELIXIR_CLASS_MACROS = frozenset({"defmodule", "defprotocol", "defimpl"})
_ELIXIR_FUNCTION_MACROS = frozenset(
    {"def", "defp", "defmacro", "defmacrop", "defguard", "defguardp", "defdelegate"}
)
_ELIXIR_IMPORT_MACROS = frozenset({"alias", "import", "use", "require"})

# JS/TS `const f = () => …` is a declaration only when the value is a function or class.
_FUNCTION_VALUE_TYPES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function", "class"}
)
# ... or when the value wraps one in an expression: `cond && function httpAdapter(…)`,
# `forwardRef((props, ref) => …)`, `memo(function Inner…)`, zod's 260
# `core.$constructor("$ZodX", (inst, def) => …)`. These are the expressions looked through,
# at most WRAPPED_FUNCTION_DEPTH deep (a call's arguments count as one level).
_WRAPPING_EXPRESSION_TYPES = frozenset(
    {
        "binary_expression",
        "ternary_expression",
        "parenthesized_expression",
        "call_expression",
        "arguments",
        "await_expression",
        "as_expression",
        "satisfies_expression",
        "non_null_expression",
    }
)
WRAPPED_FUNCTION_DEPTH = 3
# `module.exports = function createApplication(…)`: the function's own name says more than
# the binding, which is the same in every CommonJS module.
_MODULE_EXPORT_BINDINGS = frozenset({"module.exports", "exports.default"})


@dataclass(frozen=True, slots=True)
class GrammarSpec:
    """Node types of one tree-sitter grammar that the chunker cuts at."""

    declarations: frozenset[str]
    # Nodes that wrap exactly one declaration and belong to it (export, decorators, templates).
    wrappers: frozenset[str] = frozenset()
    # Containers whose children count as siblings of the container (#ifdef, extern "C").
    transparent: frozenset[str] = frozenset()
    # Non-comment siblings that belong to the declaration after them (Rust attributes, Elixir @doc).
    attached: frozenset[str] = frozenset()
    imports: frozenset[str] = frozenset()
    # For languages whose imports are ordinary calls (Ruby require, Lua require, Bash source).
    import_pattern: re.Pattern[str] | None = None
    import_pattern_nodes: frozenset[str] = frozenset()
    # JS/TS: variable declarations whose value is a function are declarations too.
    function_variables: frozenset[str] = frozenset()
    elixir_calls: bool = False
    # Pure containers (C++/C#/PHP/TS namespaces): always cut at their members, however small.
    namespaces: frozenset[str] = frozenset()


_fs = frozenset

_C_DECLARATIONS = _fs(
    {
        "function_definition",
        "struct_specifier",
        "enum_specifier",
        "union_specifier",
        "type_definition",
    }
)
_C_TRANSPARENT = _fs({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif"})

_JS = GrammarSpec(
    declarations=_fs(
        {
            "function_declaration",
            "generator_function_declaration",
            "class_declaration",
            "method_definition",
        }
    ),
    wrappers=_fs({"export_statement"}),
    imports=_fs({"import_statement"}),
    function_variables=_fs({"lexical_declaration", "variable_declaration"}),
)
_TS_EXTRA = _fs(
    {
        "abstract_class_declaration",
        "interface_declaration",
        "type_alias_declaration",
        "enum_declaration",
        "internal_module",
        "module",
        "abstract_method_signature",
    }
)
_TS = GrammarSpec(
    declarations=_JS.declarations | _TS_EXTRA,
    wrappers=_JS.wrappers,
    imports=_JS.imports,
    function_variables=_JS.function_variables,
    namespaces=_fs({"internal_module", "module"}),
)

SPECS: dict[str, GrammarSpec] = {
    "python": GrammarSpec(
        declarations=_fs({"function_definition", "class_definition"}),
        imports=_fs({"import_statement", "import_from_statement", "future_import_statement"}),
    ),
    "javascript": _JS,
    "typescript": _TS,
    "tsx": _TS,
    "go": GrammarSpec(
        declarations=_fs({"function_declaration", "method_declaration", "type_declaration"}),
        imports=_fs({"import_declaration"}),
    ),
    "rust": GrammarSpec(
        declarations=_fs(
            {
                "function_item",
                "struct_item",
                "enum_item",
                "union_item",
                "trait_item",
                "impl_item",
                "mod_item",
                "macro_definition",
            }
        ),
        attached=_fs({"attribute_item"}),
        imports=_fs({"use_declaration"}),
    ),
    "java": GrammarSpec(
        declarations=_fs(
            {
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "annotation_type_declaration",
                "method_declaration",
                "constructor_declaration",
            }
        ),
        imports=_fs({"import_declaration"}),
    ),
    "kotlin": GrammarSpec(
        declarations=_fs(
            {"class_declaration", "object_declaration", "function_declaration", "companion_object"}
        ),
        imports=_fs({"import_header"}),
        transparent=_fs({"import_list"}),
    ),
    "scala": GrammarSpec(
        declarations=_fs(
            {
                "class_definition",
                "object_definition",
                "trait_definition",
                "function_definition",
                "enum_definition",
            }
        ),
        imports=_fs({"import_declaration"}),
    ),
    "c": GrammarSpec(
        declarations=_C_DECLARATIONS,
        transparent=_C_TRANSPARENT,
        imports=_fs({"preproc_include"}),
    ),
    "cpp": GrammarSpec(
        declarations=_C_DECLARATIONS
        | _fs({"class_specifier", "namespace_definition", "concept_definition"}),
        wrappers=_fs({"template_declaration"}),
        transparent=_C_TRANSPARENT | _fs({"linkage_specification"}),
        imports=_fs({"preproc_include"}),
        namespaces=_fs({"namespace_definition"}),
    ),
    "csharp": GrammarSpec(
        declarations=_fs(
            {
                "namespace_declaration",
                "class_declaration",
                "struct_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
                "method_declaration",
                "constructor_declaration",
                "property_declaration",
                "delegate_declaration",
            }
        ),
        transparent=_fs({"file_scoped_namespace_declaration"}),
        imports=_fs({"using_directive"}),
        namespaces=_fs({"namespace_declaration"}),
    ),
    "ruby": GrammarSpec(
        declarations=_fs({"class", "module", "method", "singleton_method", "singleton_class"}),
        import_pattern=re.compile(r"""\brequire(?:_relative)?\s*\(?\s*['"]([^'"]+)['"]"""),
        import_pattern_nodes=_fs({"call"}),
    ),
    "php": GrammarSpec(
        declarations=_fs(
            {
                "class_declaration",
                "interface_declaration",
                "trait_declaration",
                "enum_declaration",
                "function_definition",
                "method_declaration",
                "namespace_definition",
            }
        ),
        imports=_fs({"namespace_use_declaration"}),
        namespaces=_fs({"namespace_definition"}),
    ),
    "swift": GrammarSpec(
        declarations=_fs(
            {
                "class_declaration",
                "protocol_declaration",
                "function_declaration",
                "init_declaration",
                "deinit_declaration",
                "subscript_declaration",
            }
        ),
        imports=_fs({"import_declaration"}),
    ),
    "bash": GrammarSpec(
        declarations=_fs({"function_definition"}),
        import_pattern=re.compile(r"""^(?:source|\.)[ \t]+['"]?([^\n;]+?)['"]?[ \t]*$""", re.M),
        import_pattern_nodes=_fs({"command"}),
    ),
    "lua": GrammarSpec(
        declarations=_fs({"function_declaration"}),
        import_pattern=re.compile(r"""\brequire\s*\(?\s*['"]([^'"]+)['"]"""),
        import_pattern_nodes=_fs({"variable_declaration", "assignment_statement", "function_call"}),
    ),
    "elixir": GrammarSpec(
        declarations=_fs(),
        attached=_fs({"unary_operator"}),
        elixir_calls=True,
    ),
}


# When a file's own grammar yields mostly ERROR nodes, try this one: `.h` headers are
# mapped to C but are often C++.
RETRY_LANGUAGE = {"c": "cpp"}


@cache
def parser_for(language: str) -> Parser | None:
    """A tree-sitter parser for a language with a declaration spec, or None."""
    if language not in SPECS:
        return None
    from tree_sitter_language_pack import get_parser

    try:
        return get_parser(language)  # type: ignore[arg-type]
    except (LookupError, ValueError):
        return None


class SyntaxTrees:
    """One text's tree-sitter trees, each grammar's parsed at most once.

    The chunker and the code graph both read a file's tree: an index run hands both the same
    SyntaxTrees, so each file is parsed once (parsing again for the graph cost 0.56 s of
    django-2.2's 5.5 s to keyword-searchable).
    """

    def __init__(self, text: str) -> None:
        self._text = text
        self._source: bytes | None = None
        self._roots: dict[str, Node | None] = {}

    @property
    def source(self) -> bytes:
        """The text as tree-sitter reads it: node byte offsets index into this."""
        if self._source is None:
            self._source = self._text.encode("utf-8", "surrogatepass")
        return self._source

    def root(self, language: str) -> Node | None:
        """The root of the text's tree in `language`'s grammar; None for a language without one."""
        if language not in self._roots:
            parser = parser_for(language)
            self._roots[language] = None if parser is None else parser.parse(self.source).root_node
        return self._roots[language]


@dataclass(frozen=True, slots=True)
class Declaration:
    """One declaration found in a tree: the outer node spans it, the inner one names it."""

    outer: Node
    inner: Node
    name: str | None
    role: str


def _elixir_macro(node: Node) -> str | None:
    if node.type != "call":
        return None
    target = node.child_by_field_name("target")
    if target is None or target.type != "identifier":
        return None
    return _text(target)


def classify(node: Node, spec: GrammarSpec) -> Declaration | None:
    """The declaration this node is, or None."""
    kind = node.type
    if spec.elixir_calls:
        macro = _elixir_macro(node)
        if macro in _ELIXIR_CLASS_MACROS:
            return Declaration(node, node, _elixir_name(node), ROLE_CLASS)
        if macro in _ELIXIR_FUNCTION_MACROS:
            return Declaration(node, node, _elixir_name(node), ROLE_FUNCTION)
        return None
    if kind in spec.declarations:
        if kind in spec.namespaces and _body(node) is None:
            return None  # `namespace App;` is a statement about the file, not a container
        return Declaration(node, node, declaration_name(node), _role(kind))
    if kind in spec.wrappers:
        inner = _find_wrapped(node, spec)
        if inner is None:
            return _exported_expression(node) if spec.function_variables else None
        return Declaration(node, inner.inner, inner.name, inner.role)
    if kind in spec.function_variables:
        return _function_variable(node)
    if spec.function_variables and kind in ("pair", "expression_statement"):
        return _function_member(node)
    if kind == "decorated_definition":  # Python: decorators belong to the definition
        inner_node = node.child_by_field_name("definition")
        if inner_node is not None:
            return Declaration(
                node, inner_node, declaration_name(inner_node), _role(inner_node.type)
            )
    return None


def _find_wrapped(node: Node, spec: GrammarSpec) -> Declaration | None:
    for child in node.named_children:
        found = classify(child, spec)
        if found is not None:
            return found
        if child.type in ("expression_statement",):
            for grandchild in child.named_children:
                found = classify(grandchild, spec)
                if found is not None:
                    return found
    return None


def _wrapped_function(node: Node, depth: int = WRAPPED_FUNCTION_DEPTH) -> Node | None:
    """The function or class an expression is, or wraps (see _WRAPPING_EXPRESSION_TYPES)."""
    if node.type in _FUNCTION_VALUE_TYPES:
        return node
    if depth == 0 or node.type not in _WRAPPING_EXPRESSION_TYPES:
        return None
    for child in node.named_children:
        found = _wrapped_function(child, depth - 1)
        if found is not None:
            return found
    return None


def _value_role(value: Node) -> str:
    return ROLE_CLASS if value.type == "class" else ROLE_FUNCTION


def _function_variable(node: Node) -> Declaration | None:
    for child in node.named_children:
        if child.type != "variable_declarator":
            continue
        value = child.child_by_field_name("value")
        function = _wrapped_function(value) if value is not None else None
        if function is not None:
            name = child.child_by_field_name("name")
            return Declaration(node, node, _text(name) if name else None, _value_role(function))
    return None


def _exported_expression(node: Node) -> Declaration | None:
    """`export default cond && function httpAdapter(…)`: named by the function, else `default`."""
    value = node.child_by_field_name("value")
    function = _wrapped_function(value) if value is not None else None
    if function is None:
        return None
    own_name = function.child_by_field_name("name")
    name = _text(own_name) if own_name is not None else "default"
    return Declaration(node, function, name, _value_role(function))


def _function_member(node: Node) -> Declaration | None:
    """JS functions bound by `key: function…` in an object or `a.b = function…` statements."""
    if node.type == "pair":
        name, value = node.child_by_field_name("key"), node.child_by_field_name("value")
    else:
        assignment = node.named_children[0] if node.named_child_count == 1 else None
        if assignment is None or assignment.type != "assignment_expression":
            return None
        name = assignment.child_by_field_name("left")
        value = assignment.child_by_field_name("right")
    function = _wrapped_function(value) if value is not None else None
    if name is None or function is None:
        return None
    bound = _clean_name(_text(name).strip("'\""))
    own_name = function.child_by_field_name("name")
    if bound in _MODULE_EXPORT_BINDINGS and own_name is not None:
        bound = _text(own_name)
    return Declaration(node, function, bound, _value_role(function))


def _role(node_type: str) -> str:
    if any(word in node_type for word in _FUNCTION_TYPE_WORDS):
        return ROLE_FUNCTION
    return ROLE_CLASS


def _text(node: Node) -> str:
    # `text` is None only for trees parsed without their source bytes, which we never do.
    return (node.text or b"").decode("utf-8", "replace")


_NAME_TYPES = frozenset(
    {
        "identifier",
        "type_identifier",
        "simple_identifier",
        "field_identifier",
        "constant",
        "name",
        "word",
        "alias",
        "qualified_identifier",
        "scoped_identifier",
        "scope_resolution",
        "namespace_identifier",
        "dot_index_expression",
        "method_index_expression",
        "operator_name",
        "destructor_name",
        "user_type",
    }
)


def declaration_name(node: Node) -> str | None:
    """The declared name: `Session`, `Limiter.Allow` (Go receiver), `Polygon.perimeter` (C++)."""
    if node.type == "method_declaration" and node.child_by_field_name("receiver") is not None:
        return _go_method_name(node)
    if node.type == "impl_item":  # Rust: `impl Trait for Type` is named by the type
        type_node = node.child_by_field_name("type")
        if type_node is None:
            return None
        return _clean_name(_text(type_node).lstrip("&*").removeprefix("mut ").split("<", 1)[0])
    if node.type == "type_declaration":  # Go: `type X struct` → type_spec name
        for child in node.named_children:
            name = child.child_by_field_name("name")
            if name is not None:
                return _text(name)
        return None
    name = node.child_by_field_name("name")
    if name is not None:
        return _clean_name(_text(name))
    declarator = node.child_by_field_name("declarator")
    if declarator is not None:  # C/C++: int *f(...) → declarator chain down to the identifier
        return _declarator_name(declarator)
    for child in node.named_children:
        if child.type in _NAME_TYPES:
            return _clean_name(_text(child))
    return None


def _declarator_name(node: Node) -> str | None:
    for _ in range(8):
        if node.type in _NAME_TYPES:
            return _clean_name(_text(node))
        inner = node.child_by_field_name("declarator")
        if inner is None:
            for child in node.named_children:
                if child.type in _NAME_TYPES:
                    return _clean_name(_text(child))
            return None
        node = inner
    return None


def _go_method_name(node: Node) -> str | None:
    name = node.child_by_field_name("name")
    receiver = node.child_by_field_name("receiver")
    receiver_type = None
    if receiver is not None:
        for param in receiver.named_children:
            type_node = param.child_by_field_name("type")
            if type_node is not None:
                receiver_type = _text(type_node).lstrip("*").split("[", 1)[0]
    if name is None:
        return receiver_type
    return f"{receiver_type}.{_text(name)}" if receiver_type else _text(name)


def _elixir_name(node: Node) -> str | None:
    arguments = next((c for c in node.named_children if c.type == "arguments"), None)
    if arguments is None or not arguments.named_children:
        return None
    first = arguments.named_children[0]
    for _ in range(4):
        if first.type == "call":  # def name(args)
            target = first.child_by_field_name("target")
            return _text(target) if target is not None else None
        if first.type == "binary_operator":  # def name(args) when guard
            left = first.child_by_field_name("left")
            if left is None:
                return None
            first = left
            continue
        return _text(first)
    return None


_NAME_SEPARATORS = re.compile(r"::|:|->|\\")


def _clean_name(name: str) -> str:
    """One-line dotted name: `geometry::Circle` → `geometry.Circle`, `Inv:add` → `Inv.add`."""
    name = " ".join(name.split())
    return _NAME_SEPARATORS.sub(".", name).strip(".")


# Multi-line parameter lists collapse to one line: `( self, a, )` → `(self, a)`.
_TIGHT_OPEN = re.compile(r"([(\[<]) ")
_TIGHT_CLOSE = re.compile(r",? ([)\]>])")


def signature(declaration: Declaration, source: bytes, max_chars: int) -> str | None:
    """The declaration's head up to its body, whitespace collapsed: `def request(self, method)`."""
    node = declaration.inner
    body = _body(node)
    if body is not None and body.start_byte > node.start_byte:
        head = source[node.start_byte : body.start_byte]
    else:
        end = source.find(b"\n", node.start_byte, node.end_byte)
        head = source[node.start_byte : end if end >= 0 else node.end_byte]
    text = " ".join(head.decode("utf-8", "replace").split())
    text = _TIGHT_CLOSE.sub(r"\1", _TIGHT_OPEN.sub(r"\1", text)).rstrip("{:=( ").rstrip()
    if text.endswith(" do"):
        text = text[:-3]
    if not text:
        return None
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _body(node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None:
        return body
    for child in node.named_children:
        kind = child.type
        if kind in _BODY_TYPES or kind.endswith("_body"):
            return child
    return None


def top_level_nodes(root: Node, spec: GrammarSpec) -> Iterator[Node]:
    """Children of the root, with transparent containers (#ifdef, extern "C") opened up."""
    for child in root.named_children:
        if child.type in spec.transparent:
            yield from top_level_nodes(child, spec)
        else:
            yield child


def imports(nodes: list[Node], spec: GrammarSpec) -> list[str]:
    """Short names of what the file imports, in order, without duplicates."""
    names: list[str] = []
    for node in nodes:
        if node.type in spec.imports:
            names.extend(_import_names(node))
        elif spec.import_pattern is not None and node.type in spec.import_pattern_nodes:
            names.extend(spec.import_pattern.findall(_text(node)))
        elif spec.elixir_calls:
            names.extend(_elixir_imports(node))
    return list(dict.fromkeys(name for name in names if name))


def _import_names(node: Node) -> list[str]:
    kind = node.type
    source = node.child_by_field_name("source")
    if kind == "import_statement" and source is not None:  # JS/TS
        return [_text(source).strip("'\"`")]
    if kind == "import_statement":  # Python: import a.b, c
        return [
            _text(c) for c in node.named_children if c.type in ("dotted_name", "aliased_import")
        ]
    if kind == "import_from_statement":
        module = node.child_by_field_name("module_name")
        return [_text(module)] if module is not None else []
    if kind == "import_declaration" and node.child_by_field_name("path") is None:
        specs = [c for c in _descendants(node, 2) if c.type == "import_spec"]
        if specs:  # Go
            paths = (s.child_by_field_name("path") for s in specs)
            return [_text(path).strip('"`') for path in paths if path is not None]
    if kind == "preproc_include":
        path = node.child_by_field_name("path")
        return [_text(path).strip('<>"')] if path is not None else []
    if kind == "future_import_statement":
        return []
    words = _text(node).split("\n", 1)[0].replace(";", " ").split()
    return [" ".join(words[1:])[:80]] if len(words) > 1 else []


def _elixir_imports(node: Node) -> list[str]:
    names: list[str] = []
    macro = _elixir_macro(node)
    if macro in _ELIXIR_IMPORT_MACROS:
        name = _elixir_name(node)
        if name:
            names.append(name)
    elif macro in _ELIXIR_CLASS_MACROS:
        block = next((c for c in node.named_children if c.type == "do_block"), None)
        if block is not None:
            for child in block.named_children:
                if _elixir_macro(child) in _ELIXIR_IMPORT_MACROS:
                    names.extend(_elixir_imports(child))
    return names


def _descendants(node: Node, depth: int) -> Iterator[Node]:
    for child in node.named_children:
        yield child
        if depth > 1:
            yield from _descendants(child, depth - 1)


def usable_tree(root: Node | None, line_count: int, max_error_fraction: float) -> bool:
    """Whether a tree is more than guesswork: at most this share of its lines in errors."""
    if root is None or root.type == "ERROR":
        return False
    return error_line_count(root) <= max_error_fraction * line_count


def error_line_count(root: Node) -> int:
    """Lines covered by ERROR nodes (and missing tokens): how much of the tree is guesswork."""
    if not root.has_error:
        return 0
    total = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error:
            total += node.end_point[0] - node.start_point[0] + 1
        elif node.is_missing:
            total += 1
        else:
            stack.extend(child for child in node.children if child.has_error)
    return total
