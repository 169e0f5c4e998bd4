from codeqa.tui.cli import run_program

run_program()
