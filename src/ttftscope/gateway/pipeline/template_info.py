"""What vLLM reads from a chat template: its variables, content format and developer role.

vLLM decides from the template's text and syntax tree how it passes message content (a
plain string, or OpenAI-style parts when the template loops over ``message.content``) and
whether developer messages stay developer; :mod:`.vllm_chat` needs the same answers, and
where they cannot be told for certain it sends the request as text.

>>> template_info("{{ messages[0]['content'] }}").content_format
'string'
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import jinja2.meta
from jinja2 import nodes

from ttftscope.errors import TokenizerError
from ttftscope.tokenization.chat import compile_template

_WHOLE_FILTERS = frozenset("tojson dictsort items list string pprint".split())
_WHOLE_ATTRS = frozenset({"items", "keys", "values"})
_SPECIAL_VARS = frozenset("pad_token unk_token sep_token cls_token mask_token".split())

Format = Literal["string", "openai"]


@dataclass(frozen=True)
class TemplateInfo:
    """What a template shows vLLM (see the module docstring)."""

    variables: frozenset[str]
    content_format: Format | None  # None: cannot be told for certain
    supports_developer: bool
    reads_thinking: bool
    problem: str = ""  # why the renderer cannot reproduce it ("" when it can)


@lru_cache(maxsize=32)
def template_info(source: str) -> TemplateInfo:
    """What vLLM reads from a template's text and syntax tree (cached by source)."""
    try:
        tree = compile_template(source).environment.parse(source)
    except TokenizerError as exc:
        return TemplateInfo(frozenset(), None, False, False, problem=str(exc))
    variables = frozenset(jinja2.meta.find_undeclared_variables(tree))
    specials = sorted(variables & _SPECIAL_VARS)  # transformers passes these, ChatRenderer not
    return TemplateInfo(
        variables=variables,
        content_format=_content_format(tree),
        supports_developer="'developer'" in source or '"developer"' in source,
        reads_thinking=_reads_thinking(tree),
        problem=f"the template reads {specials}" if specials else "",
    )


def _reads_thinking(tree: nodes.Template) -> bool:
    """Whether the template could see the "thinking" key ChatRenderer adds (vLLM has none).

    By name, or by dumping or iterating a whole message (``message | tojson``). Passing a
    whole message to a macro is not followed.
    """
    by_name = "thinking" in (n.value for n in tree.find_all(nodes.Const))
    if by_name or any(n.attr == "thinking" for n in tree.find_all(nodes.Getattr)):
        return True
    loops = tree.find_all(nodes.For)
    names = {_name(f.target) for f in loops if _name(_unwrap(f.iter)) == "messages"} - {""}
    subjects: list[Any] = [f.node for f in tree.find_all(nodes.Filter) if f.name in _WHOLE_FILTERS]
    subjects += [o for out in tree.find_all(nodes.Output) for o in out.nodes]
    calls = [c.node for c in tree.find_all(nodes.Call) if _attr(c.node) in _WHOLE_ATTRS]
    subjects += [getattr(c, "node", None) for c in calls]  # message.items()
    return any(
        _name(n) in names | {"messages"}
        or (isinstance(n, nodes.Getitem) and _name(n.node) == "messages")  # messages[0]
        or (_attr(n) in ("previtem", "nextitem") and _name(n.node) == "loop")  # loop.previtem
        for n in subjects
    )


def _attr(node: object) -> str:
    return node.attr if isinstance(node, nodes.Getattr) else ""


def _content_format(tree: nodes.Template) -> Format | None:
    """ "openai" if the template loops over message content, "string" if it cannot; else None.

    vLLM guesses from loops over ``message.content``, over a ``content`` variable or over a
    macro argument, and says "string" when its matcher meets a tuple target. Only the plain
    forms are certain here; the rest is None (pass through).

    >>> _content_format(jinja2.Environment().parse("{{ messages[0].content }}"))
    'string'
    >>> _content_format(jinja2.Environment().parse(
    ...     "{% for m in messages %}{% for p in m.content %}{% endfor %}{% endfor %}"))
    'openai'
    """
    loops = list(tree.find_all(nodes.For))
    in_macros = {id(f) for m in tree.find_all(nodes.Macro) for f in m.find_all(nodes.For)}
    message_vars = {_name(f.target) for f in loops if _name(_unwrap(f.iter)) == "messages"}
    certain = maybe = False
    targets: list[nodes.Node] = [
        a.target for a in tree.find_all(nodes.Assign) if _name(_unwrap(a.node))
    ]
    for loop in loops:
        it = _unwrap(loop.iter)
        if _content_key(it):
            hit = _name(getattr(it, "node", None)) in message_vars - {""}
        elif _name(it) == "content" or (_name(it) and id(loop) in in_macros):
            # vLLM matches a bare ``content`` only outside macros, and only unwrapped.
            hit = loop.iter is it and _name(it) == "content" and id(loop) not in in_macros
        else:
            continue
        certain, maybe = certain or hit, maybe or not hit
        targets.append(loop.target)
    targets += [f.target for f in loops if _name(_unwrap(f.iter))]
    if maybe or (certain and not all(_name(t) for t in targets)):
        return None
    return "openai" if certain else "string"


def _unwrap(node: nodes.Node) -> nodes.Node:
    """Strip filters, tests and slices (``messages[1:] | reverse``), as vLLM's matcher does."""
    while isinstance(node, nodes.Filter | nodes.Test | nodes.Getitem):
        inner = node.node
        if inner is None or (
            isinstance(node, nodes.Getitem) and not isinstance(node.arg, nodes.Slice)
        ):
            break
        node = inner
    return node


def _name(node: object) -> str:
    return node.name if isinstance(node, nodes.Name) else ""


def _content_key(node: nodes.Node) -> bool:
    if isinstance(node, nodes.Getattr):
        return node.attr == "content"
    arg = node.arg if isinstance(node, nodes.Getitem) else None
    return isinstance(arg, nodes.Const) and arg.value == "content"
