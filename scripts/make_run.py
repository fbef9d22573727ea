"""`make run`: evaluate the examples in-process with the configured judge.

With no LLM configured and no offline judge available yet, it starts the local test server
(tests/llm_server.py) as a stand-in judge so that the whole path can be seen working.
"""

from __future__ import annotations

import os
import sys

from worker.cli import main
from worker.settings import Settings


def run(input_path: str, out_path: str) -> int:
    argv = ["run", input_path, "--out", out_path]
    if Settings().llm_configured:
        return main(argv)
    from tests.llm_server import ServerThread

    with ServerThread() as server:
        print(
            f"make run: no LLM configured; using the local test server at {server.base_url}",
            file=sys.stderr,
        )
        os.environ["VEREDITO_LLM_BASE_URL"] = server.base_url
        return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2]))
