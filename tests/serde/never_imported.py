"""Must never be imported by a refused payload: importing it leaves a trace."""

import os

TRACE = os.environ.get("TETHER_TEST_IMPORT_TRACE")
if TRACE:
    with open(TRACE, "w") as fh:
        fh.write("imported")


class Gadget:
    def __init__(self, value: object) -> None:
        self.value = value
