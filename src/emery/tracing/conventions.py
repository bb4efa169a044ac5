"""Semantic conventions: every span name and attribute key emery writes, in one place.

LM calls follow the OpenTelemetry GenAI conventions (``gen_ai.*``): the span is named
``chat {model}``, request and response details are ``gen_ai.request.*`` /
``gen_ai.response.*``, token counts ``gen_ai.usage.*``. Message lists
(``gen_ai.input.messages``, ``gen_ai.output.messages``) hold JSON text in the OpenAI chat
format (role, content, tool_calls, tool_call_id), because span attributes can only hold
primitives.

Emitter spans are named ``emery.<kind>`` and carry ``emery.<kind>.*`` attributes.
Exceptions use the OpenTelemetry exception event (``exception.type``, ``exception.message``,
``exception.stacktrace``). Every stored span also carries the rollout id, the attempt id
and a per-attempt sequence number (also columns of the stored span).
"""

from __future__ import annotations

# Span names.
ROLLOUT_SPAN = "emery.rollout"
"""The root span of one attempt of a rollout."""
CHAT_OPERATION = "chat"
"""GenAI operation name of chat completions; the span name is ``chat {model}``."""
TOOL_OPERATION = "execute_tool"
"""GenAI operation name of tool executions; the span name is ``execute_tool {tool}``."""
REWARD_SPAN = "emery.reward"
MESSAGE_SPAN = "emery.message"
OBJECT_SPAN = "emery.object"
EXCEPTION_SPAN = "emery.exception"
ANNOTATION_SPAN = "emery.annotation"
EMITTER_SPANS = frozenset({REWARD_SPAN, MESSAGE_SPAN, OBJECT_SPAN, EXCEPTION_SPAN, ANNOTATION_SPAN})

# OpenTelemetry GenAI attributes.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
"""The agent that made a call (``tracing/agents.py``), on its span or a span above it."""
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"

# OpenTelemetry resource attribute, copied onto each span by OTLP ingest.
SERVICE_NAME = "service.name"

# emery attributes.
ROLLOUT_ID = "emery.rollout.id"
ATTEMPT_ID = "emery.attempt.id"
ATTEMPT_NUMBER = "emery.attempt.number"
SEQUENCE = "emery.sequence"
CANDIDATE_ID = "emery.candidate.id"
EXAMPLE_ID = "emery.example.id"
SPLIT = "emery.split"
PROMPT_NAME = "emery.prompt.name"
"""The published prompt a call through the LM proxy's ``/prompts/NAME/v1`` route used."""
PROMPT_VERSION = "emery.prompt.version"
"""That prompt's version (an int)."""
LM_SOURCE = "emery.lm.source"
"""Where an LM call was seen: ``emery`` (the LM layer), ``openai`` (the instrumented
client) or ``proxy`` (the LM proxy)."""
LM_CACHED = "emery.lm.cached"
LM_LATENCY_S = "emery.lm.latency_s"
LM_STREAM = "emery.lm.stream"
LM_PROMPT_TOKEN_IDS = "emery.lm.prompt_token_ids"
"""The prompt's token ids as the model read them (chat template applied); with the two
below, recorded when the model's ``record_tokens`` is set and the model gives them."""
LM_COMPLETION_TOKEN_IDS = "emery.lm.completion_token_ids"
LM_COMPLETION_LOGPROBS = "emery.lm.completion_logprobs"
"""The model's log-probability of each completion token."""
REWARD_VALUE = "emery.reward.value"
"""The primary reward (a float)."""
REWARD_PRIMARY = "emery.reward.primary"
"""The name of the primary reward when a dict of rewards was emitted."""
REWARD_DIMENSIONS = "emery.reward.dimensions"
"""All named rewards as JSON text."""
MESSAGE_TEXT = "emery.message.text"
OBJECT_JSON = "emery.object.json"
ANNOTATION_JSON = "emery.annotation.json"

# OpenTelemetry exception event.
EXCEPTION_EVENT = "exception"
EXCEPTION_TYPE = "exception.type"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_STACKTRACE = "exception.stacktrace"
