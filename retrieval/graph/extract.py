"""Read definitions, calls, imports and bases out of one file's tree-sitter tree.

Best effort by design: a tree with ERROR nodes still yields whatever its intact parts
define and call, and nothing here raises on odd code.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache

from codeqa.retrieval.chunking.chunker import ChunkLimits
from codeqa.retrieval.chunking.grammars import (
    RETRY_LANGUAGE,
    SyntaxTrees,
    parser_for,
    usable_tree,
)
from codeqa.retrieval.graph.languages import SPECS, GraphSpec, is_test_path
from codeqa.retrieval.graph.modules import is_manifest, read_manifest
from codeqa.retrieval.graph.records import (
    KIND_CLASS,
    KIND_FUNCTION,
    KIND_MACRO,
    KIND_METHOD,
    KIND_VARIABLE,
    THROUGH_POINTER,
    Base,
    Call,
    Definition,
    FileGraph,
    Import,
)
from codeqa.retrieval.records import SourceFile
from tree_sitter import Node, Query, QueryCursor

# Fields naming the left and right side of `a.b`, `a::b`, `a->b` across the grammars.
_LEFT_FIELDS = ("object", "operand", "value", "path", "scope", "argument")
_RIGHT_FIELDS = ("attribute", "property", "field", "name")
# A callee written longer than this is an expression, not a name worth storing whole.
MAX_CALLEE_CHARS = 120
# Minified files (this many characters a line on average, as the chunker judges them) get
# no graph: their names are mangled, and walking them costs more than the rest of a repo.
MINIFIED_AVERAGE_LINE_CHARS = ChunkLimits().minified_average_line_chars
# A `.h` header is read as C unless the chunker would read it as C++ (RETRY_LANGUAGE): its
# C tree mostly errors and its C++ tree not. The graph does not read C++.
MAX_ERROR_LINE_FRACTION = ChunkLimits().max_error_line_fraction
# Rust macros whose braces hold items (tokio's `cfg_rt! { pub fn spawn … }`, most of its
# API) are parsed as Rust again, nested this deep at most.
MAX_MACRO_DEPTH = 4
# The standard library's macros, called everywhere, defined in no repository: as calls they
# would only fill the graph (clap 4.5's workspace names them about 1,700 times by grep; the
# graph holds 721 calls of its own macros).
STANDARD_MACROS = frozenset(
    """assert assert_eq assert_ne debug_assert debug_assert_eq debug_assert_ne panic
    unreachable todo unimplemented vec format format_args print println eprint eprintln
    write writeln dbg matches concat stringify include include_str include_bytes env
    option_env cfg line column file module_path compile_error""".split()
)
# Where a macro that holds items may stand: at the top of a file or module, in an impl.
_ITEM_LISTS = frozenset({"source_file", "declaration_list"})


def extract(file: SourceFile, trees: SyntaxTrees | None = None) -> FileGraph:
    """The graph facts of `file`: none (and no language) when its language has no graph table.

    `trees`: the file's parses, shared with the chunker so that an index run parses it once.
    """
    if is_manifest(file.path):  # go.mod, package.json, Cargo.toml: module names, no code
        return FileGraph(
            file.path, file.sha256, None, False, modules=read_manifest(file.path, file.text)
        )
    language = file.language or ""
    spec = SPECS.get(language)
    if spec is None or parser_for(language) is None or (query := _query(language)) is None:
        return FileGraph(file.path, file.sha256, None, False)
    facts = FileGraph(file.path, file.sha256, language, is_test_path(file.path))
    lines = file.text.count("\n") + 1
    if len(file.text) / lines > MINIFIED_AVERAGE_LINE_CHARS:
        return facts
    trees = trees or SyntaxTrees(file.text)
    root = trees.root(language)
    retry = RETRY_LANGUAGE.get(language)
    if (
        retry is not None
        and not usable_tree(root, lines, MAX_ERROR_LINE_FRACTION)
        and usable_tree(trees.root(retry), lines, MAX_ERROR_LINE_FRACTION)
    ):
        return FileGraph(file.path, file.sha256, None, False)  # C++ in a C header
    if root is not None:  # always: the parser was found above
        _Walker(spec, language, facts).run(root, query)
    return facts


@cache
def _query(language: str) -> Query | None:
    """One query matching every node type the language's table names.

    Matching runs in tree-sitter's C code, so Python visits only these nodes, not the
    whole tree: on django-2.2 that made extraction ~4x faster than a Python walk.
    """
    spec = SPECS[language]
    from tree_sitter_language_pack import get_language

    try:
        grammar = get_language(language)  # type: ignore[arg-type]
    except (LookupError, ValueError):
        return None
    wanted = (
        spec.functions
        | spec.classes
        | spec.scopes
        | spec.imports
        | spec.variable_declarators
        | spec.variables
        | spec.bindings
        | spec.macros
        | spec.locals
        | spec.macro_definitions
        | frozenset(spec.calls)
    )
    present = sorted(kind for kind in wanted if grammar.id_for_node_kind(kind, True) is not None)
    return Query(grammar, "[" + " ".join(f"({kind})" for kind in present) + "] @node")


@dataclass(frozen=True, slots=True)
class _Scope:
    """An open definition (or Rust impl) while its nodes are visited."""

    end_byte: int
    names: tuple[str, ...]  # the enclosing names, for qualnames
    caller: str | None  # the enclosing definition's qualname, for calls
    receiver: str | None  # Go: the method receiver's name, which means `self`
    # Where the definition starts: of Java's overloads, which share a qualname, a call
    # sees the bindings of its own (`fromJson(JsonReader reader)`, not `(Reader reader)`).
    start_byte: int = 0


def _text(node: Node | None) -> str:
    return (node.text or b"").decode("utf-8", "replace") if node is not None else ""


def _line(node: Node) -> int:
    return node.start_point[0] + 1


def dotted(node: Node | None) -> str | None:
    """`a.b.c` for a chain of names however the grammar spells it; None for other expressions."""
    if node is None:
        return None
    if node.type in ("generic_function", "generic_type", "parenthesized_expression"):
        return dotted(node.named_children[0]) if node.named_child_count else None
    if node.child_count == 0:
        text = _text(node)
        return text if text.replace("$", "_").isidentifier() else None
    right = next((r for f in _RIGHT_FIELDS if (r := node.child_by_field_name(f))), None)
    left = next((r for f in _LEFT_FIELDS if (r := node.child_by_field_name(f))), None)
    if right is None or right.child_count:
        return None
    if left is None:
        return _text(right)
    prefix = dotted(left)
    return f"{prefix}.{_text(right)}" if prefix else f"?.{_text(right)}"


class _Walker:
    def __init__(self, spec: GraphSpec, language: str, facts: FileGraph, depth: int = 0) -> None:
        self.spec = spec
        self.language = language
        self.facts = facts
        self.depth = depth  # of macros holding items, re-parsed (`_macro_items`)
        # Qualnames of the classes (and Rust impl types) seen so far: a function directly
        # inside one is a method.
        self.class_names: set[str] = set()
        # Calls on a name, typed once the whole file is read: `s.send()` as (call's index,
        # enclosing definition, s, where the call starts), `self.s.send()` as (call's
        # index, class, s); and the nodes that bind names, with their definitions. Only
        # the bindings of names that calls are made on are read past their name (most are
        # not): in a profile of django's extraction, binding took 0.30 s so against 0.49 s
        # reading every binding's value and annotation.
        self.local_calls: list[tuple[int, str | None, str, int, int]] = []
        self.scope_start = 0  # the start of the definition holding the node visited
        self.attribute_calls: list[tuple[int, str, str]] = []
        self.binding_nodes: list[tuple[Node, str | None]] = []
        # What each such name was bound to, as a class name or None for anything else:
        # locals by (enclosing definition, name) with where each binding starts (a call
        # sees those before it), attributes by (class, name). A name bound to two things
        # types none of its calls.
        self.bound: dict[tuple[str | None, str], list[tuple[int, str | None]]] = {}
        self.attributes: dict[tuple[str, str], set[str | None]] = {}
        self.wanted_locals: set[tuple[str | None, str]] = set()
        self.wanted_attributes: set[tuple[str | None, str]] = set()
        # C: the parameters and locals declared so far in each function, by its qualname.
        self.declared_locals: dict[str, set[str]] = {}
        # Lines before the text a call node was parsed from (a macro's body, parsed alone).
        self.line_offset = 0

    def run(self, root: Node, query: Query, outer: _Scope | None = None) -> None:
        """Visit the query's nodes in document order, tracking which definition holds each
        (inside `outer`, for the items of a macro)."""
        nodes = QueryCursor(query).captures(root).get("node", [])
        nodes.sort(key=lambda node: (node.start_byte, -node.end_byte))
        names, caller, receiver = (
            (outer.names, outer.caller, outer.receiver) if outer else ((), None, None)
        )
        stack = [_Scope(root.end_byte + 1, names, caller, receiver)]
        for node in nodes:
            while len(stack) > 1 and node.start_byte >= stack[-1].end_byte:
                stack.pop()
            opened = self._visit(node, stack[-1])
            if opened is not None:
                stack.append(opened)
        if self.local_calls or self.attribute_calls:
            self._type_receivers()

    def _type_receivers(self) -> None:
        """Give the calls on bound names the class their name was bound to, if one."""
        self.wanted_locals = {(caller, name) for _, caller, name, _, _ in self.local_calls}
        self.wanted_attributes = {(owner, name) for _, owner, name in self.attribute_calls}
        if self.spec.implicit_fields:  # `excluder.f()` may be on the class's field
            for _, caller, name, _, _ in self.local_calls:
                if (owner := self._class_of(caller)) is not None:
                    self.wanted_attributes.add((owner, name))
        for node, scope in self.binding_nodes:
            self._bind(node, scope)
        calls = self.facts.calls
        for index, caller, name, at, scope_start in self.local_calls:
            bindings = self.bound.get((caller, name), ())
            earlier = {bound for start, bound in bindings if scope_start <= start <= at}
            owner = self._class_of(caller) if self.spec.implicit_fields else None
            if earlier or owner is None:
                receiver = _one_class(earlier)
            elif (owner, name) in self.attributes:  # no local or parameter of that name
                receiver = _one_class(self.attributes[(owner, name)])
            else:  # a field declared in another file (a base class's), if one: query time
                receiver = f"self.{name}"
            if receiver is not None:
                calls[index] = replace(calls[index], receiver=receiver)
        for index, owner, attribute in self.attribute_calls:
            bound = self.attributes.get((owner, attribute))
            # Never bound in this file: the field's declared type, read at query time.
            receiver = _one_class(bound) if bound is not None else f"self.{attribute}"
            if receiver is not None:
                calls[index] = replace(calls[index], receiver=receiver)

    def _visit(self, node: Node, scope: _Scope) -> _Scope | None:
        """Record what `node` is; returns the scope it opens, if it is a definition."""
        kind = node.type
        spec = self.spec
        if kind in spec.functions or kind in spec.classes:
            definition = self._define(node, scope.names)
            if definition is None:
                return None
            self.facts.definitions.append(definition)
            receiver = scope.receiver
            if kind == "method_declaration" and self.language == "go":
                receiver = _go_receiver(node)
            names = tuple(definition.qualname.split("."))
            return _Scope(node.end_byte, names, definition.qualname, receiver, node.start_byte)
        if kind in spec.scopes:
            return self._rust_impl(node, scope.names)
        if kind in spec.calls:
            self.scope_start = scope.start_byte
            self._call(node, scope.caller, scope.receiver)
        elif kind in spec.macro_definitions:
            name = _text(node.child_by_field_name("name"))
            if name:
                self.facts.definitions.append(
                    Definition(
                        self.facts.path, name + "!", KIND_MACRO, _line(node), node.end_point[0] + 1
                    )
                )
        elif kind in spec.macros:
            self._macro_call(node, scope.caller)
            tokens = next((c for c in node.named_children if c.type == "token_tree"), None)
            parent = node.parent
            if tokens is None:
                return None
            if parent is not None and parent.type in _ITEM_LISTS and _text(tokens)[:1] == "{":
                self._macro_items(tokens, scope)
            else:
                self._token_calls(tokens, scope.caller)
        elif kind in spec.imports:
            self._import(node)
        elif kind in spec.variable_declarators:
            opened = self._js_declarator(node, scope.names)
            if opened is None and kind in spec.bindings:  # `const s = new Session()`
                self.binding_nodes.append((node, scope.caller))
            return opened
        else:
            if kind in spec.variables and scope.caller is None:  # not inside a function
                self._variables(node, scope.names)
            if kind in spec.locals and scope.caller is not None:
                self._declare_locals(node, scope.caller)
            if kind in spec.fields and scope.caller in self.class_names:
                self._fields(node, scope.names)
            if kind in spec.bindings:
                self.binding_nodes.append((node, scope.caller))
        return None

    # -- definitions --

    def _define(self, node: Node, scope: tuple[str, ...]) -> Definition | None:
        name = self._name(node)
        if not name:
            return None
        if self.spec.flat_names:
            scope = ()
        qualname = ".".join((*scope, name)) if "." not in name else name
        is_class = node.type in self.spec.classes
        owner_is_class = bool(scope) and ".".join(scope) in self.class_names
        kind = KIND_CLASS if is_class else KIND_METHOD if owner_is_class else KIND_FUNCTION
        if node.type == "method_declaration" and self.language == "go":
            kind = KIND_METHOD
        returns = None
        if not is_class:  # Go calls it the result, Java the method's type
            declared = (
                node.child_by_field_name("return_type")
                or node.child_by_field_name("result")
                or (node.child_by_field_name("type") if self.language == "java" else None)
            )
            returns = _annotation(declared)
            if returns == "Self" and scope:  # Rust: the type of the impl it is in
                returns = ".".join(scope)
        # C: a `static` function, and a type, are seen by their own file and its includers.
        file_local = self.spec.flat_names and (is_class or "static" in _storage(node))
        arity, variadic = _java_parameters(node) if self.language == "java" else (None, False)
        definition = Definition(
            self.facts.path,
            qualname,
            kind,
            _line(node),
            node.end_point[0] + 1,
            returns,
            file_local,
            arity,
            variadic,
        )
        if is_class:
            self.class_names.add(qualname)
            for base in _bases(node, self.language):
                self.facts.bases.append(Base(self.facts.path, qualname, base))
        return definition

    def _name(self, node: Node) -> str | None:
        if node.type == "method_declaration" and self.language == "go":
            receiver_type = _go_receiver_type(node)
            name = _text(node.child_by_field_name("name"))
            return f"{receiver_type}.{name}" if receiver_type and name else name or None
        if self.spec.flat_names:
            if node.type in self.spec.functions:  # C: `int *f(void)`, by its declarator
                declared, is_function = _declared(node.child_by_field_name("declarator"))
                return declared if is_function else None
            if node.child_by_field_name("body") is None:  # `struct a *p`: a use, no definition
                return None
        name_node = node.child_by_field_name("name")
        name = _text(name_node)
        return name if name and "\n" not in name else None

    def _variables(self, node: Node, scope: tuple[str, ...]) -> None:
        """`X = …` at module level (each of `a, b = …`), a Rust `const`/`static` (in an impl:
        `Type.X`), a Go `const`/`var` spec (each of `a, b = …`), C's file-level variables,
        typedefs and `#define`s."""
        if self.spec.flat_names:
            self._c_declaration(node)
            return
        if self.language == "python":
            left = node.child_by_field_name("left")
            if left is None:
                return
            names = [left] if left.type == "identifier" else []
            if left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
                names = [child for child in left.named_children if child.type == "identifier"]
        else:
            names = node.children_by_field_name("name")
        for name in names:
            self._add_variable(name, node, scope)

    def _c_declaration(self, node: Node) -> None:
        """`int a, *b = 0;` (each, `static` ones local to the file), `typedef … name;`,
        `#define NAME …` and `#define F(x) …`. Prototypes and `extern` declarations name what
        is defined elsewhere: no definition."""
        kind = node.type
        path, start, end = self.facts.path, _line(node), _last_line(node)
        if kind in ("preproc_def", "preproc_function_def"):
            macro = _text(node.child_by_field_name("name"))
            if macro.isidentifier():
                self.facts.definitions.append(
                    Definition(path, macro, KIND_MACRO, start, end, None, True)
                )
                self._macro_calls(node, macro)
            return
        storage = _storage(node)
        if "extern" in storage:
            return
        for declarator in node.children_by_field_name("declarator"):
            name, is_function = _declared(declarator)
            if name is None:
                continue
            if kind == "type_definition":  # `typedef int handler(int);` too
                self.facts.definitions.append(
                    Definition(path, name, KIND_CLASS, start, end, None, True)
                )
            elif not is_function:
                local = "static" in storage
                self.facts.definitions.append(
                    Definition(path, name, KIND_VARIABLE, start, end, None, local)
                )

    def _macro_calls(self, node: Node, macro: str) -> None:
        """C: the calls in a `#define`'s body, which the grammar keeps as text (`#define
        CHECK(e) if (isError(e)) return e`), parsed as C on the lines they stand on and made
        by the macro; a call of one of its parameters goes through whatever it is given."""
        value = node.child_by_field_name("value")
        parser = parser_for(self.language)
        query = _query(self.language)
        if value is None or parser is None or query is None or b"(" not in (value.text or b""):
            return
        parameters = node.child_by_field_name("parameters")
        self.declared_locals[macro] = {
            _text(name) for name in (parameters.named_children if parameters else ())
        }
        body = (value.text or b"").replace(b"\\\n", b" \n")  # continued lines stay lines
        # Inside a function, as a statement or as an expression: `do { … } while (0)`, `(f(a))`.
        # Parsed alone (a prefix of blank lines to keep line numbers cost zstd 0.35 CPU-s).
        tree = parser.parse(b"void m(void) {" + body + b"\n;}")
        nodes = QueryCursor(query).captures(tree.root_node).get("node", [])
        self.line_offset = value.start_point[0]
        try:
            for call in sorted(nodes, key=lambda node: node.start_byte):
                if call.type in self.spec.calls:
                    self._call(call, macro, None)
        finally:
            self.line_offset = 0

    def _declare_locals(self, node: Node, caller: str) -> None:
        """C: the names a parameter or local declaration in function `caller` declares."""
        declared = self.declared_locals.setdefault(caller, set())
        for declarator in node.children_by_field_name("declarator"):
            name, _ = _declared(declarator)
            if name is not None:
                declared.add(name)

    def _add_variable(self, name: Node, node: Node, scope: tuple[str, ...]) -> None:
        text = _text(name)
        if text.isidentifier():
            qualname = ".".join((*scope, text))
            definition = Definition(
                self.facts.path, qualname, KIND_VARIABLE, _line(node), node.end_point[0] + 1
            )
            self.facts.definitions.append(definition)

    def _fields(self, node: Node, scope: tuple[str, ...]) -> None:
        """A field of the class `scope` (Java's `Excluder a, b;`, Go's `store *Store`,
        TypeScript's `store: Store`): `Class.field`, returning its declared type."""
        type_node = node.child_by_field_name("type")
        names = [
            declarator.child_by_field_name("name")
            for declarator in node.children_by_field_name("declarator")
        ] or [*node.children_by_field_name("name")]
        returns = _annotation(type_node)
        for name in names:
            text = _text(name)
            if text.isidentifier():
                qualname = ".".join((*scope, text))
                self.facts.definitions.append(
                    Definition(
                        self.facts.path,
                        qualname,
                        KIND_VARIABLE,
                        _line(node),
                        node.end_point[0] + 1,
                        returns,
                    )
                )

    def _rust_impl(self, node: Node, scope: tuple[str, ...]) -> _Scope:
        """`impl Trait for Type { fn m … }`: methods are `Type.m`; Type inherits Trait."""
        type_name = _rust_type_name(node.child_by_field_name("type"))
        trait = node.child_by_field_name("trait")
        if type_name and trait is not None:
            base = _strip_generics(_text(trait))
            self.facts.bases.append(Base(self.facts.path, type_name, base.replace("::", ".")))
        inner = (*scope, type_name) if type_name else scope
        if type_name:
            self.class_names.add(".".join(inner))
        return _Scope(node.end_byte, inner, None, None)

    def _js_declarator(self, node: Node, scope: tuple[str, ...]) -> _Scope | None:
        """`const f = () => …` is a definition (returns its scope); `require("m")` an import."""
        name_node = node.child_by_field_name("name")
        value = node.child_by_field_name("value")
        if name_node is None:
            return None
        if value is None:  # `let x;`
            if not scope and name_node.type == "identifier" and _js_top_level(node):
                self._add_variable(name_node, node, scope)
            return None
        if value.type in ("arrow_function", "function_expression", "function", "class"):
            if name_node.type != "identifier":
                return None
            name = _text(name_node)
            is_class = value.type == "class"
            definition = Definition(
                self.facts.path,
                ".".join((*scope, name)),
                KIND_CLASS if is_class else KIND_FUNCTION,
                _line(node),
                node.end_point[0] + 1,
                None if is_class else _annotation(value.child_by_field_name("return_type")),
            )
            self.facts.definitions.append(definition)
            if is_class:
                self.class_names.add(definition.qualname)
                for base in _bases(value, self.language):
                    self.facts.bases.append(Base(self.facts.path, definition.qualname, base))
            names = tuple(definition.qualname.split("."))
            return _Scope(node.end_byte, names, definition.qualname, None, node.start_byte)
        module = _require_target(value)
        if module is not None:
            line = _line(node)
            if name_node.type == "identifier":
                self._add_import(module, None, _text(name_node), line)
            elif name_node.type == "object_pattern":
                for part in name_node.named_children:
                    if part.type == "shorthand_property_identifier_pattern":
                        self._add_import(module, _text(part), _text(part), line)
                    elif part.type == "pair_pattern":
                        key, alias = (
                            part.child_by_field_name("key"),
                            part.child_by_field_name("value"),
                        )
                        self._add_import(module, _text(key), _text(alias), line)
        elif not scope and name_node.type == "identifier" and _js_top_level(node):
            self._add_variable(name_node, node, scope)
        return None

    # -- what names are bound to (Python, JS/TS) --

    def _bind(self, node: Node, scope: str | None) -> None:
        """Record the class a name is bound to here: `s = Session()`, `s = new Session()`,
        `s: Session`, `(s := Session())`, a parameter `s: Session`, `self.s = Session()` or
        `this.s = new Session()` in a method, a field or `s = …` in a class body (an
        attribute of the class); or the function whose result it is (`s = make()`, `s =
        self.make()`), typed at query time by the class the function declares it returns.
        Anything else binds the name to None (unknown), `for s in …` and `with … as s` too,
        except `= None`/`null`, which no method is called on. Untyped parameters are not
        read: bindings are per definition, so they could only shadow a binding made later
        in it."""
        kind = node.type
        at = node.start_byte
        if kind in _ASSIGNMENTS:
            self._assign(node, scope, *_ASSIGNMENTS[kind])
        elif kind in _REBINDINGS:  # also `except E as e`
            for target in _names_in(node.child_by_field_name(_REBINDINGS[kind])):
                if (key := self._wanted(scope, _text(target))) is not None:
                    self._record(key, None, at)
        elif node.child_by_field_name("declarator") is not None:  # Java: `Foo a = …, b;`
            self._declare(node, scope)
        else:
            self._typed_names(node, scope)

    def _typed_names(self, node: Node, scope: str | None) -> None:
        """A typed parameter (Python's name has no field when it has no default), Go's
        parameters and struct fields (`a, b *Store`), Java's `for (Foo f : …)`; a TypeScript
        parameter property (`constructor(private store: Store)`) types the class's field too."""
        at = node.start_byte
        names: list[Node | None] = [*node.children_by_field_name("name")] or [
            node.child_by_field_name("pattern") or next(iter(node.named_children), None)
        ]
        bound = _annotation(node.child_by_field_name("type"))
        owner = None
        if any(child.type == "accessibility_modifier" for child in node.named_children):
            owner = self._class_of(scope)
        for name in names:
            if name is None or name.type not in ("identifier", "field_identifier"):
                continue
            if (key := self._wanted(scope, _text(name))) is not None:
                self._record(key, bound, at)
            if owner is not None and (owner, _text(name)) in self.wanted_attributes:
                self._record((owner, _text(name)), bound, at)

    def _declare(self, node: Node, scope: str | None) -> None:
        """Java's `Foo a = …, b;` (a local or a field): each name is bound to the declared
        type, or with `var` to what its value makes."""
        type_node = node.child_by_field_name("type")
        declared = None if _text(type_node) == "var" else _annotation(type_node)
        for declarator in node.children_by_field_name("declarator"):
            key = self._wanted(scope, _text(declarator.child_by_field_name("name")))
            if key is None:
                continue
            value = declarator.child_by_field_name("value")
            if value is not None and value.type == "null_literal":
                continue
            bound = declared or (self._made_by(value) if value is not None else None)
            self._record(key, bound, node.start_byte)

    def _assign(
        self, node: Node, scope: str | None, name_field: str, value_field: str, type_field: str
    ) -> None:
        left = _single(node.child_by_field_name(name_field))
        if left is None:
            return
        at = node.start_byte
        if left.type in ("attribute", "member_expression"):
            if _text(left.child_by_field_name("object")) not in self.spec.self_names:
                return
            attribute = left.child_by_field_name("attribute") or left.child_by_field_name(
                "property"
            )
            owner = self._class_of(scope)
            if attribute is None or owner is None:
                return
            key: tuple[str | None, str] | None = (owner, _text(attribute))
            if key not in self.wanted_attributes:
                return
        elif left.type in ("identifier", "property_identifier"):
            key = self._wanted(scope, _text(left))
            if key is None:
                return
        else:
            for name in _names_in(left):  # `a, b = …` rebinds each name to the unknown
                if (wanted := self._wanted(scope, _text(name))) is not None:
                    self._record(wanted, None, at)
            return
        right = _single(node.child_by_field_name(value_field))
        if right is not None and right.type in ("none", "null", "undefined", "nil"):
            return
        bound = _annotation(node.child_by_field_name(type_field))
        if bound is None and right is not None:
            bound = self._made_by(right)
        self._record(key, bound, at)

    def _wanted(self, scope: str | None, name: str) -> tuple[str | None, str] | None:
        """The key of name `name` bound in `scope` (an attribute in a class body), if a
        call is made on it; None if none is."""
        key = (scope, name)
        if scope is not None and scope in self.class_names:
            return key if key in self.wanted_attributes else None
        return key if key in self.wanted_locals else None

    def _record(self, key: tuple[str | None, str], bound: str | None, at: int) -> None:
        owner, name = key
        if owner is not None and owner in self.class_names:
            self.attributes.setdefault((owner, name), set()).add(bound)
        else:
            self.bound.setdefault(key, []).append((at, bound))

    def _own(self, name: str, receiver: str | None = None) -> str:
        """One spelling for `self.`, `this.`, `cls.`, `Self::` and a Go `receiver`: `self.`."""
        head, dot, rest = name.partition(".")
        if dot and (head == receiver or head in self.spec.self_names):
            return f"self.{rest}"
        return name

    def _made_by(self, value: Node) -> str | None:
        """`_constructed`, with `this.make()` spelled `self.make`, as calls are."""
        name = _constructed(value)
        return self._own(name) if name else None

    def _class_of(self, qualname: str | None) -> str | None:
        """The innermost class enclosing the definition `qualname`."""
        parts = qualname.split(".") if qualname else []
        for end in range(len(parts) - 1, 0, -1):
            if (owner := ".".join(parts[:end])) in self.class_names:
                return owner
        return None

    def _receiver(self, callee: str, callee_node: Node | None, caller: str | None) -> str | None:
        """The class the object of a method call `callee` was made by (`Session().send()`);
        a call on a bound name is noted, to be typed once the file is read (`_type_receivers`)."""
        parts = callee.split(".")
        owner = self._class_of(caller)
        if owner is None and caller and self.language == "go":  # a type of another file
            owner = caller.rsplit(".", 1)[0] if "." in caller else None
        if len(parts) == 3 and parts[0] == "self" and owner:
            self.attribute_calls.append((len(self.facts.calls), owner, parts[1]))
            return None
        if len(parts) != 2:
            return None
        if parts[0] == "?":  # `Session().send()`, `new Session().send()`
            inner = callee_node.child_by_field_name("object") if callee_node else None
            return self._made_by(inner) if inner is not None else None
        if parts[0] != "self" and callee_node is not None:
            at = callee_node.start_byte
            self.local_calls.append((len(self.facts.calls), caller, parts[0], at, self.scope_start))
        return None

    # -- calls --

    def _call(self, node: Node, caller: str | None, receiver: str | None) -> None:
        field = self.spec.calls[node.type]
        callee_node = None
        if field is None:  # Java: `object.name(…)` or `name(…)`
            name = _text(node.child_by_field_name("name"))
            target = node.child_by_field_name("object")
            prefix = dotted(target) if target is not None else ""
            callee = f"{prefix or '?'}.{name}" if target is not None else name
            callee_node = node  # where the call starts, and its `object`, for its receiver
        else:
            callee_node = node.child_by_field_name(field)
            if (
                callee_node is None
                or callee_node.end_byte - callee_node.start_byte > MAX_CALLEE_CHARS
            ):
                return  # an expression, not a name (and `dotted` recurses once per dot)
            callee = dotted(callee_node) or ""
            if callee_node is not None and node.type == "object_creation_expression":
                callee = _strip_generics(_text(callee_node))
        if not callee or len(callee) > MAX_CALLEE_CHARS:
            return
        callee = self._own(callee, receiver)
        bound = None
        if self.spec.bindings and node.type not in _CONSTRUCTIONS_OF_NEW:
            bound = self._receiver(callee, callee_node, caller)
        if caller is not None and callee in self.declared_locals.get(caller, ()):
            bound = THROUGH_POINTER  # C: `handler(x)` where handler is a parameter or local
        line = _line(node) + self.line_offset
        arguments = _java_arguments(node) if self.language == "java" else None
        self.facts.calls.append(Call(self.facts.path, caller, callee, line, bound, arguments))

    def _macro_call(self, node: Node, caller: str | None) -> None:
        """A macro's invocation as a call of `name!` (`crate::value_parser!(…)` →
        `crate.value_parser!`); the standard library's own (`vec!`, `format!`) are left out."""
        written = _text(node.child_by_field_name("macro")).replace("::", ".")
        if not written or len(written) > MAX_CALLEE_CHARS or written in STANDARD_MACROS:
            return
        self.facts.calls.append(Call(self.facts.path, caller, written + "!", _line(node)))

    def _macro_items(self, tokens: Node, scope: _Scope) -> None:
        """The definitions and calls of the items a macro's braces hold, parsed as Rust on
        the lines they stand on; too deeply nested, only their calls."""
        parser = parser_for(self.language)
        if parser is None or self.depth >= MAX_MACRO_DEPTH:
            self._token_calls(tokens, scope.caller)
            return
        row, column = tokens.start_point
        inner = (tokens.text or b"")[1:-1]
        tree = parser.parse(b"\n" * row + b" " * (column + 1) + inner)
        walker = _Walker(self.spec, self.language, self.facts, self.depth + 1)
        walker.class_names = self.class_names  # an impl's type, for `Type.m`
        query = _query(self.language)
        if query is not None:
            walker.run(tree.root_node, query, scope)

    def _token_calls(self, tokens: Node, caller: str | None) -> None:
        """The calls in a macro's token tree, spelled as outside macros: a path (`a::b::f`,
        `self.f`, `x.f`, `Type::<T>::f`) followed by a parenthesized group, and `f().g()`'s
        `?.g`. Groups nest; a nested macro's name (`vec!`) is no call."""
        path: list[str] = []
        line = 0
        joined = False  # the last token was `::` or `.`, which continue a path
        generics = 0  # inside a turbofish `::<…>`
        for token in tokens.children[1:-1]:  # between the delimiters
            kind = token.type
            if generics:
                generics += (kind == "<") - (kind == ">")
                joined = bool(generics)  # `f::<T>` is a path again once `>` closes it
                continue
            if kind in ("identifier", "self", "super", "crate"):
                if not (joined and path):
                    path, line = [], _line(token)
                path.append(_text(token))
                joined = False
            elif kind == "." or kind == "::" and path:
                path = path or ["?"]  # `"a".to_string()`: a method of a value, not `to_string()`
                joined = True
            elif kind == "<" and joined and path:
                generics = 1
            elif kind == "token_tree":
                opens_call = path and not joined and _text(token).startswith("(")
                if opens_call and len(".".join(path)) <= MAX_CALLEE_CHARS:
                    callee = self._own(".".join(path))
                    self.facts.calls.append(Call(self.facts.path, caller, callee, line))
                self._token_calls(token, caller)
                path, joined = (["?"], False) if opens_call else ([], False)
            else:
                path, joined = [], False

    # -- imports --

    def _add_import(self, module: str, name: str | None, alias: str, line: int) -> None:
        if module:
            self.facts.imports.append(Import(self.facts.path, module, name, alias, line))

    def _import(self, node: Node) -> None:
        line = _line(node)
        language = self.language
        if language == "python":
            self._python_import(node, line)
        elif language in ("javascript", "typescript", "tsx"):
            self._js_import(node, line)
        elif self.spec.imports_files:
            # `#include "a.h"`, as written; `<stdio.h>` is the system's, outside the
            # repository. It brings in everything a.h defines, as a star import.
            written = node.child_by_field_name("path")
            if written is not None and written.type == "string_literal":
                self._add_import(_text(written).strip('"'), None, "*", line)
        elif language == "go":
            path = _text(node.child_by_field_name("path")).strip('"`')
            alias = _text(node.child_by_field_name("name")) or path.rsplit("/", 1)[-1]
            self._add_import(path, None, alias, line)
        elif language == "rust" and node.type == "mod_item":
            # `mod a;` binds a, the child module in a.rs or a/mod.rs; `mod a { … }` is inline.
            if node.child_by_field_name("body") is None:
                name = _text(node.child_by_field_name("name"))
                self._add_import("self", name, name, line)
        elif language == "rust":
            argument = node.child_by_field_name("argument")
            if argument is not None:
                self._rust_use(argument, "", line)
        elif language == "java":
            target = next(
                (c for c in node.named_children if c.type in ("scoped_identifier", "identifier")),
                None,
            )
            full = _text(target)
            if any(child.type == "asterisk" for child in node.children):
                self._add_import(full, None, "*", line)
            elif "." in full:
                module, name = full.rsplit(".", 1)
                self._add_import(module, name, name, line)

    def _python_import(self, node: Node, line: int) -> None:
        if node.type == "import_statement":
            for child in node.named_children:
                if child.type == "dotted_name":
                    self._add_import(_text(child), None, _text(child), line)
                elif child.type == "aliased_import":
                    module = _text(child.child_by_field_name("name"))
                    self._add_import(module, None, _text(child.child_by_field_name("alias")), line)
            return
        module = _text(node.child_by_field_name("module_name"))
        for index, child in enumerate(node.children):
            if child.type == "wildcard_import":
                self._add_import(module, None, "*", line)
            elif node.field_name_for_child(index) != "name":
                continue
            elif child.type == "dotted_name":
                self._add_import(module, _text(child), _text(child), line)
            elif child.type == "aliased_import":
                name = _text(child.child_by_field_name("name"))
                self._add_import(module, name, _text(child.child_by_field_name("alias")), line)

    def _js_import(self, node: Node, line: int) -> None:
        if node.type == "export_statement":
            self._js_reexport(node, line)
            return
        module = _text(node.child_by_field_name("source")).strip("'\"`")
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        if clause is None:
            self._add_import(module, None, "", line)  # `import "./setup"`: for its effects
            return
        for child in clause.named_children:
            if child.type == "identifier":
                self._add_import(module, "default", _text(child), line)
            elif child.type == "namespace_import":
                bound = next((c for c in child.named_children if c.type == "identifier"), None)
                self._add_import(module, None, _text(bound), line)
            elif child.type == "named_imports":
                for spec in child.named_children:
                    if spec.type != "import_specifier":
                        continue
                    name = _text(spec.child_by_field_name("name"))
                    self._add_import(
                        module, name, _text(spec.child_by_field_name("alias")) or name, line
                    )

    def _js_reexport(self, node: Node, line: int) -> None:
        """`export * from "m"`, `export * as ns from "m"`, `export {a, b as c} from "m"`: the
        names the barrel file exports, bound as imports, which resolution follows."""
        source = node.child_by_field_name("source")
        if source is None:  # `export function …`, `export {a}`: definitions, not imports
            return
        module = _text(source).strip("'\"`")
        for child in node.children:
            if child.type == "*":
                self._add_import(module, None, "*", line)
            elif child.type == "namespace_export":
                bound = next((c for c in child.named_children if c.type == "identifier"), None)
                self._add_import(module, None, _text(bound), line)
            elif child.type == "export_clause":
                for spec in child.named_children:
                    if spec.type != "export_specifier":
                        continue
                    name = _text(spec.child_by_field_name("name"))
                    alias = _text(spec.child_by_field_name("alias")) or name
                    self._add_import(module, name, alias, line)

    def _rust_use(self, node: Node, prefix: str, line: int) -> None:
        kind = node.type
        if kind == "use_as_clause":
            full = _join(prefix, _text(node.child_by_field_name("path")).replace("::", "."))
            module, _, name = full.rpartition(".")
            self._add_import(module or name, name, _text(node.child_by_field_name("alias")), line)
        elif kind == "scoped_use_list":
            inner = _join(prefix, _text(node.child_by_field_name("path")).replace("::", "."))
            listing = node.child_by_field_name("list")
            if listing is not None:
                self._rust_use(listing, inner, line)
        elif kind == "use_list":
            for child in node.named_children:
                self._rust_use(child, prefix, line)
        elif kind == "use_wildcard":
            path = next(iter(node.named_children), None)
            self._add_import(_join(prefix, _text(path).replace("::", ".")), None, "*", line)
        elif kind in ("scoped_identifier", "identifier", "self", "crate"):
            full = _join(prefix, _text(node).replace("::", "."))
            module, _, name = full.rpartition(".")
            if name == "self":  # `use a::b::{self}` binds b
                module, _, name = module.rpartition(".")
            self._add_import(module or name, name, name, line)


