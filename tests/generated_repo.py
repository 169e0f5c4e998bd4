"""A generated Python repository of many small, distinct functions, for tests that need a
write big enough to be cut in the middle (index faults, cluster faults, shared stores)."""

from __future__ import annotations

from pathlib import Path

WORDS = "alpha beta gamma delta parser token cache stream socket buffer render layout widget"


def write_generated_repo(root: Path, files: int, functions: int, packages: int) -> Path:
    """`files` modules of `functions` functions each, spread over `packages` folders."""
    words = WORDS.split()
    for f in range(files):
        body = []
        for g in range(functions):
            first, second = words[(f + g) % len(words)], words[(f * 7 + g * 3) % len(words)]
            body.append(
                f"def {first}_{second}_{f}_{g}(value):\n"
                f'    """Handle the {first} {second} case number {g} of module {f}."""\n'
                f"    result = value * {g} + {f}\n"
                f"    for item in range({g}):\n"
                f"        result += item\n"
                f"    return result\n\n\n"
            )
        path = root / f"pkg{f % packages}" / f"mod_{f}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(body))
    return root
