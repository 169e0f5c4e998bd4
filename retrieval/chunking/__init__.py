"""codeqa.retrieval.chunking."""
