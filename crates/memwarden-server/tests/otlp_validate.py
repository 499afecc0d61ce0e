"""Validate OTLP/HTTP JSON trace exports against the real OTLP protobuf schema.

Usage: python3 otlp_validate.py FILE...  (each file: one ExportTraceServiceRequest body as
received by the test collector). The OTLP JSON mapping writes trace and span ids as hex, where the
generic protobuf JSON mapping expects base64: ids are checked (lower-case hex of 16 / 8 bytes) and
converted, then the body is parsed strictly (unknown fields refused) with
`google.protobuf.json_format.Parse` into `ExportTraceServiceRequest`. Prints one JSON line:
{"requests": N, "spans": M, "service_names": [...]}; exits non-zero on the first invalid body.
"""
import base64
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

HEX = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


def hex_ids_to_base64(span):
    for field, n in HEX.items():
        if field not in span:
            continue
        v = span[field]
        if not re.fullmatch(r"[0-9a-f]{%d}" % n, v) or set(v) == {"0"}:
            raise ValueError(f"{field} {v!r} is not {n} lower-case hex digits (non-zero)")
        span[field] = base64.b64encode(bytes.fromhex(v)).decode()


def main(paths):
    requests = spans = 0
    services = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            body = json.load(f)
        for rs in body.get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    hex_ids_to_base64(span)
        msg = ExportTraceServiceRequest()
        json_format.Parse(json.dumps(body), msg, ignore_unknown_fields=False)
        requests += 1
        for rs in msg.resource_spans:
            for a in rs.resource.attributes:
                if a.key == "service.name":
                    services.add(a.value.string_value)
            for ss in rs.scope_spans:
                for span in ss.spans:
                    assert len(span.trace_id) == 16 and len(span.span_id) == 8, span
                    assert not span.parent_span_id or len(span.parent_span_id) == 8, span
                    assert span.end_time_unix_nano >= span.start_time_unix_nano > 0, span
                    spans += 1
    print(json.dumps({"requests": requests, "spans": spans, "service_names": sorted(services)}))


if __name__ == "__main__":
    main(sys.argv[1:])
