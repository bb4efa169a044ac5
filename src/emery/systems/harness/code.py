"""The code component: the check every module passes before any budget is spent on it,
and the seed loop used when a config gives no code."""

from __future__ import annotations

import ast

CODE_COMPONENT = "code:runtime"
PROMPT_COMPONENT = "prompt:system"
SKILL_PREFIX = "skill:"
CODE_PREFIX = "code:"

CODE_BRIEF = (
    "You improve an agent loop written in Python. "
    """The module defines run(kit) -> str, the episode's final answer. The kit offers:
- kit.complete(system, messages, temperature=None, max_tokens=512) -> str: one model call
- kit.execute(tool, arguments) -> Observation (.text, .ok, .done): one environment action
- kit.parse_tool_call(text) -> {"tool", "arguments"} or None; kit.tools_text();
  kit.skills_index(); kit.read_skill(name); kit.instruction; kit.system_prompt; kit.tools
Model calls and actions are capped per episode (BudgetExceeded ends the episode)."""
)
"""What a harness module is, must define and may call: shown to a model that writes one."""

SEED_CODE = '''\
NUDGE = (
    "Reply with one JSON object only: "
    '{"tool": "<name>", "arguments": {...}}. Use submit with the final answer.'
)


def run(kit):
    """Baseline loop: one JSON tool call per turn, one nudge, submit ends the episode."""
    messages = [{"role": "user", "content": kit.instruction}]
    nudged = False
    for _ in range(12):
        reply = kit.complete(kit.system_prompt, messages)
        messages.append({"role": "assistant", "content": reply})
        call = kit.parse_tool_call(reply)
        if call is None:
            if nudged:
                return reply.strip()
            nudged = True
            messages.append({"role": "user", "content": NUDGE})
            continue
        if call["tool"] == "submit":
            return str(call["arguments"].get("answer", ""))
        if call["tool"] == "read_skill":
            text = kit.read_skill(str(call["arguments"].get("name", "")))
        else:
            text = str(kit.execute(call["tool"], call["arguments"]))
        messages.append({"role": "user", "content": "Observation: " + text})
    return ""
'''

SEED_PROMPT = """\
You solve the user's task with tools. Each turn, reply with exactly one JSON object:
{"tool": "<tool name>", "arguments": {...}}
When you know the answer, call submit: {"tool": "submit", "arguments": {"answer": "..."}}

Tools:
{tools}
{skills}"""


def code_problem(source: str) -> str | None:
    """Why ``source`` cannot be harness code (it does not compile, or defines no function
    ``run`` at module scope), or None. Nothing is executed."""
    if not source.strip():
        return "the module is empty"
    try:
        tree = ast.parse(source, filename="<harness>")
        compile(tree, "<harness>", "exec")
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None)
        where = f" (line {line})" if line else ""
        return f"the module does not compile: {getattr(exc, 'msg', exc)}{where}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "run":
            if not node.args.args and not node.args.vararg:
                return "run must take the kit as its argument: def run(kit)"
            return None
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "run" for t in node.targets
        ):
            return None
    return "the module defines no function run(kit) at module scope"
