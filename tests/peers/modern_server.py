#!/usr/bin/env python3
"""A 2026-07-28 Streamable HTTP MCP server built on the Python `mcp` SDK, for
acs-proxy's stateless tests: the SDK checks every request's metadata headers
(MCP-Protocol-Version, Mcp-Method, Mcp-Name, Mcp-Param-*) against its body
and answers 400/-32020 when they disagree.

    modern_server.py PORT

Tool `query(region, sql)` mirrors `region` into `Mcp-Param-Region` and
answers "<region>: <sql>".
"""

import sys
from typing import Annotated

from pydantic import Field

from mcp.server.mcpserver import MCPServer

server = MCPServer("modern-test-server")


@server.tool()
def query(
    region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})],
    sql: str,
) -> str:
    """Runs a query in a region."""
    return f"{region}: {sql}"


if __name__ == "__main__":
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]))
