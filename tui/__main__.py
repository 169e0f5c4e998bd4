import sys

from codeqa.tui.cli import main

sys.exit(main())
