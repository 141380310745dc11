"""Drives Arbor's gateway with the official OpenAI, Anthropic and Google GenAI Python SDKs.

Run by tests/it/gateway.rs against a running server whose mock upstream has the replies queued
in the order below. Prints one line per check; exits non-zero at the first failure.

    python check.py <origin> <token>
"""

import sys

import anthropic
import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

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

# The fields Claude Code sends: a system-role message inside messages, adaptive thinking, an
# effort, context management, cache control.
raw = an.messages.with_raw_response.create(
    model="anthropic/claude-sonnet-4-5",
    max_tokens=1024,
    system=[{"type": "text", "text": "Be kind.", "cache_control": {"type": "ephemeral"}}],
    messages=[{"role": "user", "content": "Hi"}, {"role": "system", "content": "The user is in Oslo."}],
    extra_body={"thinking": {"type": "adaptive"}, "output_config": {"effort": "high"}, "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}},
    extra_headers={"anthropic-beta": "context-management-2025-06-27,effort-2025-11-24"},
)
m = raw.parse()
assert m.content[0].text.startswith("Hello!"), m
# An Anthropic provider receives the body as it came: nothing is left out, nothing to warn of.
assert "warning" not in raw.headers, raw.headers
ok("anthropic.beta_fields")

# --- OpenAI Responses ---------------------------------------------------------------------
r = oa.responses.create(model="openai/gpt-4o-mini", instructions="Be kind.", input="Hi")
assert r.status == "completed" and r.output_text == "Hello! How can I help you today? 👋", r
assert r.usage.total_tokens > 0 and r.model == "openai/gpt-4o-mini", r
ok("responses.create")

with oa.responses.stream(model="openai/gpt-4o-mini", input="Hi", previous_response_id=r.id) as s:
    deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
    final = s.get_final_response()
assert "".join(deltas) == "Hello! How can I help you today? 👋" == final.output_text, deltas
assert final.previous_response_id == r.id and final.usage.output_tokens > 0, final
ok("responses.stream")

weather = [{"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
r3 = oa.responses.create(model="openai/gpt-4o-mini", input="Weather in Paris and London?", tools=weather)
calls = [o for o in r3.output if o.type == "function_call"]
assert [c.name for c in calls] == ["get_weather", "get_local_time"], r3
assert all(c.arguments.startswith("{") and c.call_id.startswith("call_") for c in calls), r3
ok("responses.tools")

assert oa.responses.retrieve(r.id).output_text == r.output_text
oa.responses.delete(r.id)
expect(openai.NotFoundError, lambda: oa.responses.retrieve(r.id))
expect(openai.NotFoundError, lambda: oa.responses.create(model="openai/gpt-4o-mini", input="Hi", previous_response_id=r.id))
expect(openai.BadRequestError, lambda: oa.responses.create(model="openai/gpt-4o-mini", input=[]))
ok("responses.stored")

e = expect(openai.NotFoundError, lambda: oa.post("/no/such/route", cast_to=object, body={}))
assert e.body is not None, e
ok("openai.unknown_route")

e = oa.embeddings.create(model="openai/text-embedding-3-small", input=["first", "second"])
assert [d.index for d in e.data] == [0, 1] and len(e.data[0].embedding) == 4, e
assert abs(e.data[0].embedding[0] - 0.0023064255) < 1e-6 and e.usage.prompt_tokens == 8, e
ok("openai.embeddings")

# --- Google GenAI -------------------------------------------------------------------------
g = genai.Client(api_key=token, http_options=genai_types.HttpOptions(base_url=origin, api_version="v1beta"))
sky = "The sky looks blue because sunlight is scattered by the gases"
r = g.models.generate_content(model="gemini-2.5-flash", contents="Why is the sky blue?", config=genai_types.GenerateContentConfig(system_instruction="Be brief."))
assert r.text.startswith(sky) and r.usage_metadata.total_token_count == 67, r
ok("genai.generate")

text = "".join(c.text or "" for c in g.models.generate_content_stream(model="gemini-2.5-flash", contents="Why is the sky blue?"))
assert text.startswith(sky) and text.endswith("before it reaches you."), text
ok("genai.stream")

n = g.models.count_tokens(model="gemini-2.5-flash", contents="Why is the sky blue?")
assert n.total_tokens == 31, n
ok("genai.count_tokens")

decl = genai_types.FunctionDeclaration(name="get_weather", description="Weather.", parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}}})
r = g.models.generate_content(
    model="gemini-2.5-flash",
    contents="Weather in Paris and London?",
    config=genai_types.GenerateContentConfig(tools=[genai_types.Tool(function_declarations=[decl])], automatic_function_calling=genai_types.AutomaticFunctionCallingConfig(disable=True)),
)
assert r.function_calls and all(c.name == "get_weather" for c in r.function_calls), r
ok("genai.tools")

emb = g.models.embed_content(model="gemini-embedding-001", contents="Why is the sky blue?")
assert len(emb.embeddings) == 1 and abs(emb.embeddings[0].values[0] - 0.013168523) < 1e-6, emb
ok("genai.embed")

r = g.models.generate_content(model="gpt-4o-mini", contents="Hi")
assert r.text == "Hello! How can I help you today? 👋", r
ok("genai.cross")

e = expect(genai_errors.ClientError, lambda: g.models.generate_content(model="no-such-model", contents="Hi"))
assert e.code == 404 and e.status == "NOT_FOUND", e
bad = genai.Client(api_key="arb_wrong", http_options=genai_types.HttpOptions(base_url=origin, api_version="v1beta"))
e = expect(genai_errors.ClientError, lambda: bad.models.generate_content(model="gemini-2.5-flash", contents="Hi"))
assert e.code == 401 and e.status == "UNAUTHENTICATED", e
ok("genai.errors")
