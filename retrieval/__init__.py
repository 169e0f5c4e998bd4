"""codeqa.retrieval: from a repository on disk to ranked, cited code.

Data flows one way:
    discovery/ (which files, read how) → chunking/ (three-tier chunks with true line ranges)
    → embedders/ (vectors, cached by content) → stores/ (hybrid BM25 + vector, RRF)
    → search/ (query analysis, fusion, re-ranking)
indexing.py builds and updates an index; index.py opens one to search and read; records.py
is the vocabulary every room shares; errors.py the one tree of user-facing errors.
"""
