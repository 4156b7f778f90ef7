"""``python -m kiln.doctor``: the checks live in kiln.utils.doctor (Note [Doctor checks])."""

import sys

from kiln.utils.doctor import main

if __name__ == "__main__":
    sys.exit(main())
