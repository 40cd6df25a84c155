"""The event rules of the coding agents' APIs: Anthropic Messages and OpenAI Responses.

:mod:`.events` decodes each SSE event's JSON and hands it here by the stream's
:data:`~ttftscope.client.apis.Api`; a rule folds it into the stream's
:class:`~ttftscope.client.events.EventFold` as the chat rule does: the first event that
carries generated text, tool-call arguments or reasoning stamps ``first_content`` (TTFT),
usage becomes ``prompt_tokens``/``completion_tokens``/``cached_tokens``, the end event sets
``done``. Framing (``message_start``, ``content_block_start``, ``response.created``,
``response.output_item.added``, …) never counts as content, and an empty delta never does.

- Messages: ``content_block_delta`` with a ``text``/``partial_json``/``thinking`` delta is
  content; ``message_start`` carries the input tokens, ``message_delta`` the output tokens
  and the stop reason; ``message_stop`` ends. Anthropic counts cache reads and writes
  outside ``input_tokens``, so the prompt is their sum (vLLM reports them so too).
- Responses: any ``*.delta`` event with a non-empty ``delta`` string is content;
  ``response.completed`` (or ``response.incomplete``) carries ``response.usage`` and ends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ttftscope.client.classify import RequestFailure, server_text
from ttftscope.errors import FailureKind
from ttftscope.records import clean_text

if TYPE_CHECKING:  # events imports this module for its rules: the class is only a type here
    from ttftscope.client.events import EventFold

__all__ = [
    "error_message",
    "mid_stream_error",
    "on_messages_event",
    "on_responses_event",
    "read_usage",
    "token_count",
]

# Anthropic delta fields that hold generated content (signature_delta's does not)
_MESSAGES_CONTENT = ("text", "partial_json", "thinking")
_RESPONSES_END = ("response.completed", "response.incomplete")


def token_count(value: object) -> int | None:
    """A usage count, or None when it is no count (outside 0..2**63, a bool, a string).

    >>> token_count(31), token_count(True), token_count(-1), token_count("31")
    (31, None, None, None)
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    return None


def mid_stream_error(message: object, url: str) -> RequestFailure:
    """The failure of a stream whose server reported an error after accepting the request.

    >>> mid_stream_error("Overloaded", "u").message
    'u reported an error mid-stream: Overloaded'
    """
    said = "(no message)" if message is None or message == "" else server_text(message)
    return RequestFailure(
        FailureKind.STREAM_ERROR,
        f"{url} reported an error mid-stream: {said}",
        hint="the request was accepted but failed while generating; check the server's log",
    )


def error_message(obj: dict[str, Any]) -> object:
    """The message of an error event: ``error.message``, ``error`` or ``message``.

    >>> error_message({"error": {"message": "busy"}}), error_message({"message": "busy"})
    ('busy', 'busy')
    """
    err = obj.get("error")
    if isinstance(err, dict):
        return err.get("message", err)
    return err or obj.get("message")


def _content(fold: EventFold, piece: object, *, text: bool) -> None:
    if not (isinstance(piece, str) and piece):
        return
    fold.arrived("first_content")
    fold.content_events += 1
    if text:
        fold.text.append(clean_text(piece))  # JSON "\ud800" escapes: no UTF-8 form


def _model(fold: EventFold, holder: object) -> None:
    if isinstance(holder, dict) and holder.get("model") and fold.model is None:
        fold.model = server_text(holder["model"], 200)


def read_usage(fold: EventFold, usage: object, prompt: str, completion: str, details: str) -> None:
    """Token counts from an OpenAI-shaped usage object, by its field names (chat:
    ``prompt_tokens``, ``completion_tokens``, ``prompt_tokens_details``; Responses:
    ``input_tokens``, ``output_tokens``, ``input_tokens_details``)."""
    if not isinstance(usage, dict):
        return
    fold.prompt_tokens = token_count(usage.get(prompt))
    fold.completion_tokens = token_count(usage.get(completion))
    cached = usage.get(details)
    if isinstance(cached, dict):
        fold.cached_tokens = token_count(cached.get("cached_tokens"))


