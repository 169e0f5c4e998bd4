"""Arguments and steps shared by several commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codeqa.tui.settings import TRUST_FLAG, Settings, load_settings


def add_index_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--embed-model", help="embedding model: 'default' (offline) or any litellm model"
    )
    parser.add_argument(
        "--index-dir", type=Path, help="where this repo's index lives (default: user cache)"
    )
    parser.add_argument("--store", choices=("lancedb", "weaviate"), help="vector store backend")
    parser.add_argument("--weaviate-url", help="Weaviate server URL (with --store weaviate)")
    parser.add_argument(
        TRUST_FLAG,
        action="store_true",
        help="let the repository's codeqa.toml choose models, store, URLs and index folder",
    )


def add_api_base_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--api-base",
        metavar="URL",
        help="the model's OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (local models)",
    )


def settings_from_args(args: argparse.Namespace, repo: Path | None) -> Settings:
    """The settings for this command; ignored repository settings are named on stderr."""
    settings = load_settings(
        repo,
        {
            "embed_model": getattr(args, "embed_model", None),
            "index_dir": getattr(args, "index_dir", None),
            "store": getattr(args, "store", None),
            "weaviate_url": getattr(args, "weaviate_url", None),
            "model": getattr(args, "model", None),
            "api_base": getattr(args, "api_base", None),
        },
        trust_repo=bool(getattr(args, "trust_repo_config", False)),
    )
    for warning in settings.warnings:
        print(f"codeqa: warning: {warning}", file=sys.stderr)
    return settings
