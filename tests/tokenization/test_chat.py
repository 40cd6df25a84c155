"""ChatSession: renders like transformers' apply_chat_template and encodes exactly.

Expected ids come from transformers' renderer and a full encode, never from the session's own
renderer; each step also checks the incremental path taken (:mod:`tests.tokenization.exact`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jinja2
import pytest
from transformers.utils import chat_template_utils

from tests.tokenization.exact import expected_paths
from ttftscope.agenttext import agent_turn
from ttftscope.errors import TokenizerError
from ttftscope.tokenization.chat import ChatSession, compile_template
from ttftscope.tokenization.loader import Tokenizer

# Strips reasoning from every assistant turn but the last, like Qwen3-style templates: earlier
# text of the prompt changes between calls, so the encoder sees edits, not appends.
THINK_TEMPLATE = """\
{%- for m in messages %}
{%- if m.role == 'assistant' and not loop.last %}
{%- set c = m.content.split('</think>')[-1].lstrip('\\n') %}
{%- else %}{% set c = m.content %}{% endif %}
<|im_start|>{{ m.role }}
{{ c }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
<think>
{% endif %}"""


def _conversation(turns: int) -> list[list[dict[str, Any]]]:
    """Successive message lists of an agent session (each a full request)."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Use tools. Be brief."},
        {"role": "user", "content": "Fix the failing test in src/cache.py, please."},
    ]
    out = [list(msgs)]
    for i in range(turns):
        reply = f"<think>\nstep {i}: look</think>\n\nRunning."
        msgs.append({"role": "assistant", "content": reply})
        msgs.append({"role": "user", "content": agent_turn(i, chars=400 + 37 * i)})
        out.append(list(msgs))
    return out


def _transformers_render(template: str, messages: list[dict[str, Any]], **kw: Any) -> str:
    rendered: Any = chat_template_utils.render_jinja_template(
        conversations=[messages], chat_template=template, **kw
    )
    return str(rendered[0][0])  # (prompts, generation indices): the one prompt


def _encode_checked(
    session: ChatSession, template: str, messages: list[dict[str, Any]], gen: bool = True
) -> list[int]:
    """The session's ids, checked against transformers' render + a full encode, and its path."""
    before, fallbacks = session.last_prompt or None, session.stats.full_fallbacks
    ids = session.encode(messages, add_generation_prompt=gen)
    tok = session.tok
    want = _transformers_render(
        template,
        messages,
        add_generation_prompt=gen,
        bos_token=tok.bos_token or "",
        eos_token=tok.eos_token or "",
    )
    assert session.last_prompt == want
    assert ids == tok.encode(want)
    allowed = expected_paths(before, want)
    if allowed is not None:
        assert session.stats.path in allowed, (session.stats.path, allowed)
        assert session.stats.full_fallbacks == fallbacks
    return ids


@pytest.mark.parametrize("family", ["o200k", "qwen2", "llama3"])
def test_growing_conversation_exact_and_same_render_as_transformers(
    family: str, load_family: Callable[[str], Tokenizer]
) -> None:
    tok = load_family(family)
    assert tok.chat_template, f"fixture {family} should carry a chat template"
    session = ChatSession(tok)
    for msgs in _conversation(8):
        for gen in (True, False):
            _encode_checked(session, tok.chat_template, msgs, gen)
    assert session.stats.path in {"append", "edit", "same"}
    assert session.stats.reused_tokens > 0
    assert session.stats.full_fallbacks == 0


def test_template_that_rewrites_earlier_turns(load_family: Callable[[str], Tokenizer]) -> None:
    tok = load_family("qwen2")
    session = ChatSession(tok, THINK_TEMPLATE)
    paths = []
    for msgs in _conversation(10):
        _encode_checked(session, THINK_TEMPLATE, msgs)
        paths.append(session.stats.path)
        # the generation prompt is replaced by the assistant's answer in the next request
        answered = [*msgs, {"role": "assistant", "content": "<think>\nhm</think>\n\nDone."}]
        _encode_checked(session, THINK_TEMPLATE, answered, gen=False)
    assert "edit" in paths  # the stripped reasoning really changed earlier text
    assert session.stats.full_fallbacks == 0


@pytest.mark.parametrize("family", ["llama2", "mistral_v3", "tekken", "gpt2"])
def test_chatml_on_other_families(family: str, load_family: Callable[[str], Tokenizer]) -> None:
    tok = load_family(family)
    session = ChatSession(tok, THINK_TEMPLATE)
    for msgs in _conversation(5):
        _encode_checked(session, THINK_TEMPLATE, msgs)
    assert session.stats.full_fallbacks == 0


def test_render_helpers_match_transformers() -> None:
    tmpl = (
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
        "{% if m.role not in ['user', 'assistant'] %}{{ raise_exception('bad role') }}{% endif %}"
        "{{ m.content }}{% endfor %}{{ tools | tojson }}|{{ ns.n }}"
        "{% generation %}G{% endgeneration %}"
    )
    msgs = [{"role": "user", "content": "<a> & é"}]
    tools = [{"name": "f", "description": "x < y"}]
    ours = compile_template(tmpl).render(messages=msgs, tools=tools)
    assert ours == '<a> & é[{"name": "f", "description": "x < y"}]|1G'
    assert ours == _transformers_render(tmpl, msgs, tools=tools)
    with pytest.raises(jinja2.TemplateError, match="bad role"):
        compile_template(tmpl).render(messages=[{"role": "tool", "content": ""}], tools=None)
    with pytest.raises(jinja2.exceptions.SecurityError):
        compile_template("{% set ns = namespace() %}{% set ns._x = 1 %}").render()


def test_attribute_access_on_messages_is_transformers_own() -> None:
    """``m.x`` on a message dict: present, missing, a dict method, a shadowing key, unsafe."""
    tmpl = (
        "{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m.name is defined }}"
        "|{{ m.tool_calls | default('none') }}|{{ m.items() | list | length }}"
        "|{{ m.get('role') }}|{{ m.keys is defined }}{% endfor %}"
    )
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "keys": 1},
    ]
    ours = compile_template(tmpl).render(messages=msgs)
    assert ours == _transformers_render(tmpl, msgs)
    assert ours.startswith("user:a|False|none|2|user|True")
    unsafe = compile_template("{{ m.__class__.__subclasses__() }}")
    with pytest.raises(jinja2.exceptions.SecurityError):  # the sandbox still guards dunders
        unsafe.render(m={"role": "user"})


def test_errors_name_the_problem(load_family: Callable[[str], Tokenizer]) -> None:
    tok = load_family("llama2")
    if not tok.chat_template:
        with pytest.raises(TokenizerError, match="no chat template"):
            ChatSession(tok)
    with pytest.raises(TokenizerError, match="does not compile"):
        ChatSession(tok, "{% for %}")
