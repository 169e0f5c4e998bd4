"""Import lancedb without the REST client it loads but an embedded store never calls.

`import lancedb` imports `lance_namespace`, whose model classes it uses, and that imports
the package `lance_namespace_urllib3_client`, whose `__init__` also builds a REST client:
366 methods wrapped in pydantic's `validate_call`, 1.1-1.5 s of the 2.4-2.8 s import on
2 cores. That package is registered here without running its `__init__`: submodules
(`.models`, which lancedb needs) import as usual, and the first access to a name only
`__init__` defines (`ApiClient`, `BranchApi`, ...) runs it then, so nothing is lost.

It still pays with lancedb 0.40.0 and lance-namespace-urllib3-client 0.13.0: `import
lancedb` costs 0.75-0.78 s of CPU with it and 1.45-1.53 s without (3 runs each; CPU time,
which a busy machine does not inflate as it does wall time). It is applied only to the
lancedb release it was measured with (PINNED_LANCEDB, as pyproject.toml pins it): another
release may import differently, and then lancedb is imported as it is.

On Python 3.11 lancedb also takes its `@override` from the `overrides` package, whose
decorator checks each method against its base classes by disassembling the caller's
bytecode: 105 methods, 0.12-0.15 s of the import's CPU (0.72-0.76 s with the check,
0.59-0.65 s without, 3 runs each). On Python 3.12+ lancedb uses `typing.override`, which
only marks the method. While lancedb is imported, it gets that marking decorator on 3.11
too; the `overrides` package is given back its own afterwards.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any, TypeVar

T = TypeVar("T")

REST_CLIENT_PACKAGE = "lance_namespace_urllib3_client"
PINNED_LANCEDB = "0.40.0"


def import_lancedb() -> ModuleType:
    """`import lancedb`, deferring its unused REST client until something touches it."""
    if "lancedb" in sys.modules or importlib.metadata.version("lancedb") != PINNED_LANCEDB:
        import lancedb

        return lancedb
    if REST_CLIENT_PACKAGE not in sys.modules:
        _register_without_init(REST_CLIENT_PACKAGE)
    with _override_only_marks():
        import lancedb
    return lancedb


@contextlib.contextmanager
def _override_only_marks() -> Iterator[None]:
    """`overrides.override` as `typing.override` on Python 3.12+: mark, do not check."""
    if sys.version_info >= (3, 12) or importlib.util.find_spec("overrides") is None:
        yield
        return
    import overrides

    checked = overrides.override
    overrides.override = _mark_override  # type: ignore[assignment]
    try:
        yield
    finally:
        overrides.override = checked


def _mark_override(method: T) -> T:
    with contextlib.suppress(AttributeError, TypeError):  # a read-only or slotted object
        method.__override__ = True  # type: ignore[attr-defined]
    return method


def _register_without_init(name: str) -> None:
    """Put package `name` in sys.modules with its `__init__` run on first attribute access."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return  # not installed as a regular package: import it the usual way
    loader = spec.loader
    package = importlib.util.module_from_spec(spec)

    def __getattr__(attribute: str) -> Any:  # the PEP 562 module hook
        del package.__dict__["__getattr__"]  # runs once; names __init__ lacks stay missing
        loader.exec_module(package)
        return getattr(package, attribute)

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = package
