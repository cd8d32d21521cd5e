"""A tiny OTLP/HTTP receiver on loopback for the telemetry tests: it decodes what an agent exports.

``with otlp_receiver() as receiver``: point ``OTEL_EXPORTER_OTLP_ENDPOINT`` at ``receiver.url``; the spans
(name, ids, attributes, links) and metric names it received are in ``receiver.spans`` / ``receiver.metrics``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    """One exported span, decoded."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    attributes: dict[str, Any]
    links: list[str]
    start: int
    error: bool


@dataclass
class Receiver:
    """What the receiver got so far."""

    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: set[str] = field(default_factory=set)
    resource: dict[str, Any] = field(default_factory=dict)

    def wait_for(self, predicate: Any, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError(f"the receiver did not get it in time: {[s.name for s in self.spans]}, "
                                     f"{sorted(self.metrics)}")
            time.sleep(0.05)

    def tree(self) -> str:
        """The spans as an indented tree (links shown as ``-> linked``), children in start order."""
        by_id = {s.span_id: s for s in self.spans}
        children: dict[str, list[ReceivedSpan]] = {}
        for span in self.spans:
            children.setdefault(span.parent_id if span.parent_id in by_id else "", []).append(span)
        lines: list[str] = []

        def walk(parent: str, depth: int) -> None:
            for span in sorted(children.get(parent, []), key=lambda s: s.start):
                linked = [by_id[link].name for link in span.links if link in by_id]
                note = f"  (linked to {', '.join(linked)})" if linked else ""
                lines.append("  " * depth + span.name + note)
                walk(span.span_id, depth + 1)

        walk("", 0)
        return "\n".join(lines)


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind is not None else None


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    """Serve OTLP/HTTP (protobuf) on a free loopback port in a thread for the block."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.path.endswith("/v1/traces"):
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource_spans in request.resource_spans:
                    receiver.resource.update({a.key: _value(a.value) for a in resource_spans.resource.attributes})
                    for scope in resource_spans.scope_spans:
                        for span in scope.spans:
                            receiver.spans.append(ReceivedSpan(
                                span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(),
                                span.kind, {a.key: _value(a.value) for a in span.attributes},
                                [link.span_id.hex() for link in span.links], span.start_time_unix_nano,
                                span.status.code == 2))
            elif self.path.endswith("/v1/metrics"):
                metrics = ExportMetricsServiceRequest()
                metrics.ParseFromString(body)
                for resource_metrics in metrics.resource_metrics:
                    for scope in resource_metrics.scope_metrics:
                        receiver.metrics.update(metric.name for metric in scope.metrics)
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
