"""``acp_agent.testing`` as a package: its public names, cheap imports, and its packaged schemas."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import acp_agent.testing

PUBLIC_NAMES = [
    "RULES",
    "SHOULD_RULES",
    "Client",
    "PermissionPolicy",
    "RuleViolation",
    "SchemaValidator",
    "SessionView",
    "TranscriptEntry",
    "WireChecker",
    "allow_first",
    "byte_pipe",
    "check_transcript",
    "connect_agent",
    "default_schema_path",
    "spawn_agent",
]


def run_python(code: str) -> str:
    """Run ``code`` in a fresh interpreter (same environment) and return its stdout."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}\n--- stderr ---\n{proc.stderr}"
    return proc.stdout


def test_public_names_are_pinned() -> None:
    assert acp_agent.testing.__all__ == PUBLIC_NAMES
    for name in PUBLIC_NAMES:
        value = getattr(acp_agent.testing, name)
        if callable(value) and name != "PermissionPolicy":  # a type alias carries no docstring of its own
            assert (value.__doc__ or "").strip(), f"acp_agent.testing.{name} has no docstring"
    assert (acp_agent.testing.__doc__ or "").strip()


def test_star_import_gives_the_test_author_everything() -> None:
    namespace: dict[str, object] = {}
    exec("from acp_agent.testing import *", namespace)
    assert set(PUBLIC_NAMES) <= set(namespace)


def test_the_runtime_never_imports_the_testing_package() -> None:
    out = run_python(
        """
        import importlib, pkgutil, sys
        import acp_agent

        def import_all(package):
            for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
                # demo.py is a command (``python -m acp_agent.demo``) built on the testing client.
                if info.name in ("acp_agent.testing", "acp_agent.demo"):
                    continue
                module = importlib.import_module(info.name)
                if info.ispkg:
                    import_all(module)

        import_all(acp_agent)
        loaded = sorted(m for m in sys.modules if m == "acp_agent.testing" or m.startswith("acp_agent.testing."))
        print(loaded)
        """
    )
    assert out.strip() == "[]"


def test_importing_the_testing_package_is_cheap() -> None:
    # jsonrpcserver (a runtime dependency) already imports jsonschema; forget it, then refuse any new import of
    # jsonschema, pytest or hypothesis while acp_agent.testing loads.
    out = run_python(
        """
        import sys
        import acp_agent

        HEAVY = ("jsonschema", "pytest", "_pytest", "hypothesis")
        for name in [m for m in sys.modules if m.split(".")[0] in HEAVY]:
            del sys.modules[name]
        attempts = []

        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in HEAVY:
                    attempts.append(name)
                    raise ImportError(f"{name} must not be imported by acp_agent.testing")
                return None

        sys.meta_path.insert(0, Refuse())
        from acp_agent.testing import Client, SchemaValidator, WireChecker, connect_agent, spawn_agent
        assert attempts == [], attempts
        sys.meta_path.pop(0)
        SchemaValidator()  # the first validator imports jsonschema
        print("jsonschema" in sys.modules)
        """
    )
    assert out.strip() == "True"
