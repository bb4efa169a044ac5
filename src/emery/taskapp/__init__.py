"""Task apps: agents behind HTTP. ``serve(agent)`` hosts a Python agent as one; the
``task_app`` system kind calls one during a job."""

from emery.systems.task_app_protocol import (
    API_KEY_ENV,
    API_KEY_HEADER,
    RolloutRequest,
    RolloutResponse,
    TaskInfo,
    dig,
)
from emery.taskapp.server import create_task_app, run_request, serve

__all__ = [
    "API_KEY_ENV",
    "API_KEY_HEADER",
    "RolloutRequest",
    "RolloutResponse",
    "TaskInfo",
    "create_task_app",
    "dig",
    "run_request",
    "serve",
]
