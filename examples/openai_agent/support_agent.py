"""A customer-support intent classifier written against the plain OpenAI SDK.

Nothing here knows about emery. The client reads OPENAI_BASE_URL and OPENAI_API_KEY from
the environment, as usual. emery hosts this function as a task app
(`emery taskapp serve support_agent:classify --component SYSTEM_PROMPT`); inside each
rollout the OpenAI calls go to the job's LM proxy, which records them and forwards them to
the job's task model, and SYSTEM_PROMPT is bound to the candidate being scored.
"""

from __future__ import annotations

import os

import openai

SYSTEM_PROMPT = (
    "Classify the intent of the customer's message. Reply with one label: book_flight,"
    " cancel_booking, change_address, check_balance, report_lost_card, reset_password,"
    " speak_to_agent or track_order."
)


def classify(message: str) -> str:
    """The intent label of one customer message."""
    client = openai.OpenAI()
    reply = client.chat.completions.create(
        model=os.environ.get("SUPPORT_AGENT_MODEL", "gpt-4o-mini"),
        messages=[
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": message},
        ],
        temperature=0,
        max_tokens=16,
    )
    return (reply.choices[0].message.content or "").strip()


if __name__ == "__main__":
    import sys

    print(classify(" ".join(sys.argv[1:]) or "Where is my package K1234?"))
