"""The raw orjson agent after importing the libraries acp-agent requires: the floor of start-up and memory.

acp-agent must use anyio, pydantic v2 and jsonrpcserver (which imports jsonschema). This agent imports
them (and defines one pydantic model, so pydantic's model machinery is loaded) and then serves the
workload exactly as ``raw_orjson_agent.py`` does. Its start-up and peak RSS are what any agent built on
those dependencies pays before its own code runs; acp-agent's distance to it is its own cost.
"""

import anyio  # noqa: F401
import jsonrpcserver  # noqa: F401
import pydantic
from raw_orjson_agent import main  # bench/agents is the script's directory, so it is on sys.path


class _Loaded(pydantic.BaseModel):
    value: int = 0


if __name__ == "__main__":
    main()
