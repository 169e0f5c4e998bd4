"""Which files of a repository codeqa reads, and how: git's ignore rules, secrets, decoding.

walk.py walks the repository and reads one file under the same rules (`read_repo_file`,
the read check every later reader goes through); ignore.py matches git's ignore patterns;
secrets.py finds credentials by content.
"""
