"""Drives Arbor's /v1 gateway with the official OpenAI and Anthropic Python SDKs.

Run by tests/it/gateway.rs against a running server whose mock upstream has the replies queued
in the order below. Prints one line per check; exits non-zero at the first failure.

    python check.py <origin> <token>
"""

import sys

import anthropic
import openai

origin, token = sys.argv[1], sys.argv[2]
oa = openai.OpenAI(api_key=token, base_url=f"{origin}/v1", max_retries=0)
an = anthropic.Anthropic(api_key=token, base_url=origin, max_retries=0)
messages = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}]


def ok(name):
    print(f"ok {name}", flush=True)


def expect(exc_type, fn):
    try:
        fn()
    except exc_type as e:
        return e
    raise AssertionError(f"expected {exc_type.__name__}")


# --- OpenAI SDK ---------------------------------------------------------------------------
r = oa.chat.completions.create(model="openai/gpt-4o-mini", messages=messages)
assert r.choices[0].message.content == "Hello! How can I help you today? 👋", r
assert r.model == "openai/gpt-4o-mini" and r.usage.total_tokens > 0, r
ok("openai.create")

text, usage = "", None
for chunk in oa.chat.completions.create(
    model="openai/gpt-4o-mini", messages=messages, stream=True, stream_options={"include_usage": True}
):
    if chunk.choices and chunk.choices[0].delta.content:
        text += chunk.choices[0].delta.content
    if chunk.usage:
        usage = chunk.usage
assert text == "Hello! How can I help you today? 👋", text
assert usage is not None and usage.completion_tokens > 0, usage
ok("openai.stream")

tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
r = oa.chat.completions.create(model="openai/gpt-4o-mini", messages=messages, tools=tools)
calls = r.choices[0].message.tool_calls
assert calls and r.choices[0].finish_reason == "tool_calls", r
assert all(c.function.name for c in calls) and all(c.function.arguments.startswith("{") for c in calls), calls
ok("openai.tools")

expect(openai.NotFoundError, lambda: oa.chat.completions.create(model="no-such-model", messages=messages))
bad = openai.OpenAI(api_key="arb_wrong", base_url=f"{origin}/v1", max_retries=0)
expect(openai.AuthenticationError, lambda: bad.chat.completions.create(model="openai/gpt-4o-mini", messages=messages))
expect(openai.BadRequestError, lambda: oa.chat.completions.create(model="openai/gpt-4o-mini", messages=[]))
e = expect(openai.RateLimitError, lambda: oa.chat.completions.create(model="openai/gpt-4o-mini", messages=messages))
assert e.status_code == 429
ok("openai.errors")

# --- Anthropic SDK ------------------------------------------------------------------------
m = an.messages.create(model="anthropic/claude-sonnet-4-5", max_tokens=256, system="Be kind.", messages=[{"role": "user", "content": "Hi"}])
assert m.content[0].type == "text" and m.content[0].text.startswith("Hello!"), m
assert m.model == "anthropic/claude-sonnet-4-5" and m.stop_reason == "end_turn", m
ok("anthropic.create")

with an.messages.stream(model="anthropic/claude-sonnet-4-5", max_tokens=256, messages=[{"role": "user", "content": "Hi"}]) as s:
    streamed = "".join(s.text_stream)
    final = s.get_final_message()
assert streamed == "Hello! How can I help you today? Ünïcödé ✓ — 日本語", streamed
assert final.usage.output_tokens > 0, final
ok("anthropic.stream")

m = an.messages.create(
    model="anthropic/claude-sonnet-4-5",
    max_tokens=256,
    tools=[{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    messages=[{"role": "user", "content": "Weather in Paris and Oslo?"}],
)
uses = [b for b in m.content if b.type == "tool_use"]
assert uses and m.stop_reason == "tool_use" and all(isinstance(u.input, dict) for u in uses), m
ok("anthropic.tools")

n = an.messages.count_tokens(model="anthropic/claude-sonnet-4-5", messages=[{"role": "user", "content": "Hi"}])
assert n.input_tokens == 2095, n
ok("anthropic.count_tokens")

expect(anthropic.NotFoundError, lambda: an.messages.create(model="no-such-model", max_tokens=8, messages=[{"role": "user", "content": "Hi"}]))
bad = anthropic.Anthropic(api_key="arb_wrong", base_url=origin, max_retries=0)
expect(anthropic.AuthenticationError, lambda: bad.messages.create(model="anthropic/claude-sonnet-4-5", max_tokens=8, messages=[{"role": "user", "content": "Hi"}]))
expect(anthropic.BadRequestError, lambda: an.messages.create(model="anthropic/claude-sonnet-4-5", max_tokens=8, messages=[]))
ok("anthropic.errors")

# An OpenAI model through the Anthropic SDK, streamed.
with an.messages.stream(model="openai/gpt-4o-mini", max_tokens=256, messages=[{"role": "user", "content": "Hi"}]) as s:
    streamed = "".join(s.text_stream)
assert streamed == "Hello! How can I help you today? 👋", streamed
ok("anthropic.cross")
