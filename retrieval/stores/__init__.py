"""codeqa.retrieval.stores."""
