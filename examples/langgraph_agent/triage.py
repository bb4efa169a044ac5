"""A customer-support triage agent written with LangGraph and langchain-openai.

Nothing here knows about emery. The graph has two nodes: `classify` asks the model for the
message's intent label, `route` maps the label to a support queue (plain Python). The chat
model reads OPENAI_BASE_URL and OPENAI_API_KEY from the environment, as usual.

emery hosts `triage` as a task app
(`emery taskapp serve triage:triage --component CLASSIFY_PROMPT`): inside each rollout the
OpenAI calls that langchain-openai makes go to the job's LM proxy, which records them and
forwards them to the job's task model, and CLASSIFY_PROMPT is bound to the candidate's text.
"""

from __future__ import annotations

import os
from typing import TypedDict

from langchain_core.messages import HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

CLASSIFY_PROMPT = (
    "Classify the intent of the customer's message. Reply with one label: book_flight,"
    " cancel_booking, change_address, check_balance, report_lost_card, reset_password,"
    " speak_to_agent or track_order."
)

QUEUES = {
    "book_flight": "sales",
    "cancel_booking": "sales",
    "change_address": "accounts",
    "check_balance": "accounts",
    "report_lost_card": "cards",
    "reset_password": "accounts",
    "speak_to_agent": "humans",
    "track_order": "logistics",
}


class Ticket(TypedDict, total=False):
    message: str
    intent: str
    queue: str


MODEL = ChatOpenAI(
    model=os.environ.get("TRIAGE_MODEL", "gpt-4o-mini"), temperature=0, max_tokens=16
)


def classify(ticket: Ticket) -> Ticket:
    """The model's intent label for the message."""
    reply = MODEL.invoke([SystemMessage(CLASSIFY_PROMPT), HumanMessage(ticket["message"])])
    return {"intent": str(reply.content).strip()}


def route(ticket: Ticket) -> Ticket:
    """The support queue of the label (`triage` when the label is not one of ours)."""
    label = ticket["intent"].strip().strip(".").lower()
    return {"queue": QUEUES.get(label, "triage")}


def build_graph() -> CompiledStateGraph:
    """START -> classify -> route -> END."""
    graph = StateGraph(Ticket)
    graph.add_node("classify", classify)
    graph.add_node("route", route)
    graph.add_edge(START, "classify")
    graph.add_edge("classify", "route")
    graph.add_edge("route", END)
    return graph.compile()


GRAPH = build_graph()


def triage(message: str) -> str:
    """Run the graph on one customer message; the answer is the intent label."""
    final = GRAPH.invoke({"message": message})
    return final["intent"]


if __name__ == "__main__":
    import sys

    result = GRAPH.invoke({"message": " ".join(sys.argv[1:]) or "Where is my package K1234?"})
    print(f"{result['intent']} -> {result['queue']}")
