"""What the MCP Python SDK checks share: reporting and reading tool results."""

import sys


def fail(msg):
    print(f"FAIL {msg}", flush=True)
    sys.exit(1)


def ok(msg):
    print(f"ok   {msg}", flush=True)


def structured(result):
    if result.is_error:
        fail(f"tool error: {result.content}")
    return result.structured_content
