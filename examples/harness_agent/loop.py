"""The agent loop (the harness's `code:runtime` component): one JSON tool call per turn.

emery runs `run(kit)` once per episode, in a child process of a worker, and records every
model call and tool call it makes. `kit.complete` calls the job's task model,
`kit.execute` acts on the environment (warehouse.py), `kit.parse_tool_call` reads a
`{"tool", "arguments"}` object out of a reply. The return value is the episode's answer,
which the environment's `check` scores.
"""

NUDGE = 'Reply with one JSON object only: {"tool": "<name>", "arguments": {...}}.'


def run(kit):
    messages = [{"role": "user", "content": kit.instruction}]
    nudged = False
    for _ in range(10):
        reply = kit.complete(kit.system_prompt, messages, max_tokens=128)
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
        observation = kit.execute(call["tool"], call["arguments"])
        messages.append({"role": "user", "content": "Observation: " + observation.text})
    return ""