# What binds a name, by node type: the fields of the name, the value and an annotation.
_ASSIGNMENTS = {
    "assignment": ("left", "right", "type"),
    "named_expression": ("name", "value", "type"),  # no annotation: the field is absent
    "assignment_expression": ("left", "right", "type"),
    "variable_declarator": ("name", "value", "type"),
    "public_field_definition": ("name", "value", "type"),
    "field_definition": ("property", "value", "type"),
    "short_var_declaration": ("left", "right", "type"),  # Go: no type field
    "var_spec": ("name", "value", "type"),
    "let_declaration": ("pattern", "value", "type"),
}
# What rebinds a name to something unknown, by node type: the field of the target.
_REBINDINGS = {"for_statement": "left", "for_in_statement": "left", "as_pattern": "alias"}
_PATTERN_NAMES = frozenset({"identifier", "shorthand_property_identifier_pattern"})
# Expressions that make an instance of the class they name, or return a function's result,
# and the field naming the class or function (query time tells the two apart).
_CONSTRUCTIONS = {
    "call": "function",
    "call_expression": "function",
    "new_expression": "constructor",
    "composite_literal": "type",  # Go: `Session{…}`
    "struct_expression": "name",  # Rust: `Session { … }`
    "object_creation_expression": "type",  # Java: `new Session()`
}
# Call nodes that are constructions themselves: their callee is a class, not a method.
_CONSTRUCTIONS_OF_NEW = frozenset({"new_expression", "object_creation_expression"})


