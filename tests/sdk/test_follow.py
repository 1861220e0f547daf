"""SSE parsing and ``follow``: keep-alives, multi-line data, reconnecting from the cursor."""

from __future__ import annotations

import json

import httpx
import pytest
from sdk_fakes import TOKEN, URL, chunk, event, job, sse_response

from bourse.core.errors import NotFound
from bourse.protocol.api import JobView, LogChunkView
from bourse.sdk.client import Client
from bourse.sdk.errors import ProtocolError, Unreachable
from bourse.sdk.logs import LogDecoder
from bourse.sdk.sse import LogFollower, SseEvent, SseParser


def parse(text: str) -> list[SseEvent]:
    parser = SseParser()
    events = [parser.feed(line) for line in text.split("\n")]
    return [e for e in events if e is not None]


@pytest.mark.parametrize(("text", "expected"), [
    ("event: chunk\ndata: {}\n\n", [SseEvent("chunk", "{}")]),
    (": keep-alive\n\n:\n\nevent: end\ndata: x\n\n", [SseEvent("end", "x")]),
    ("data: a\ndata: b\ndata:\n\n", [SseEvent("message", "a\nb\n")]),
    ("data:no-space\n\n", [SseEvent("message", "no-space")]),
    ("data:  two spaces\n\n", [SseEvent("message", " two spaces")]),
    ("event: job\n\n", []),  # no data: dropped, and the type does not leak into the next
    ("event: job\n\ndata: x\n\n", [SseEvent("message", "x")]),
    ("id: 7\nretry: 10\nfoo: bar\ndata: x\n\n", [SseEvent("message", "x", "7")]),
    ("data: unterminated", []),
])
def test_parser(text: str, expected: list[SseEvent]) -> None:
    assert parse(text) == expected


def test_follower_tracks_cursor_and_end() -> None:
    follower = LogFollower(after=5)
    stream = (": ping\n" + event("chunk", chunk(5, "old")) + event("chunk", chunk(6, "new"))
              + event("job", job(state="RUNNING")) + event("end", job(state="SUCCEEDED")))
    items = [i for line in stream.split("\n") if (i := follower.feed(line)) is not None]
    assert [type(i).__name__ for i in items] == ["LogChunkView", "JobView", "JobView"]
    assert (follower.cursor, follower.done) == (6, True)


def test_follower_rejects_garbage() -> None:
    follower = LogFollower()
    follower.feed("event: chunk")
    follower.feed("data: {\"cursor\": 1}")
    with pytest.raises(ProtocolError, match="chunk"):
        follower.feed("")


def test_multi_line_json_data() -> None:
    body = json.dumps(job(state="SUCCEEDED"), indent=1).split("\n")
    follower = LogFollower()
    lines = ["event: end", *(f"data: {line}" for line in body), ""]
    items = [i for line in lines if (i := follower.feed(line)) is not None]
    assert isinstance(items[0], JobView) and items[0].state == "SUCCEEDED"


