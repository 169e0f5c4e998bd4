"""codeqa.retrieval.embedders.registry."""