def _one_class(bound: set[str | None] | None) -> str | None:
    """The class a name was bound to, when it was bound to that one class only."""
    if bound is None or len(bound) != 1:
        return None
    return next(iter(bound))


def _names_in(target: Node | None) -> list[Node]:
    """The names a binding target binds: `s`, `a, b`, `(a, b)`, `as s`, `[a, b]`, `{a, b}`."""
    if target is None:
        return []
    if target.type == "identifier":
        return [target]
    return [child for child in target.named_children if child.type in _PATTERN_NAMES]


def _single(node: Node | None) -> Node | None:
    """The one expression of a Go expression list (`s := …`); the node itself otherwise."""
    if node is not None and node.type == "expression_list":
        return node.named_children[0] if node.named_child_count == 1 else None
    return node


# Go's and Rust's types, written without a wrapper node: the field holding the type named.
_BARE_TYPES = {
    "pointer_type": None,  # Go's `*Session`: its one child
    "reference_type": "type",  # Rust's `&Session`, `&mut Session`
    "generic_type": "type",  # Rust's `Deserializer<R>`
}


def _annotation(node: Node | None) -> str | None:
    """`Session` or `requests.Session` from an annotation (Python's or TypeScript's) or a
    type (Go's `*Session`, `http.Server`; Rust's `Session`, `&Session`, `Deserializer<R>`);
    None for `Optional[…]`, unions and others."""
    if node is None:
        return None
    if node.type in ("type_identifier", "qualified_type", "scoped_type_identifier"):
        written = _text(node).replace("::", ".")
        return written if written.replace(".", "_").isidentifier() else None
    if node.type in _BARE_TYPES:
        field = _BARE_TYPES[node.type]
        inner_type = node.child_by_field_name(field) if field else node.named_children[-1]
        if inner_type is None and node.type == "generic_type":  # Java's, TypeScript's
            inner_type = node.child_by_field_name("name") or node.named_children[0]
        return _annotation(inner_type)
    if node.type not in ("type", "type_annotation") or node.named_child_count != 1:
        return None
    inner = node.named_children[0]
    if inner.type == "nested_type_identifier":  # TypeScript's `net.Session`
        name: str | None = _text(inner)
        return name if name and name.replace(".", "_").isidentifier() else None
    return _name_written(inner)


