import difflib
from pathlib import Path

from acp_agent import Agent, ContentBlock, Session, StopReason
from acp_agent.schema import Diff, DiffPatch, DiffPathChange, ToolCallLocation


def git_patch(path: Path, old: str, new: str) -> str:
    """A unified diff of one file, with absolute paths and no a/ b/ prefixes (what v2's DiffPatch expects)."""
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=str(path), tofile=str(path))
    return f"diff --git {path} {path}\n" + "".join(lines)


class EditingAgent(Agent):
    name = "editing-agent"

    async def prompt(self, session: Session, prompt: list[ContentBlock]) -> StopReason:
        path = Path(session.cwd) / "greeting.txt"
        old = path.read_text() if path.exists() else ""
        new = old.replace("Hello", "Hello, world")
        tool = await session.start_tool_call(f"Edit {path.name}", kind="edit", status="in_progress",
                                             locations=[ToolCallLocation(path=str(path))])
        path.write_text(new)
        await tool.append(Diff(
            changes=[DiffPathChange(operation="modify", path=str(path), file_type="text")],  # authoritative
            patch=DiffPatch(format="git_patch", text=git_patch(path, old, new)),  # optional, for display
        ))
        await tool.complete()
        await session.say(f"Edited {path.name}.")
        return "end_turn"
