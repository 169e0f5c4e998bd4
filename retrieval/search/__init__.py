"""codeqa.retrieval.search."""