def _constructed(value: Node) -> str | None:
    """The class `value` makes an instance of, as written: `Session(…)` in Python, `new
    Session(…)` in JS/TS; or the function whose result it is (`make()`, `self.make()`),
    which query time tells apart."""
    if value.type == "unary_expression" and _text(value).startswith("&"):  # Go: `&Session{}`
        operand = value.child_by_field_name("operand")
        return _constructed(operand) if operand is not None else None
    field = _CONSTRUCTIONS.get(value.type)
    if field is None:
        return None
    made = value.child_by_field_name(field)
    if made is not None and made.type in _BARE_TYPES | {"type_identifier": None}:
        return _annotation(made)  # a Go or Rust type: `Session{}`, `Session::<R> { … }`
    return _name_written(made)


def _name_written(node: Node | None) -> str | None:
    """`a.b.c` for a chain of names; None for any expression (`f().g`, `x[0]`)."""
    name = dotted(node)
    return name if name and not name.startswith("?") else None


def _join(prefix: str, rest: str) -> str:
    return f"{prefix}.{rest}" if prefix and rest else prefix or rest


def _require_target(value: Node) -> str | None:
    """The module of `require("m")`, or None for any other value."""
    if value.type != "call_expression":
        return None
    function = value.child_by_field_name("function")
    arguments = value.child_by_field_name("arguments")
    if _text(function) != "require" or arguments is None or arguments.named_child_count != 1:
        return None
    argument = arguments.named_children[0]
    return _text(argument).strip("'\"`") if argument.type == "string" else None


