"""``python -m acp_agent.dev.child FILE_OR_MODULE[:ATTR]``: the older spelling of ``python -m acp_agent stdio``.

The inspector now launches ``python -m acp_agent stdio``; this module only forwards for one release.
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    sys.argv[1:1] = ["stdio"]
    runpy.run_module("acp_agent", run_name="__main__", alter_sys=True)
