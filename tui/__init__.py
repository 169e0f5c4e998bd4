"""codeqa.tui."""