def _js_top_level(declarator: Node) -> bool:
    """Whether a `const`/`let`/`var` declarator is at the top of its module (exported or not),
    not inside a callback or block, which the walker's scopes do not track."""
    declaration = declarator.parent
    holder = declaration.parent if declaration is not None else None
    if holder is not None and holder.type == "export_statement":
        holder = holder.parent
    return holder is not None and holder.type == "program"


def _rust_type_name(node: Node | None) -> str:
    """The type an impl is for, by its own name: `Type` for `Type<W>`, `&'a mut Type<W, F>`,
    `*const Type` and `crate::a::Type`."""
    while node is not None and node.type in ("reference_type", "pointer_type", "generic_type"):
        node = node.child_by_field_name("type")
    if node is not None and node.type == "scoped_type_identifier":
        node = node.child_by_field_name("name")
    return _strip_generics(_text(node))


def _strip_generics(text: str) -> str:
    return text.split("<", 1)[0].lstrip("&*").removeprefix("mut ").strip()


# C declarators wrap the name they declare: `*f(void)`, `(*handler)(int)`, `t[3]`, `x = 0`.
_C_DECLARATORS = frozenset(
    {
        "function_declarator",
        "pointer_declarator",
        "parenthesized_declarator",
        "array_declarator",
        "init_declarator",
        "attributed_declarator",
    }
)
_C_NAMES = frozenset({"identifier", "type_identifier", "field_identifier"})


