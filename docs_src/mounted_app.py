import os

from starlette.applications import Starlette
from starlette.routing import Mount

from acp_agent.http import asgi_app
from docs_src.first_agent import EchoAgent as MyAgent

acp = asgi_app(MyAgent, path="/", token=os.environ.get("ACP_TOKEN", "change-me"))

# HTTP connections live in the ACP app's task group: enter its lifespan from yours.
app = Starlette(routes=[Mount("/acp", acp)], lifespan=acp.lifespan)
# FastAPI: app = FastAPI(lifespan=...) entering `async with acp.lifespan():`, then app.mount("/acp", acp)
