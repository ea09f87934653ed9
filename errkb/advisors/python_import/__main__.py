"""``python -m errkb.advisors.python_import [RECORDS]``: write the family's records (default ``records``)."""

import sys
from pathlib import Path

from errkb.advisors.python_import._family import write

for written in write(Path(sys.argv[1] if len(sys.argv) > 1 else "records")):
    print(written)