def _declared(declarator: Node | None) -> tuple[str | None, bool]:
    """The name a C declarator declares, and whether it declares a function (`f(void)`,
    `*f(void)`; not the pointer `(*f)(void)`, whose name is wrapped in parentheses)."""
    wrapper = None
    node = declarator
    while node is not None and node.type in _C_DECLARATORS:
        wrapper = node.type
        if node.type == "parenthesized_declarator":  # its one declarator has no field name
            node = node.named_children[0] if node.named_child_count else None
        else:
            node = node.child_by_field_name("declarator")
    if node is None or node.type not in _C_NAMES:
        return None, False
    return _text(node), wrapper == "function_declarator"


def _last_line(node: Node) -> int:
    """The last line `node` stands on: a `#define` ends with its line's newline."""
    row, column = node.end_point
    return row if column == 0 and row > node.start_point[0] else row + 1


def _storage(node: Node) -> set[str]:
    """A C declaration's storage classes: `static`, `extern`, `inline`."""
    return {_text(child) for child in node.children if child.type == "storage_class_specifier"}


def _go_receiver(node: Node) -> str | None:
    receiver = node.child_by_field_name("receiver")
    for parameter in receiver.named_children if receiver is not None else ():
        name = parameter.child_by_field_name("name")
        if name is not None:
            return _text(name)
    return None


