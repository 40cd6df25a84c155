"""Chat-template rendering as transformers' ``apply_chat_template`` does it, encoded incrementally.

Rendering: a sandboxed jinja2 environment with ``trim_blocks`` and ``lstrip_blocks``, the
``loopcontrols`` extension, a ``{% generation %}`` block that renders its body, the ``tojson``
filter without HTML escaping, and the ``raise_exception`` / ``strftime_now`` globals; variables
``messages``, ``tools``, ``documents``, ``add_generation_prompt``, ``bos_token``, ``eos_token`` and
any extra keyword. Templates may rewrite earlier turns (reasoning stripped from old assistant
turns, a generation prompt replaced by the answer), so the session never assumes appends: the
:class:`~ttftscope.tokenization.incremental.IncrementalEncoder` compares each rendered prompt
with the previous one by longest common prefix.

>>> s = ChatSession(qwen2_tok)  # a loaded tokenizer with a chat template (load_tokenizer)
>>> s.encode([{"role": "user", "content": "hi"}])[:3]
[151644, 8948, 198]
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from ttftscope.errors import TokenizerError
from ttftscope.tokenization.incremental import EncoderStats, IncrementalEncoder


class _Generation(jinja2.ext.Extension):
    """``{% generation %}…{% endgeneration %}`` (assistant masks in transformers): body only."""

    tags = {"generation"}  # noqa: RUF012  (jinja2 reads this class attribute)

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        call = self.call_method("_body")
        return jinja2.nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return str(caller())


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _template_dict(*args: Any, **kwargs: Any) -> dict[Any, Any]:
    return dict(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """``namespace()`` that refuses underscore names (no way to CPython internals)."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, rest = args[0], args[1:]
        attrs = dict(*rest, **kwargs)
        for name in attrs:
            _Namespace._check(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check(name: object) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore attributes on a namespace: {name!r}"
            )


_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")


def _alias_reasoning(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """Expose a message's reasoning under every name templates read (as transformers does).

    Messages without reasoning are passed as they are: the sandbox cannot change them.
    """
    reasoning = next((message[k] for k in _REASONING_FIELDS if message.get(k) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}


class _Sandbox(ImmutableSandboxedEnvironment):
    """transformers' sandbox, with ``message.role`` on a plain dict answered directly.

    The sandbox's ``getattr`` tries the attribute first and indexes only after that fails.
    On a dict it fails for certain unless ``dict`` has the name (instances have no others),
    and raising it costs more than the lookup; skipping it gives the same value, or the same
    undefined for a missing key.
    """

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is not dict or hasattr(dict, attribute):
            return super().getattr(obj, attribute)
        try:
            return obj[attribute]
        except KeyError:
            return self.undefined(obj=obj, name=attribute)


@lru_cache(maxsize=32)
def compile_template(source: str) -> jinja2.Template:
    """Compile a chat template the way transformers does (cached by source text).

    >>> compile_template("{{ messages[0]['content'] }}").render(messages=[{"content": "x"}])
    'x'
    """
    env = _Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_Generation, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _template_dict
    env.globals["namespace"] = _Namespace
    try:
        return env.from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TokenizerError(
            f"chat template does not compile: {exc.message} (template line {exc.lineno})",
            hint="fix the template or pass chat_template= explicitly",
        ) from exc


class ChatRenderer:
    """A chat template bound to a tokenizer's special tokens: conversation in, prompt out.

    Rendering is what ``apply_chat_template(..., tokenize=False)`` does; one renderer serves
    any number of conversations (a gateway keeps one per upstream and an encoder per session).

    >>> r = ChatRenderer(None, "{% for m in messages %}{{ m['content'] }}{% endfor %}")
    >>> r.render([{"role": "user", "content": "hi"}])
    'hi'
    """

    def __init__(self, tok: Any, chat_template: str | None = None, **template_vars: Any) -> None:
        source = chat_template if chat_template is not None else getattr(tok, "chat_template", None)
        if not source:
            raise TokenizerError(
                f"tokenizer {getattr(tok, 'name', tok)!r} has no chat template",
                hint="pass chat_template=... or load a model folder with tokenizer_config.json "
                "or chat_template.jinja",
            )
        self.source: str = source
        self.template = compile_template(source)
        self.variables: dict[str, Any] = {
            "bos_token": getattr(tok, "bos_token", None) or "",
            "eos_token": getattr(tok, "eos_token", None) or "",
            **template_vars,
        }

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text, as ``apply_chat_template(..., tokenize=False)`` renders it.

        >>> ChatRenderer(None, "{{ messages|length }}").render([{"role": "user"}])
        '1'
        """
        values = {**self.variables, **kwargs}
        return self.template.render(
            messages=[_alias_reasoning(m) for m in messages],
            tools=tools,
            documents=documents,
            add_generation_prompt=add_generation_prompt,
            **values,
        )


class ChatSession:
    """Render conversations with a chat template and encode them incrementally.

    ``encode(messages)`` equals ``tok.encode(render(messages))``; special-token text in the
    rendered prompt becomes special ids, as vLLM tokenizes a rendered chat prompt.

    >>> from ttftscope import ChatSession
    >>> s = ChatSession(qwen2_tok)  # load_tokenizer(<a model folder with a chat template>)
    >>> turn = [{"role": "user", "content": "hi"}]
    >>> s.encode(turn) == s.full_encode(turn)
    True
    >>> turn += [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "And?"}]
    >>> s.encode(turn) == s.full_encode(turn), s.stats.path, s.stats.last_reused_tokens
    (True, 'append', 17)
    """

    def __init__(
        self,
        tok: Any,
        chat_template: str | None = None,
        *,
        add_special_tokens: bool = False,
        shadow_every: int | None = None,
        **template_vars: Any,
    ) -> None:
        self.tok = tok
        self.renderer = ChatRenderer(tok, chat_template, **template_vars)
        self.encoder = IncrementalEncoder(
            tok, add_special_tokens=add_special_tokens, shadow_every=shadow_every
        )
        self.last_prompt: str = ""

    @property
    def stats(self) -> EncoderStats:
        """Counters of the underlying incremental encoder."""
        return self.encoder.stats

    def render(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        documents: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> str:
        """The prompt text (see :meth:`ChatRenderer.render`)."""
        return self.renderer.render(messages, add_generation_prompt, tools, documents, **kwargs)

    def encode(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> list[int]:
        """Render, then encode incrementally against the previous prompt of this session.

        >>> ChatSession(qwen2_tok).encode([{"role": "user", "content": "hi"}])[-9:]
        [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
        """
        self.last_prompt = self.render(messages, add_generation_prompt, tools, **kwargs)
        return self.encoder.encode(self.last_prompt)

    def full_encode(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> list[int]:
        """Reference: render and encode from scratch (no cache).

        >>> ChatSession(qwen2_tok).full_encode([{"role": "user", "content": "hi"}])[-9:]
        [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
        """
        text = self.render(messages, add_generation_prompt, **kwargs)
        ids: list[int] = self.tok.encode(text, add_special_tokens=self.encoder.add_special_tokens)
        return ids

    def reset(self) -> None:
        """Forget the previous prompt; the next call is a full encode."""
        self.encoder.reset()
        self.last_prompt = ""
