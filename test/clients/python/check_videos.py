"""reelay's OpenAI Videos API with the official Python `openai` library (client.videos.*).

Env: REELAY_BASE_URL ({base}/api/compat), REELAY_API_KEY, REELAY_POOR_API_KEY (an account with no balance),
REELAY_LIMITED_BASE_URL and REELAY_LIMITED_API_KEY (an edge that allows one request per key).
Prints one PASS/FAIL line per check; exits 1 if any check failed.
"""
import base64
import json
import os
import subprocess
import tempfile
import time
import warnings

import openai
from openai import OpenAI

from checks import check, expect, finish

# The SDK marks its videos resource deprecated (OpenAI's own Sora API shuts down); reelay keeps serving it.
warnings.filterwarnings("ignore", category=DeprecationWarning)

BASE_URL = os.environ["REELAY_BASE_URL"]
client = OpenAI(base_url=BASE_URL, api_key=os.environ["REELAY_API_KEY"], max_retries=0, timeout=30)
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==")


def raises(kind, fn):
    try:
        fn()
    except kind:
        return
    except Exception as error:
        raise AssertionError(f"expected {kind.__name__}, got {type(error).__name__}: {error}")
    raise AssertionError(f"expected {kind.__name__}, nothing was raised")


def wait_for_completed(video_id):
    for _ in range(600):
        video = client.videos.retrieve(video_id)
        if video.status in ("completed", "failed"):
            return video
        time.sleep(0.05)
    raise AssertionError(f"{video_id} did not finish")


state = {}


def create_and_download():
    video = client.videos.create(model="VideoModel-2.0", prompt="a fox from python", seconds="4", size="1280x720",
                                 input_reference=("first-frame.png", PNG, "image/png"))
    expect(video.object, "video", "object")
    expect(video.status, "queued", "status")
    done = wait_for_completed(video.id)
    expect((done.status, done.progress, done.seconds, done.size), ("completed", 100, "4", "1280x720"), "completed video")
    content = client.videos.download_content(video.id)
    with tempfile.NamedTemporaryFile(suffix=".mp4") as file:
        file.write(content.read())
        file.flush()
        probe = json.loads(subprocess.check_output(["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_streams", "-of", "json", file.name]))
    stream = probe["streams"][0]
    expect((stream["width"], stream["height"], stream["codec_name"]), (1280, 720, "h264"), "the downloaded MP4")
    state["video"] = video.id


def list_finds_it():
    ids = [video.id for video in client.videos.list(limit=2)]
    if state["video"] not in ids:
        raise AssertionError(f"{state['video']} not in {ids}")


def remix():
    remixed = client.videos.remix(state["video"], prompt="the same fox at night")
    expect(remixed.remixed_from_video_id, state["video"], "remixed_from_video_id")
    expect(wait_for_completed(remixed.id).status, "completed", "remix status")


def delete():
    deleted = client.videos.delete(state["video"])
    expect((deleted.id, deleted.object, deleted.deleted), (state["video"], "video.deleted", True), "delete answer")
    raises(openai.NotFoundError, lambda: client.videos.retrieve(state["video"]))


def errors():
    raises(openai.BadRequestError, lambda: client.videos.create(model="VideoModel-2.0", prompt="x", size="1024x1792"))
    raises(openai.NotFoundError, lambda: client.videos.retrieve("video_999999999"))
    stranger = OpenAI(base_url=BASE_URL, api_key="rly_not_a_key", max_retries=0)
    raises(openai.AuthenticationError, lambda: stranger.videos.list())
    poor = OpenAI(base_url=BASE_URL, api_key=os.environ["REELAY_POOR_API_KEY"], max_retries=0)
    # An exhausted balance is OpenAI's 429 insufficient_quota (a RateLimitError the SDK does not retry: x-should-retry false).
    raises(openai.RateLimitError, lambda: poor.videos.create(model="VideoModel-2.0", prompt="x"))
    hurried = OpenAI(base_url=os.environ["REELAY_LIMITED_BASE_URL"], api_key=os.environ["REELAY_LIMITED_API_KEY"], max_retries=0)
    try:
        hurried.videos.list()
    except openai.RateLimitError:
        pass
    raises(openai.RateLimitError, lambda: hurried.videos.list())


check("videos: create with input_reference, retrieve until completed, download_content is a 720p H.264 MP4", create_and_download)
check("videos: list finds it", list_finds_it)
check("videos: remix", remix)
check("videos: delete, then not found", delete)
check("videos: typed errors (bad request, authentication, not found, insufficient quota, rate limit)", errors)
finish()