def _go_receiver_type(node: Node) -> str | None:
    receiver = node.child_by_field_name("receiver")
    for parameter in receiver.named_children if receiver is not None else ():
        type_node = parameter.child_by_field_name("type")
        if type_node is not None:  # `*Builder[N]` is Builder's
            return _strip_generics(_text(type_node).lstrip("*").split("[", 1)[0]) or None
    return None


def _bases(node: Node, language: str) -> list[str]:
    """The names a class extends or implements, as written (generics dropped)."""
    found: list[Node] = []
    if language == "python":
        arguments = node.child_by_field_name("superclasses")
        found = [c for c in arguments.named_children] if arguments is not None else []
    elif language in ("javascript", "typescript", "tsx"):
        for child in node.named_children:
            if child.type != "class_heritage":
                continue
            for part in child.named_children:
                if part.type in ("extends_clause", "implements_clause"):
                    found.extend(c for c in part.named_children if c.type != "type_arguments")
                else:
                    found.append(part)
    elif language == "java":
        for field in ("superclass", "interfaces"):
            holder = node.child_by_field_name(field)
            for child in holder.named_children if holder is not None else ():
                found.extend(child.named_children if child.type == "type_list" else [child])
        for child in node.named_children:
            if child.type == "extends_interfaces":
                for type_list in child.named_children:
                    found.extend(type_list.named_children)
    elif language == "go":
        body = node.child_by_field_name("type")
        if body is not None and body.type == "struct_type":
            for fields in body.named_children:
                for declaration in fields.named_children:
                    if (
                        declaration.type == "field_declaration"
                        and declaration.child_by_field_name("name") is None
                    ):
                        found.append(declaration.child_by_field_name("type") or declaration)
    elif language == "rust" and node.type == "trait_item":
        bounds = node.child_by_field_name("bounds")
        found = list(bounds.named_children) if bounds is not None else []
    names = []
    for base in found:
        name = dotted(base) if base.child_count else _text(base)
        name = name or _strip_generics(_text(base)).replace("::", ".")
        if name and name.replace(".", "_").replace("$", "_").isidentifier():
            names.append(name)
    return names


def _java_parameters(node: Node) -> tuple[int | None, bool]:
    """A Java method's or constructor's parameter count, and whether the last is `T...`."""
    parameters = node.child_by_field_name("parameters")
    if parameters is None or node.type not in ("method_declaration", "constructor_declaration"):
        return None, False
    declared = [
        child
        for child in parameters.named_children
        if child.type in ("formal_parameter", "spread_parameter")
    ]
    return len(declared), bool(declared) and declared[-1].type == "spread_parameter"


def _java_arguments(node: Node) -> int | None:
    """How many arguments a Java call or `new` passes (comments inside are not counted)."""
    arguments = node.child_by_field_name("arguments")
    if arguments is None:
        return None
    return sum(1 for child in arguments.named_children if not child.type.endswith("comment"))
