"""reelay chat compatibility check with the official Python `openai` library.

Env: REELAY_BASE_URL ({base}/api/compat), REELAY_API_KEY, REELAY_CHAT_MODELS ("model=expected reply prefix|...").
Prints one PASS/FAIL line per check; exits 1 if any check failed.
"""
import os

import openai
from openai import OpenAI

from checks import check, expect, finish

BASE_URL = os.environ["REELAY_BASE_URL"]
API_KEY = os.environ["REELAY_API_KEY"]
MODELS = [entry.split("=", 1) for entry in os.environ.get("REELAY_CHAT_MODELS", "echo=").split("|")]

client = OpenAI(base_url=BASE_URL, api_key=API_KEY, max_retries=0, timeout=30)


def single_turn(model, prefix):
    reply = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hello from python"}])
    expect(reply.choices[0].message.content, prefix + "hello from python", "reply")
    if reply.usage is None or reply.usage.completion_tokens <= 0:
        raise AssertionError(f"usage missing: {reply.usage!r}")


def multi_turn(model, prefix):
    reply = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "you are terse"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "second turn"},
        ],
    )
    expect(reply.choices[0].message.content, prefix + "second turn", "reply")


def streaming(model, prefix):
    stream = client.chat.completions.create(
        model=model,
        stream=True,
        stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "stream this please"}],
    )
    text, usage, chunks = "", None, 0
    for chunk in stream:
        chunks += 1
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage
    expect(text, prefix + "stream this please", "streamed text")
    if chunks < 3 or usage is None:
        raise AssertionError(f"expected several chunks and a usage chunk, got {chunks} chunks, usage {usage!r}")


def bad_key():
    stranger = OpenAI(base_url=BASE_URL, api_key="rly_not-a-key", max_retries=0)
    try:
        stranger.chat.completions.create(model=MODELS[0][0], messages=[{"role": "user", "content": "x"}])
    except openai.AuthenticationError as error:
        expect(error.status_code, 401, "status")
        return
    raise AssertionError("a bad key was accepted")


for model, prefix in MODELS:
    check(f"single-turn [{model}]", lambda: single_turn(model, prefix))
    check(f"multi-turn [{model}]", lambda: multi_turn(model, prefix))
    check(f"streaming [{model}]", lambda: streaming(model, prefix))
check("bad-key", bad_key)
finish()
