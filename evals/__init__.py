"""codeqa.evals."""