def _anthropic_usage(usage: object, fold: EventFold) -> None:
    if not isinstance(usage, dict):
        return
    uncached = token_count(usage.get("input_tokens"))
    if uncached is not None:
        read = token_count(usage.get("cache_read_input_tokens"))
        written = token_count(usage.get("cache_creation_input_tokens"))
        fold.prompt_tokens = uncached + (read or 0) + (written or 0)
        if read is not None:
            fold.cached_tokens = read
    output = token_count(usage.get("output_tokens"))
    if output is not None:
        fold.completion_tokens = output


def on_messages_event(obj: dict[str, Any], fold: EventFold) -> bool:
    """Fold one Anthropic Messages event; False stops reading (an error event).

    >>> from ttftscope.client.events import EventFold
    >>> f = EventFold(url="u", api="messages")
    >>> on_messages_event({"type": "message_start", "message": {"usage": {
    ...     "input_tokens": 5, "cache_read_input_tokens": 90}}}, f)
    True
    >>> _ = on_messages_event({"type": "content_block_delta",
    ...                        "delta": {"type": "text_delta", "text": "Hi"}}, f)
    >>> _ = on_messages_event({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
    ...                        "usage": {"output_tokens": 7}}, f)
    >>> _ = on_messages_event({"type": "message_stop"}, f)
    >>> f.prompt_tokens, f.cached_tokens, f.completion_tokens, f.text, f.finish_reason, f.done
    (95, 90, 7, ['Hi'], 'end_turn', True)
    """
    kind = obj.get("type")
    if kind == "error" or isinstance(obj.get("error"), dict):
        fold.failure = mid_stream_error(error_message(obj), fold.url)
        return False
    if kind == "message_start":
        message = obj.get("message")
        _model(fold, message)
        _anthropic_usage(message.get("usage") if isinstance(message, dict) else None, fold)
    elif kind == "content_block_delta":
        delta = obj.get("delta")
        if isinstance(delta, dict):
            piece = next((delta[k] for k in _MESSAGES_CONTENT if delta.get(k)), None)
            _content(fold, piece, text=delta.get("type") == "text_delta")
    elif kind == "message_delta":
        _anthropic_usage(obj.get("usage"), fold)
        delta = obj.get("delta")
        if isinstance(delta, dict) and delta.get("stop_reason"):
            fold.finish_reason = server_text(delta["stop_reason"], 200)
    elif kind == "message_stop":
        fold.done = True
    return True


def _responses_end(response: object, fold: EventFold) -> None:
    fold.done = True
    if not isinstance(response, dict):
        return
    _model(fold, response)
    usage = response.get("usage")
    read_usage(fold, usage, "input_tokens", "output_tokens", "input_tokens_details")
    why = response.get("incomplete_details")
    reason = why.get("reason") if isinstance(why, dict) else None
    if reason or response.get("status"):
        fold.finish_reason = server_text(reason or response["status"], 200)


def on_responses_event(obj: dict[str, Any], fold: EventFold) -> bool:
    """Fold one OpenAI Responses event; False stops reading (an error or a failed response).

    >>> from ttftscope.client.events import EventFold
    >>> f = EventFold(url="u", api="responses")
    >>> _ = on_responses_event({"type": "response.output_text.delta", "delta": "Hi"}, f)
    >>> on_responses_event({"type": "response.completed", "response": {"status": "completed",
    ...     "usage": {"input_tokens": 95, "output_tokens": 7,
    ...               "input_tokens_details": {"cached_tokens": 64}}}}, f)
    True
    >>> f.prompt_tokens, f.cached_tokens, f.completion_tokens, f.text, f.finish_reason, f.done
    (95, 64, 7, ['Hi'], 'completed', True)
    """
    kind = obj.get("type")
    response = obj.get("response")
    if kind == "error" or isinstance(obj.get("error"), dict):
        fold.failure = mid_stream_error(error_message(obj), fold.url)
        return False
    if kind == "response.failed":
        said = error_message(response) if isinstance(response, dict) else None
        fold.failure = mid_stream_error(said, fold.url)
        return False
    if kind in _RESPONSES_END:
        _responses_end(response, fold)
    elif isinstance(kind, str) and kind.endswith(".delta"):
        _content(fold, obj.get("delta"), text=kind == "response.output_text.delta")
    elif kind == "response.created":
        _model(fold, response)
    return True
