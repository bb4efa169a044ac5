"""A customer-support intent classifier written with the OpenAI Agents SDK.

Nothing here knows about emery. The model is the SDK's chat-completions model on an
``AsyncOpenAI`` client, which reads OPENAI_BASE_URL and OPENAI_API_KEY from the
environment (the SDK's way to reach any OpenAI-compatible provider). emery hosts
``classify`` as a task app (`emery taskapp serve support_agent:classify --component
INSTRUCTIONS`); inside each rollout the client's calls go to the job's LM proxy, which
records them and forwards them to the job's task model, and INSTRUCTIONS is bound to the
candidate being scored.
"""

from __future__ import annotations

import asyncio
import os

from agents import Agent, OpenAIChatCompletionsModel, Runner
from openai import AsyncOpenAI

INSTRUCTIONS = (
    "Classify the intent of the customer's message. Reply with one label: book_flight,"
    " cancel_booking, change_address, check_balance, report_lost_card, reset_password,"
    " speak_to_agent or track_order."
)


def support_agent() -> Agent:
    """The triage agent, with the instructions as they are now."""
    model = OpenAIChatCompletionsModel(
        model=os.environ.get("SUPPORT_AGENT_MODEL", "gpt-4.1-mini"), openai_client=AsyncOpenAI()
    )
    return Agent(name="support triage", instructions=INSTRUCTIONS, model=model)


async def classify(message: str) -> str:
    """The intent label of one customer message."""
    result = await Runner.run(support_agent(), message)
    return str(result.final_output).strip()


if __name__ == "__main__":
    import sys

    print(asyncio.run(classify(" ".join(sys.argv[1:]) or "Where is my package K1234?")))
