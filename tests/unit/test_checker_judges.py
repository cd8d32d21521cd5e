"""The checker's shape: ``WireChecker`` shows only its documented names; the router's tables name judges that exist,
in an order every judge reaches; the six judges import no other judge, and the import-linter contract that says so
bites."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

import acp_agent.testing
from acp_agent.testing import checker
from acp_agent.testing.checker import WireChecker, router
from acp_agent.testing.checker.constants import A2C, C2A
from tests.unit.test_layers import append, copy_package, lint_imports

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(checker.__file__).resolve().parent
JUDGES = ("jsonrpc", "sessions", "turns", "background", "items", "preview")

# The public surface documented in acp_agent.testing's reference (docstrings of WireChecker and the package).
DOCUMENTED = {"feed", "feed_line", "feed_end", "feed_transcript", "finish", "violations", "rules"}


def test_wire_checker_shows_only_its_documented_names() -> None:
    assert {n for n in dir(WireChecker) if not n.startswith("_")} == DOCUMENTED
    wire = WireChecker(raise_on_violation=False)
    assert {n for n in dir(wire) if not n.startswith("_")} == DOCUMENTED
    assert acp_agent.testing.WireChecker is WireChecker


def test_violations_and_rules_read_what_was_found_in_order() -> None:
    wire = WireChecker(raise_on_violation=False)
    wire.feed(A2C, {"id": 1, "method": "x"})  # no "jsonrpc" (R3), before initialize (R22), no "_" (R84)
    wire.feed(C2A, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 2}})
    wire.finish()
    assert [v.rule for v in wire.violations] == ["R3", "R22", "R84", "R8"]
    assert wire.rules == {"R3", "R22", "R84", "R8"}


def test_every_judge_is_a_class_with_private_helpers() -> None:
    hooks = {"on_request", "on_withdrawn", "on_answer", "before_update", "on_update", "at_session_end", "at_end"}
    envelope = {"read_line", "unparsed", "client_batch", "client_message", "agent_batch", "batch_member",
                "agent_envelope", "agent_call", "request_id", "foreign_cancel", "null_answer", "unmatched",
                "answer_goes_on"}  # the steps of the router the JSON-RPC judge serves
    for name in JUDGES:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
        assert len(classes) == 1, name
        public = {f.name for f in classes[0].body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
        assert public <= hooks | (envelope if name == "jsonrpc" else set()), (name, public - hooks)


def test_no_judge_imports_another() -> None:
    for name in JUDGES:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 1}
        assert imported.isdisjoint(JUDGES), (name, imported & set(JUDGES))


def test_the_router_tables_name_judges_and_every_judge_ends() -> None:
    named = {*router.AGENT_REQUEST, *router.WITHDRAWN, *router.BEFORE_UPDATE, *router.AT_SESSION_END}
    named |= {judge for judges in (*router.ON_ANSWER.values(), *router.ON_UPDATE.values()) for judge in judges}
    named |= set(router.AT_END) - {router.EACH_SESSION}
    assert named <= set(JUDGES)
    assert set(router.AT_END) - {router.EACH_SESSION} | set(router.AT_SESSION_END) >= set(JUDGES) - {"background"}
    assert router.AT_END.count(router.EACH_SESSION) == 1


def test_the_independence_contract_names_the_six_judges() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    independent = [c for c in config["contracts"] if c["type"] == "independence"]
    assert [sorted(c["modules"]) for c in independent] == [sorted(f"acp_agent.testing.checker.{j}" for j in JUDGES)]


@pytest.mark.parametrize(("module", "code", "other"), [
    ("turns", "from .items import ItemsJudge  # noqa: F401\n", "items"),
    ("jsonrpc", "def _back() -> None:\n    from . import background  # noqa: F401\n", "background"),
    ("preview", "from .turns import TurnsJudge  # noqa: F401\n", "turns"),
])
def test_a_judge_importing_another_breaks_the_contract(tmp_path: Path, module: str, code: str, other: str) -> None:
    copy = copy_package(tmp_path)
    append(copy / "testing" / "checker" / f"{module}.py", code)
    result = lint_imports(tmp_path / "pyproject.toml", tmp_path)
    assert result.returncode != 0, result.stdout
    report = " ".join(result.stdout.split())
    assert "The checker's judges do not import one another" in report and "BROKEN" in report, report
    assert f"acp_agent.testing.checker.{module} -> acp_agent.testing.checker.{other}" in report, report
