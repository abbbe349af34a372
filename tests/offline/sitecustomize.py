"""Started by Python itself when this folder is on PYTHONPATH: block the network from the start.

`make test` and `make course` put this folder on PYTHONPATH, so the notebook kernels (and any
Python they start) run with :mod:`network_guard` installed before the first cell, and
without the imports :mod:`lighter_imports` leaves out.
"""

import lighter_imports
import network_guard

network_guard.install()
lighter_imports.install()
