#!/usr/bin/env python3
"""A real MCP client, built on the Python `mcp` SDK, for acs-proxy's integration tests.

It spawns a stdio MCP server (anything after `--`), passing it the full
environment (the SDK alone passes only a small whitelist), runs a scenario,
and prints ONE JSON object on stdout. Exit 0 whenever the scenario ran, even
if calls were denied or failed; non-zero only if the client itself crashed
(2) or the arguments were bad (argparse's 2 as well).

    python mcp_client.py --scenario full [--elicitation accept|decline|none] \
        [--call NAME JSON_ARGS]... -- <command> <args...>
    python mcp_client.py --url http://127.0.0.1:PORT/mcp [--header NAME VALUE]... \
        --scenario full ...

With --url the client connects to a Streamable HTTP endpoint instead of
spawning a server (no `--` command then); --header adds an HTTP header to
every request (for example Authorization). At exit the session is ended
with DELETE.

Scenarios:
  full   initialize, tools/list, a tool call with progress, a tool call that
         makes the server send sampling/createMessage (answered with a fixed
         text), resources/list + resources/read, prompts/list + prompts/get,
         a cancelled slow call, an elicitation call (when --elicitation is not
         `none` and the server has one), then the --call calls.
  calls  initialize, tools/list, then the --call calls only.

Options for servers behind one endpoint (acs-proxy's virtual servers):
  --list-all      follow nextCursor through every page of tools/list,
                  prompts/list and resources/list (step `all_lists`: pages
                  and names per list); later steps pick tools from all pages.
  --subscribe URI resources/subscribe to URI after the scenario (step
                  `subscribe`).
  --await-notification METHOD
                  after the calls, wait up to --await-seconds for a
                  notification with METHOD (step `awaited`).
  --call __wait__ '{"file": PATH}'
                  a pause between calls: creates PATH.ready, then waits until
                  PATH exists (the test does something meanwhile).

With --elicitation accept, each elicitation/create is answered `accept` with
a fixed form (name, check, email, integer; only the keys the requested schema
names) and every other boolean the schema asks for set to true, so a yes/no
approval request (acs-proxy's ASK) is approved; `decline` declines them.

Tool choice is automatic for server-everything (trigger-long-running-operation,
trigger-sampling-request, trigger-elicitation-request) and for the acs-proxy
demo server (slow, sample); override with --progress-tool/--sampling-tool/
--slow-tool and their --*-args.

Output keys: scenario, command, protocol_version, server_info, steps
({name: record}), calls ([record]), progress_notifications,
sampling_requests, elicitation_requests, notifications, sent, received.
A record has `request` plus exactly one of `result` (the raw JSON result),
`error` ({code, message, data} as received) or `exception` ({type,
message}: a local failure such as a result the SDK rejected); a skipped step
is {"skipped": reason}. Two error codes can also be produced locally by the
SDK: -32001 "Request '<method>' timed out" (--timeout) and -32000
"Connection closed". `aborted` appears when --total-timeout cut the run short.
The `cancel` step adds request_id, cancelled, cancel_notification (the
notifications/cancelled the SDK sent), response_after_cancel (should be null)
and ping_after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import traceback
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import TypeAdapter

# send_request() validates the result against the negotiated revision's
# schema, then hands it back untouched as a plain dict.
RAW: TypeAdapter[dict[str, Any]] = TypeAdapter(dict[str, Any])

DEFAULT_SAMPLING_TEXT = "sampled reply from mcp_client.py"
CLIENT_INFO = types.Implementation(name="acs-proxy-test-client", version="1.0.0")

# (tool name, default arguments), first match in tools/list wins.
PROGRESS_TOOLS = [
    ("trigger-long-running-operation", {"duration": 1, "steps": 3}),
    ("slow", {"ms": 300, "steps": 3}),
]
SAMPLING_TOOLS = [
    ("trigger-sampling-request", {"prompt": "Say hello", "maxTokens": 20}),
    ("sample", {"prompt": "Say hello"}),
]
SLOW_TOOLS = [
    ("trigger-long-running-operation", {"duration": 10, "steps": 10}),
    ("slow", {"ms": 10000, "steps": 10}),
]
ELICITATION_TOOLS = [("trigger-elicitation-request", {})]

ELICITATION_ACCEPT_CONTENT = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 42}


class Transcript:
    """Every JSON-RPC message sent and received, as JSON dicts, in order."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    def response_to(self, request_id: Any) -> dict[str, Any] | None:
        """The received response (result or error) to one of our requests."""
        for message in self.received:
            if "method" not in message and message.get("id") == request_id:
                return message
        return None

    def sent_request_ids(self, method: str, name: str | None = None) -> list[Any]:
        """Ids of the requests we sent with this method (and params.name)."""
        return [
            m["id"]
            for m in self.sent
            if m.get("method") == method and "id" in m and (name is None or (m.get("params") or {}).get("name") == name)
        ]

    def received_method(self, method: str) -> list[dict[str, Any]]:
        """The received messages with this method."""
        return [m for m in self.received if m.get("method") == method]


