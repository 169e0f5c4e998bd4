"""codeqa.agent."""
