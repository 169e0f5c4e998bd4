"""codeqa.tui.chat."""