def _dump(item: SessionMessage | Exception) -> dict[str, Any]:
    if isinstance(item, Exception):
        return {"transport_error": f"{type(item).__name__}: {item}"}
    return item.message.model_dump(mode="json", by_alias=True, exclude_unset=True)


async def _pump(
    source: MemoryObjectReceiveStream[Any],
    sink: MemoryObjectSendStream[Any],
    log: list[dict[str, Any]],
) -> None:
    """Forward messages from one stream to another, logging each one."""
    async with sink:
        try:
            async for item in source:
                log.append(_dump(item))
                await sink.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass


def _error(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, MCPError):
        return {"error": {"code": exc.code, "message": exc.message, "data": exc.data}}
    return {"exception": {"type": type(exc).__name__, "message": str(exc)}}


class Runner:
    """Runs the scenario steps against one connected session."""

    def __init__(self, session: ClientSession, transcript: Transcript, args: argparse.Namespace) -> None:
        self.session = session
        self.transcript = transcript
        self.args = args
        self.steps: dict[str, Any] = {}
        self.calls: list[dict[str, Any]] = []
        self.tool_names: list[str] = []

    async def request(self, request: Any, progress: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Send one typed request; return {request, result|error|exception}."""
        record: dict[str, Any] = {"request": request.model_dump(by_alias=True, mode="json", exclude_none=True)}

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            assert progress is not None
            progress.append({"progress": value, "total": total, "message": message})

        try:
            record["result"] = await self.session.send_request(
                request,
                RAW,
                request_read_timeout_seconds=self.args.timeout,
                progress_callback=on_progress if progress is not None else None,
            )
        except Exception as exc:  # recorded, not fatal: a denial is an expected outcome
            record.update(_error(exc))
        return record

    async def call_tool(self, name: str, arguments: dict[str, Any], with_progress: bool = False) -> dict[str, Any]:
        progress: list[dict[str, Any]] | None = [] if with_progress else None
        request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
        record = await self.request(request, progress)
        if progress is not None:
            record["progress"] = progress
        return record

    def pick_tool(self, override: str | None, override_args: str | None, candidates: list[tuple[str, dict[str, Any]]]) -> tuple[str, dict[str, Any]] | None:
        if override:
            return override, json.loads(override_args) if override_args else {}
        for name, default_args in candidates:
            if name in self.tool_names:
                return name, json.loads(override_args) if override_args else default_args
        return None

    # -- steps ---------------------------------------------------------------

    async def initialize(self) -> bool:
        try:
            await self.session.initialize()
        except Exception as exc:
            self.steps["initialize"] = _error(exc)
            return False
        ids = self.transcript.sent_request_ids("initialize")
        response = self.transcript.response_to(ids[0]) if ids else None
        sent = next(m for m in self.transcript.sent if m.get("method") == "initialize")
        self.steps["initialize"] = {
            "request": {"method": "initialize", "params": sent.get("params")},
            "result": (response or {}).get("result"),
        }
        return True

    async def list_tools(self) -> None:
        record = await self.request(types.ListToolsRequest())
        self.steps["tools_list"] = record
        tools = (record.get("result") or {}).get("tools") or []
        self.tool_names = [t.get("name") for t in tools if isinstance(t, dict)]

    async def list_all(self) -> None:
        """Every page of the three lists, following nextCursor."""
        lists: dict[str, Any] = {}
        for key, request_type, item_key, field in (
            ("tools", types.ListToolsRequest, "tools", "name"),
            ("prompts", types.ListPromptsRequest, "prompts", "name"),
            ("resources", types.ListResourcesRequest, "resources", "uri"),
        ):
            cursor: str | None = None
            pages, names, errors = 0, [], []
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                record = await self.request(request_type(params=params))
                pages += 1
                result = record.get("result")
                if result is None:
                    errors.append(record)
                    break
                names.extend(item.get(field) for item in result.get(item_key) or [])
                cursor = result.get("nextCursor")
                if not cursor or pages > 50:
                    break
            lists[key] = {"pages": pages, "names": names, "errors": errors}
        self.steps["all_lists"] = lists
        self.tool_names = [n for n in lists["tools"]["names"] if isinstance(n, str)]

    async def subscribe_step(self, uri: str) -> None:
        request = types.SubscribeRequest(params=types.SubscribeRequestParams(uri=uri))
        self.steps["subscribe"] = await self.request(request)

    async def await_notification(self, method: str) -> None:
        with anyio.move_on_after(self.args.await_seconds):
            while not self.transcript.received_method(method):
                await anyio.sleep(0.1)
        found = self.transcript.received_method(method)
        self.steps["awaited"] = {"method": method, "notification": found[0] if found else None}

    async def wait_for_file(self, path: str) -> None:
        """Signals PATH.ready, then waits (up to 60 s) until the test creates PATH."""
        with open(path + ".ready", "w") as ready:
            ready.write("ready\n")
        with anyio.move_on_after(60):
            while not os.path.exists(path):
                await anyio.sleep(0.05)

    async def tool_step(self, step: str, choice: tuple[str, dict[str, Any]] | None, with_progress: bool = False) -> None:
        if choice is None:
            self.steps[step] = {"skipped": "no suitable tool in tools/list"}
            return
        self.steps[step] = await self.call_tool(*choice, with_progress=with_progress)

    async def resource_steps(self) -> None:
        listing = await self.request(types.ListResourcesRequest())
        self.steps["resources_list"] = listing
        uri = self.args.resource
        if uri is None:
            resources = (listing.get("result") or {}).get("resources") or []
            uri = resources[0].get("uri") if resources else None
        if uri is None:
            self.steps["resource_read"] = {"skipped": "no resource to read"}
            return
        request = types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=uri))
        self.steps["resource_read"] = await self.request(request)

    async def prompt_steps(self) -> None:
        listing = await self.request(types.ListPromptsRequest())
        self.steps["prompts_list"] = listing
        name, arguments = self.args.prompt, json.loads(self.args.prompt_args) if self.args.prompt_args else None
        if name is None:
            prompts = (listing.get("result") or {}).get("prompts") or []
            # Prefer a prompt without required arguments; else fill them in.
            prompts = sorted(prompts, key=lambda p: any(a.get("required") for a in p.get("arguments") or []))
            if prompts:
                name = prompts[0].get("name")
                if arguments is None:
                    required = [a["name"] for a in prompts[0].get("arguments") or [] if a.get("required")]
                    arguments = {a: "Ada" for a in required} or None
        if name is None:
            self.steps["prompt_get"] = {"skipped": "no prompt to get"}
            return
        request = types.GetPromptRequest(params=types.GetPromptRequestParams(name=name, arguments=arguments))
        self.steps["prompt_get"] = await self.request(request)

    async def cancel_step(self) -> None:
        """Start a slow call, cancel it after its first progress (or a delay), check no answer comes."""
        choice = self.pick_tool(self.args.slow_tool, self.args.slow_args, SLOW_TOOLS)
        if choice is None:
            self.steps["cancel"] = {"skipped": "no slow tool in tools/list"}
            return
        name, arguments = choice
        first_progress = anyio.Event()
        progress: list[dict[str, Any]] = []
        outcome: dict[str, Any] = {}

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append({"progress": value, "total": total, "message": message})
            first_progress.set()

        async def slow_call(scope: anyio.CancelScope) -> None:
            with scope:
                request = types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments))
                try:
                    outcome["result"] = await self.session.send_request(request, RAW, progress_callback=on_progress)
                except Exception as exc:
                    outcome.update(_error(exc))

        scope = anyio.CancelScope()
        before = set(map(json.dumps, self.transcript.sent_request_ids("tools/call", name)))
        async with anyio.create_task_group() as tg:
            tg.start_soon(slow_call, scope)
            with anyio.move_on_after(self.args.cancel_after):
                await first_progress.wait()
            # The SDK sends notifications/cancelled {requestId, reason} when the caller cancels.
            scope.cancel()
        ids = [i for i in self.transcript.sent_request_ids("tools/call", name) if json.dumps(i) not in before]
        request_id = ids[0] if ids else None
        ping = await self.request(types.PingRequest())
        await anyio.sleep(self.args.cancel_grace)
        cancels = [
            m for m in self.transcript.sent
            if m.get("method") == "notifications/cancelled" and (m.get("params") or {}).get("requestId") == request_id
        ]
        self.steps["cancel"] = {
            "request": {"method": "tools/call", "params": {"name": name, "arguments": arguments}},
            "request_id": request_id,
            "cancelled": scope.cancel_called and not outcome,
            "outcome_before_cancel": outcome or None,
            "progress": progress,
            "cancel_notification": cancels[0] if cancels else None,
            "response_after_cancel": self.transcript.response_to(request_id) if request_id is not None else None,
            "ping_after": ping,
        }

    async def extra_calls(self) -> None:
        for name, raw_args in self.args.call or []:
            arguments = json.loads(raw_args)
            if name == "__wait__":
                await self.wait_for_file(arguments["file"])
                continue
            record = await self.call_tool(name, arguments)
            self.calls.append({"name": name, "arguments": arguments, **record})

    async def run(self) -> None:
        if not await self.initialize():
            return
        await self.list_tools()
        if self.args.list_all:
            await self.list_all()
        if self.args.scenario == "full":
            a = self.args
            await self.tool_step("progress", self.pick_tool(a.progress_tool, a.progress_args, PROGRESS_TOOLS), True)
            await self.tool_step("sampling", self.pick_tool(a.sampling_tool, a.sampling_args, SAMPLING_TOOLS))
            await self.resource_steps()
            await self.prompt_steps()
            await self.cancel_step()
            if a.elicitation != "none":
                await self.tool_step("elicitation", self.pick_tool(None, None, ELICITATION_TOOLS))
        if self.args.subscribe:
            await self.subscribe_step(self.args.subscribe)
        await self.extra_calls()
        if self.args.await_notification:
            await self.await_notification(self.args.await_notification)


def _accept_content(params: Any) -> dict[str, Any]:
    """The content of an `accept` answer: ELICITATION_ACCEPT_CONTENT, limited to the
    requested schema's properties when it names any, and every other boolean
    property of the schema answered True (so a yes/no approval such as acs-proxy's
    `{"approve": boolean}` is approved)."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return dict(ELICITATION_ACCEPT_CONTENT)
    content: dict[str, Any] = {k: v for k, v in ELICITATION_ACCEPT_CONTENT.items() if k in properties}
    for key, spec in properties.items():
        if key not in content and isinstance(spec, dict) and spec.get("type") == "boolean":
            content[key] = True
    return content


def _callbacks(args: argparse.Namespace) -> dict[str, Any]:
    async def sampling(context: ClientRequestContext, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=args.sampling_text),
            model="acs-proxy-test-model",
            stop_reason="endTurn",
        )

    async def elicitation(context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        if args.elicitation == "accept":
            return types.ElicitResult(action="accept", content=_accept_content(params))
        return types.ElicitResult(action="decline")

    callbacks: dict[str, Any] = {"sampling_callback": sampling}
    if args.elicitation != "none":
        callbacks["elicitation_callback"] = elicitation
    return callbacks


@contextlib.asynccontextmanager
async def _connect(args: argparse.Namespace, command: list[str]) -> AsyncIterator[tuple[Any, Any]]:
    """The transport's two streams: a spawned stdio server, or a Streamable HTTP endpoint."""
    if args.url:
        headers = {name: value for name, value in args.header or []}
        async with create_mcp_http_client(headers=headers) as client:
            async with streamable_http_client(args.url, http_client=client) as streams:
                yield streams[0], streams[1]
        return
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    async with stdio_client(params) as (read_stream, write_stream):
        yield read_stream, write_stream


async def run(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    transcript = Transcript()
    output: dict[str, Any] = {"scenario": args.scenario, "command": command}
    if args.url:
        output["url"] = args.url
    async with _connect(args, command) as (read_stream, write_stream):
        to_session_send, to_session_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        from_session_send, from_session_recv = anyio.create_memory_object_stream[SessionMessage](0)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_pump, read_stream, to_session_send, transcript.received)
            tg.start_soon(_pump, from_session_recv, write_stream, transcript.sent)
            async with ClientSession(
                to_session_recv,
                from_session_send,
                read_timeout_seconds=args.timeout,
                client_info=CLIENT_INFO,
                **_callbacks(args),
            ) as session:
                runner = Runner(session, transcript, args)
                with anyio.move_on_after(args.total_timeout) as deadline:
                    await runner.run()
                if deadline.cancelled_caught:
                    output["aborted"] = f"scenario did not finish within {args.total_timeout}s"
                output["protocol_version"] = session.protocol_version
                info = session.server_info
                output["server_info"] = info.model_dump(mode="json", by_alias=True, exclude_none=True) if info else None
            tg.cancel_scope.cancel()
    notifications = [m for m in transcript.received if "method" in m and "id" not in m]
    output.update(
        steps=runner.steps,
        calls=runner.calls,
        progress_notifications=[m.get("params") for m in transcript.received_method("notifications/progress")],
        sampling_requests=transcript.received_method("sampling/createMessage"),
        elicitation_requests=transcript.received_method("elicitation/create"),
        notifications=notifications,
        sent=transcript.sent,
        received=transcript.received,
    )
    return output


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    own, command = argv[:split], argv[split + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=["full", "calls"], default="full")
    parser.add_argument("--url", help="connect to this Streamable HTTP endpoint instead of spawning a server")
    parser.add_argument("--header", nargs=2, action="append", metavar=("NAME", "VALUE"),
                        help="an HTTP header sent with every request (with --url); repeatable")
    parser.add_argument("--elicitation", choices=["accept", "decline", "none"], default="none",
                        help="declare the elicitation capability and answer requests this way (default: none)")
    parser.add_argument("--call", nargs=2, action="append", metavar=("NAME", "JSON_ARGS"),
                        help="an extra tools/call after the scenario; repeatable")
    parser.add_argument("--sampling-text", default=DEFAULT_SAMPLING_TEXT, help="the sampling callback's reply text")
    for step in ("progress", "sampling", "slow"):
        parser.add_argument(f"--{step}-tool", help=f"the {step} step's tool (default: chosen from tools/list)")
        parser.add_argument(f"--{step}-args", metavar="JSON", help=f"the {step} step's arguments")
    parser.add_argument("--resource", metavar="URI", help="the resource to read (default: the first listed)")
    parser.add_argument("--prompt", help="the prompt to get (default: the first listed, preferring no required args)")
    parser.add_argument("--prompt-args", metavar="JSON")
    parser.add_argument("--list-all", action="store_true",
                        help="follow every page of tools/list, prompts/list and resources/list")
    parser.add_argument("--subscribe", metavar="URI", help="resources/subscribe to URI after the scenario")
    parser.add_argument("--await-notification", metavar="METHOD",
                        help="after the calls, wait for a notification with this method")
    parser.add_argument("--await-seconds", type=float, default=15.0,
                        help="how long --await-notification waits (default 15)")
    parser.add_argument("--timeout", type=float, default=30.0, help="per-request timeout in seconds")
    parser.add_argument("--total-timeout", type=float, default=120.0, help="whole-scenario timeout in seconds")
    parser.add_argument("--cancel-after", type=float, default=3.0,
                        help="cancel the slow call after its first progress or this many seconds")
    parser.add_argument("--cancel-grace", type=float, default=0.5,
                        help="seconds to wait for a (wrong) response after cancelling")
    args = parser.parse_args(own)
    if args.url and command:
        parser.error("give either --url or a server command after --, not both")
    if not args.url and not command:
        parser.error("no server command given after --")
    for _, raw in args.call or []:
        json.loads(raw)  # fail fast on bad JSON
    return args, command


def main() -> int:
    args, command = parse_args(sys.argv[1:])
    try:
        output = anyio.run(run, args, command)
    except BaseException as exc:  # a crash of the client itself, not of a call
        traceback.print_exc()
        print(f"mcp_client.py: crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    json.dump(output, sys.stdout)
    sys.stdout.write("\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
