"""An agent-style session with anypath's code interpreter over MCP.

Uploads a CSV, analyses it, draws a chart and writes a report in the
sandbox, looks at the chart as image content, then downloads both files by
their signed links, as an agent (or an n8n workflow) would.

    # with `cargo xtask up` (or `anypath sandbox serve`) running:
    .venv/bin/python examples/mcp_agent.py http://127.0.0.1:3001/mcp [API_KEY] [OUT_DIR]
    # or let the script start the stdio server itself:
    .venv/bin/python examples/mcp_agent.py stdio target/release/anypath [OUT_DIR]

Needs the MCP Python SDK (`pip install mcp==2.3.0`; `cargo xtask test`
puts it into `.venv`).
"""

import asyncio
import base64
import pathlib
import sys

import httpx2
import mcp
from mcp.client.streamable_http import streamable_http_client

SALES = """month,region,revenue
2026-01,north,120
2026-01,south,80
2026-02,north,135
2026-02,south,95
2026-03,north,150
2026-03,south,70
"""

# The analysis an agent would write: pure standard library, so it runs on the
# default runtime; the chart is an SVG bar chart.
ANALYSIS = """
import csv
rows = list(csv.DictReader(open('sales.csv')))
by_region = {}
for row in rows:
    by_region[row['region']] = by_region.get(row['region'], 0) + int(row['revenue'])
best = max(by_region, key=by_region.get)
print(f"{len(rows)} rows, best region: {best} ({by_region[best]})")
"""

CHART_AND_REPORT = """
top = max(by_region.values())
bars = ''.join(
    f'<rect x="{20 + i * 60}" y="{180 - 160 * v // top}" width="40" height="{160 * v // top}" fill="steelblue"/>'
    f'<text x="{20 + i * 60}" y="195" font-size="12">{region}</text>'
    for i, (region, v) in enumerate(sorted(by_region.items())))
open('revenue.svg', 'w').write(f'<svg xmlns="http://www.w3.org/2000/svg" width="200" height="200">{bars}</svg>')
with open('report.md', 'w') as report:
    report.write('# Revenue by region\\n\\n| region | revenue |\\n| --- | --- |\\n')
    for region, v in sorted(by_region.items()):
        report.write(f'| {region} | {v} |\\n')
    report.write(f'\\nBest region: **{best}**.\\n')
"""


def client_for(argv):
    """The MCP client the command line asks for, and the output directory."""
    if argv[0] == "stdio":
        params = mcp.StdioServerParameters(command=argv[1], args=["mcp"])
        return mcp.Client(params), pathlib.Path(argv[2] if len(argv) > 2 else "mcp-agent-output")
    headers = {"x-api-key": argv[1]} if len(argv) > 1 and argv[1] else {}
    http = httpx2.AsyncClient(headers=headers, timeout=60)
    out = pathlib.Path(argv[2] if len(argv) > 2 else "mcp-agent-output")
    return mcp.Client(streamable_http_client(argv[0], http_client=http)), out


async def call(client, tool, **arguments):
    """One tool call; a tool error stops the script with the server's message."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise SystemExit(f"{tool} failed: {result.content[0].text}")
    return result


async def main(argv):
    client, out = client_for(argv)
    session = "sales-demo"
    async with client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
        print("tools:", ", ".join(sorted(tools)))
        await call(client, "upload_file", session_id=session, filename="sales.csv",
                   content_base64=base64.b64encode(SALES.encode()).decode(), overwrite=True)
        analysed = await call(client, "run_python", session_id=session, code=ANALYSIS)
        print("analysis:", analysed.structured_content["stdout"].strip())
        # The variables of the first run are still there in the second.
        made = await call(client, "run_python", session_id=session, code=CHART_AND_REPORT)
        artifacts = made.structured_content["artifacts"]
        print("artifacts:", ", ".join(f"{a['filename']} ({a['mime_type']}, {a['size_bytes']} B)" for a in artifacts))

        report = await call(client, "read_artifact", session_id=session, path="report.md")
        print(base64.b64decode(report.structured_content["content_base64"]).decode())

        out.mkdir(parents=True, exist_ok=True)
        async with httpx2.AsyncClient(timeout=60) as plain:
            for artifact in artifacts:
                response = await plain.get(artifact["download_url"])
                response.raise_for_status()
                (out / artifact["filename"]).write_bytes(response.content)
                print("downloaded", out / artifact["filename"])
        await call(client, "close_session", session_id=session)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    asyncio.run(main(sys.argv[1:]))
