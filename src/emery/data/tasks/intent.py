"""Customer-support intent classification with a fixed label set."""

from __future__ import annotations

import random
from typing import Any

from emery.data.tasks.base import BuiltinTask
from emery.systems.prompt_program import MessageTemplate, PromptProgramConfig, StageConfig
from emery.verifiers.kinds import NormalizedConfig

CITIES = ["Lisbon", "Denver", "Osaka", "Nairobi", "Toronto", "Madrid", "Oslo", "Lima"]
MONTHS = ["March", "April", "June", "September", "October", "December"]

UTTERANCES: dict[str, list[str]] = {
    "book_flight": [
        "I need a flight to {city} in {month}.",
        "Can you get me a plane ticket to {city}?",
        "I'd like to fly out to {city} next week, what do you have?",
        "Please reserve a seat on a flight to {city} for {month}.",
    ],
    "cancel_booking": [
        "Please cancel my reservation {code}.",
        "I won't be travelling anymore, cancel booking {code}.",
        "How do I cancel the trip I booked to {city}?",
        "Drop my booking {code}, plans changed.",
    ],
    "check_balance": [
        "How much money is left in my account?",
        "What's my current balance?",
        "Can you tell me how much I have in checking?",
        "Show me the balance on my savings account.",
    ],
    "reset_password": [
        "I forgot my password and can't log in.",
        "How do I reset my password?",
        "My login isn't working, I need a new password.",
        "I'm locked out of my account, please help me change my password.",
    ],
    "track_order": [
        "Where is my package {code}?",
        "My order {code} hasn't arrived yet, where is it?",
        "Can you track the parcel I ordered in {month}?",
        "When will order {code} be delivered?",
    ],
    "report_lost_card": [
        "I lost my credit card in {city}.",
        "My debit card was stolen, please block it.",
        "I can't find my bank card anywhere, what should I do?",
        "Someone took my wallet with my card in it.",
    ],
    "change_address": [
        "I moved to {city}, please update my address.",
        "I need to change the shipping address on my account.",
        "Update my home address, I relocated in {month}.",
        "My address is different now, how do I change it?",
    ],
    "speak_to_agent": [
        "Let me talk to a real person.",
        "I want to speak with a human agent please.",
        "Can I get someone on the phone?",
        "Connect me to customer service staff, not a bot.",
    ],
}
LABELS = sorted(UTTERANCES)


def generate(rng: random.Random) -> tuple[dict[str, Any], Any]:
    label = rng.choice(LABELS)
    template = rng.choice(UTTERANCES[label])
    text = template.format(
        city=rng.choice(CITIES),
        month=rng.choice(MONTHS),
        code=f"{rng.choice('ABCDEFGHJK')}{rng.randint(1000, 9999)}",
    )
    return {"message": text}, label


TASK = BuiltinTask(
    name="intent",
    description="Classify a customer-support message into one of 8 intent labels: "
    + ", ".join(LABELS)
    + ".",
    generate=generate,
    program=PromptProgramConfig(
        name="intent",
        stages=[
            StageConfig(
                name="classify",
                instruction="Classify the intent of the customer's message.",
                messages=[MessageTemplate(template="{message}")],
            )
        ],
    ),
    verifier=NormalizedConfig(),
    sizes=(40, 40, 60),
)
