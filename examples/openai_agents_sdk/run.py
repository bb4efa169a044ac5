"""Serve this folder's agent as a task app and optimize it with `emery train` on the
embedded local model (../run_task_app.py; see README.md):

    python examples/openai_agents_sdk/run.py [--model M] [--budget N] [--set KEY=VALUE]
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from run_task_app import main  # noqa: E402

if __name__ == "__main__":
    main(HERE, "support_agent:classify", "INSTRUCTIONS", port=8512)
