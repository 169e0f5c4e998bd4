"""codeqa.retrieval."""
