"""An OTLP trace receiver for the tests: decodes what acs-proxy exports with
the official opentelemetry-proto definitions and writes every span as one
JSON line, for the Rust tests to read.

  otlp_receiver.py --out FILE [--grpc]

Serves OTLP/HTTP (POST /v1/traces, protobuf body) on an ephemeral port of
127.0.0.1, and with --grpc the OTLP gRPC TraceService too; prints
"http=<port> grpc=<port|0>" on stdout once listening. Runs until stdin closes.

Each line: {"transport", "service_name", "scope", "trace_id", "span_id",
"parent_span_id", "name", "kind", "attributes": {k: v}, "events":
[{"name", "attributes"}], "status": {"code", "message"}, "links"} with ids
in lowercase hex ("" when absent) and kind/status as the proto enum numbers.
"""

import argparse
import json
import sys
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2

LOCK = threading.Lock()


def any_value(value: common_pb2.AnyValue):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(pairs):
    return {pair.key: any_value(pair.value) for pair in pairs}


def spans_of(request: trace_service_pb2.ExportTraceServiceRequest, transport: str):
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "transport": transport,
                    "service_name": resource.get("service.name"),
                    "scope": scope_spans.scope.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": span.kind,
                    "attributes": attributes(span.attributes),
                    "events": [
                        {"name": event.name, "attributes": attributes(event.attributes)}
                        for event in span.events
                    ],
                    "status": {"code": span.status.code, "message": span.status.message},
                    "links": [
                        {"trace_id": link.trace_id.hex(), "span_id": link.span_id.hex()}
                        for link in span.links
                    ],
                }


class Sink:
    def __init__(self, path: str):
        self.path = path

    def write(self, request, transport: str):
        lines = [json.dumps(span) + "\n" for span in spans_of(request, transport)]
        with LOCK, open(self.path, "a", encoding="utf-8") as out:
            out.writelines(lines)
            out.flush()


def http_handler(sink: Sink):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            if self.path != "/v1/traces":
                self.send_error(404)
                return
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            request = trace_service_pb2.ExportTraceServiceRequest()
            try:
                request.ParseFromString(body)
            except Exception as err:  # a body that is not the protobuf
                self.send_error(400, str(err))
                return
            sink.write(request, "http/protobuf")
            reply = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args):
            pass

    return Handler


def serve_grpc(sink: Sink):
    """The started gRPC server (keep a reference: it stops when collected)."""
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    class TraceService(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):  # noqa: N802 (the proto's naming)
            sink.write(request, "grpc")
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceService(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--grpc", action="store_true")
    args = parser.parse_args()
    sink = Sink(args.out)
    open(args.out, "a", encoding="utf-8").close()
    http = ThreadingHTTPServer(("127.0.0.1", 0), http_handler(sink))
    threading.Thread(target=http.serve_forever, daemon=True).start()
    grpc_server, grpc_port = serve_grpc(sink) if args.grpc else (None, 0)
    print(f"http={http.server_address[1]} grpc={grpc_port}", flush=True)
    sys.stdin.read()
    if grpc_server is not None:
        grpc_server.stop(None)


if __name__ == "__main__":
    main()
