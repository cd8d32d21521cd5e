import os

from acp_agent.http import asgi_app
from docs_src.first_agent import EchoAgent as MyAgent

app = asgi_app(MyAgent, token=os.environ.get("ACP_TOKEN", "change-me"))