class Script:
    """A follow endpoint answering connection after connection from a list."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.afters: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/jobs/j1/logs/follow"
        assert request.headers["accept"] == "text/event-stream"
        self.afters.append(request.url.params["after"])
        return self.answers.pop(0)


def follow(script: Script, after: int = 0) -> list[LogChunkView | JobView]:
    client = Client(URL, TOKEN, transport=httpx.MockTransport(script))
    client.reconnect_delays = (0.0, 0.0, 0.0)
    return list(client.follow("j1", after=after))


def texts(items: list[LogChunkView | JobView]) -> list[str]:
    decoder = LogDecoder()
    return [decoder.decode(i) if isinstance(i, LogChunkView) else i.state for i in items]


def test_follow_to_the_end_with_keep_alives() -> None:
    script = Script(sse_response([
        ": keep-alive\n\n", event("job", job(state="RUNNING")),
        event("chunk", chunk(1, "hello\n")), ":\n\n",
        event("chunk", chunk(2, "oops\n", "stderr")),
        event("end", job(state="SUCCEEDED", exit_code=0)),
        event("chunk", chunk(3, "after the end is ignored")),
    ]))
    assert texts(follow(script, after=0)) == ["RUNNING", "hello\n", "oops\n", "SUCCEEDED"]
    assert script.afters == ["0"]


def test_events_split_across_network_reads() -> None:
    whole = event("chunk", chunk(1, "hi")) + event("end", job(state="SUCCEEDED"))
    parts = [whole[i:i + 7] for i in range(0, len(whole), 7)]
    assert texts(follow(Script(sse_response(parts)))) == ["hi", "SUCCEEDED"]


def test_crlf_line_endings() -> None:
    body = (event("chunk", chunk(1, "hi")) + event("end", job(state="FAILED"))).replace(
        "\n", "\r\n")
    assert texts(follow(Script(sse_response([body])))) == ["hi", "FAILED"]


def test_reconnects_from_the_last_cursor_after_a_drop() -> None:
    script = Script(
        sse_response([event("chunk", chunk(1, "a")), event("chunk", chunk(2, "b"))], error=True),
        sse_response([event("chunk", chunk(2, "b")), event("chunk", chunk(3, "c")),
                      event("end", job(state="SUCCEEDED"))]),
    )
    assert texts(follow(script)) == ["a", "b", "c", "SUCCEEDED"]
    assert script.afters == ["0", "2"]


def test_reconnects_when_the_stream_ends_without_end() -> None:
    script = Script(sse_response([event("chunk", chunk(4, "x"))]),
                    sse_response([event("end", job(state="CANCELLED"))]))
    assert texts(follow(script, after=3)) == ["x", "CANCELLED"]
    assert script.afters == ["3", "4"]


def test_half_event_before_a_drop_is_discarded() -> None:
    script = Script(sse_response(["event: chunk\ndata: {\"curs"], error=True),
                    sse_response([event("end", job(state="SUCCEEDED"))]))
    assert texts(follow(script)) == ["SUCCEEDED"]


def test_gives_up_after_repeated_failures_without_progress() -> None:
    script = Script(*[sse_response([], error=True) for _ in range(4)])
    with pytest.raises(Unreachable, match=URL):
        follow(script)
    assert len(script.afters) == 4  # the first try and three reconnects


def test_progress_resets_the_failure_count() -> None:
    answers = []
    for n in range(1, 6):
        answers += [sse_response([], error=True), sse_response([": ping\n"], error=True),
                    sse_response([event("chunk", chunk(n, str(n)))], error=True)]
    script = Script(*answers, sse_response([event("end", job(state="SUCCEEDED"))]))
    assert texts(follow(script))[-2:] == ["5", "SUCCEEDED"]


def test_http_errors_are_not_retried() -> None:
    script = Script(httpx.Response(404, json={"error": "no job j1"}))
    with pytest.raises(NotFound, match="no job j1"):
        follow(script)
    assert len(script.afters) == 1


def test_server_errors_are_retried() -> None:
    script = Script(httpx.Response(503, text="restarting"),
                    sse_response([event("end", job(state="SUCCEEDED"))]))
    assert texts(follow(script)) == ["SUCCEEDED"]


def test_utf8_split_between_chunks_is_decoded_whole() -> None:
    raw = "naïve ✓\n".encode()
    script = Script(sse_response([
        event("chunk", chunk(1, raw[:3])), event("chunk", chunk(2, b"err", "stderr")),
        event("chunk", chunk(3, raw[3:9])), event("chunk", chunk(4, raw[9:])),
        event("end", job(state="SUCCEEDED")),
    ]))
    assert "".join(t for t in texts(follow(script)) if t != "SUCCEEDED") == "naerrïve ✓\n"


def test_decoder_flushes_a_truncated_character() -> None:
    decoder = LogDecoder()
    assert decoder.decode(LogChunkView.model_validate(chunk(1, "é".encode()[:1]))) == ""
    assert decoder.finish() == [("stdout", "\ufffd")]


def test_a_members_follow_asks_for_its_rank_again_after_a_drop() -> None:
    answers = [sse_response([event("chunk", chunk(3, "a", rank=1))], error=True),
               sse_response([event("end", job(state="SUCCEEDED"))])]
    asked: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        asked.append(dict(request.url.params))
        return answers.pop(0)

    client = Client(URL, TOKEN, transport=httpx.MockTransport(handler))
    client.reconnect_delays = (0.0,)
    items = list(client.follow("j1", rank=1))
    assert [i.rank for i in items if isinstance(i, LogChunkView)] == [1]
    assert asked == [{"after": "0", "rank": "1"}, {"after": "3", "rank": "1"}]


def test_members_bytes_are_decoded_apart() -> None:
    """A character cut at a chunk's end is finished by the next chunk of the same member,
    never by another member's."""
    raw = "é\n".encode()
    decoder = LogDecoder()
    texts = [decoder.decode(LogChunkView.model_validate(c)) for c in (
        chunk(1, raw[:1], rank=0), chunk(2, raw[:1], rank=1), chunk(3, raw[1:], rank=1),
        chunk(4, raw[1:], rank=0))]
    assert texts == ["", "", "é\n", "é\n"]
