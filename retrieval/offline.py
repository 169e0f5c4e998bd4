"""Keep third-party libraries from reaching for the network at import or first use."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path


def prepare_offline_environment() -> None:
    """Point tiktoken at the BPE files litellm ships and stop litellm's cost-map fetch.

    Must run before the first `import litellm` / `tiktoken.get_encoding`; only
    fills in variables the user has not set, so a user's own choice wins.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    if "TIKTOKEN_CACHE_DIR" not in os.environ:
        spec = importlib.util.find_spec("litellm")
        if spec is not None and spec.origin is not None:
            tokenizers = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
            if tokenizers.is_dir():
                os.environ["TIKTOKEN_CACHE_DIR"] = str(tokenizers)
