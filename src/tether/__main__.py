"""``python -m tether``: the ``tether`` command (see :mod:`tether.cli`)."""

from tether.cli import main

if __name__ == "__main__":
    main()
