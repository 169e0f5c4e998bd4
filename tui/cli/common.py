"""Arguments and steps shared by several commands."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codeqa.retrieval.discovery.root import RepoRoot, repository_root
from codeqa.tui.settings import TRUST_FLAG, Settings, load_settings

REPO_HELP = "a folder in the repository (default: .); its git root's index is used"


def repository_from_args(path: Path, doing: str, *, limited: bool = False) -> RepoRoot:
    """The repository `path` lies in; one stderr line when its root is a folder above.

    `doing` names the work ("searching"); `limited` says results keep to the subfolder.
    """
    repo = repository_root(path)
    if repo.subpath:
        line = f"codeqa: {doing} {repo.root} (git root of {repo.root / repo.subpath})"
        if limited:
            line += f"; results limited to {repo.subpath}/"
        print(line, file=sys.stderr)
    return repo


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
        },
        trust_repo=bool(getattr(args, "trust_repo_config", False)),
    )
    for warning in settings.warnings:
        print(f"codeqa: warning: {warning}", file=sys.stderr)
    return settings
