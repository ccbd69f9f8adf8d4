"""Turn stored messages into the request shapes of model APIs, and back.

Example:
    from chatledger import Message
    from chatledger.convert import (
        from_openai, to_anthropic, to_openai, to_openai_responses
    )

    history = [Message.system("Be brief."), Message.user("Weather in Rome?")]
    to_openai(history)            # chat.completions.create(model=..., messages=...)
    to_openai_responses(history)  # responses.create(model=..., input=...)
    to_anthropic(history)         # messages.create(model=..., max_tokens=512, **...)
    from_openai(to_openai(history)) == history   # and back

Three shapes, each both ways: OpenAI Chat Completions (:func:`to_openai`,
:func:`from_openai`), OpenAI Responses (:func:`to_openai_responses`,
:func:`from_openai_responses`) and Anthropic Messages (:func:`to_anthropic`,
:func:`from_anthropic`). Every converter is pure and loses nothing without
saying so here or in its docstring. ``id``, ``created_at`` and ``metadata``
are storage fields and are not sent (but for the reserved keys below); the
``content`` of a tool message that carries tool responses is not sent either
(the responses are what the model reads). Anything else the target cannot
carry raises :class:`UnsupportedContentError` instead of being dropped; on the
way in the error names the item by its index and field, such as
``messages[3].content[1].image_url.file_id``, and on the way out the message
by its index, such as ``messages[2].metadata['openai']['name']``.

What a shape carries beyond a message's fields
----------------------------------------------

The ``from_`` functions keep it under a reserved metadata key, and the ``to_``
functions of the same API write it back: ``metadata["openai"]`` for both
OpenAI shapes, ``metadata["anthropic"]`` for Anthropic's. Each is a dict of
the message's own fields and of ``media``, ``calls`` and ``outputs``: lists of
one dict per media, tool call and tool response, in their order. A key is
written only when it holds something, and not when it holds what the ``to_``
function writes by itself. The keys of ``metadata["openai"]``:

- ``role``: ``"developer"`` on a system message read from a developer message.
  It stays a system message, for the window's rules too. ``"function"`` on
  the tool message a deprecated ``function`` message is read as (it holds no
  tool response: a ``function_call`` has no call id).
- ``name``: the participant name of a Chat Completions message (system,
  developer, user or assistant), or a function message's name. The Responses
  shape has no place for it.
- ``refusal``: an assistant's refusal text (the Chat Completions field or
  part, a Responses ``refusal`` part).
- ``audio``, ``function_call``: a Chat Completions assistant's, whole.
- ``text_parts``: the lengths of the text parts a content came as, which
  ``content`` holds joined by a blank line.
- ``parts``: the order of a Chat Completions content's parts (``"text"``,
  ``"media"``, ``"refusal"``) when it is not text then media, and in its
  place each part a message has no field for, whole (a file by id).
- ``prompt_cache_breakpoint``: one entry per text part, ``None`` for a part
  with none.
- ``empty``: the Chat Completions fields given holding nothing (``None``,
  ``""``, ``[]``), written back so; ``absent``: ``["content"]`` for an
  assistant message given without content.
- ``id``, ``status``, ``phase``: a Responses message item's (the ``id`` is
  also the message's id).
- ``annotations``, ``logprobs``: one list per text part of a Responses output
  message, ``None`` for a part with none.
- ``reasoning``: the Responses reasoning items before the assistant's message
  and call items, whole (``encrypted_content`` included).
- ``media[i]``: ``detail``, of an image (either shape) or a Responses file;
  ``prompt_cache_breakpoint`` of a Chat Completions part.
- ``calls[i]``: a Responses call item's other fields (``id``, ``status``,
  ``namespace``, ``caller``, ``async``); ``spelled``: ``"custom"`` for a
  Chat Completions custom tool call spelled with ``custom``.
- ``outputs[i]``: ``text_parts`` (and ``prompt_cache_breakpoint``) of a tool
  output that came as text parts; a Responses output item's other fields
  (``id``, ``status``, ``name``, ``namespace``, ``caller``), and its ``type``
  when it is not the one the call it answers implies.

The keys of ``metadata["anthropic"]``, each kept when ``to_anthropic`` would
not write it by itself:

- ``cache_control``, ``citations``: the message's text block's (a system
  message's block included); ``empty``: its fields given holding nothing.
- ``blocks``: the message's blocks in order, ``"text"``, ``"media"``,
  ``"call"`` standing for its own, and in their place whole the blocks a
  message has no field for: thinking and redacted thinking, server tool use
  and the server tools' results, search results, container uploads, images
  and documents by file id, documents of content blocks. Kept too for a
  turn of one text block, which is otherwise written as a str.
- ``string``: a turn given as an empty str; ``new_turn``: a message that
  starts a turn after one of the same role; ``in_messages``: a system
  message of a ``system`` turn of ``messages`` (not of ``system``).
- ``media[i]``: ``cache_control``, a document's ``title``, ``context`` and
  ``citations``, an image's ``transformations``, and ``empty``.
- ``calls[i]``: ``cache_control``, ``caller``, ``toolset_name``, ``empty``.
- ``outputs[i]``: ``cache_control``, ``is_error``, ``toolset_name``,
  ``empty``, ``text_parts``, ``blocks`` (its text blocks and, whole, the
  others: images, documents, search results, tool references, text blocks
  with fields of their own) and ``absent`` (``["content"]``: given without).

A ``to_`` function refuses a reserved key that holds anything else (a key it
does not know, a value of the wrong type, per-item lists of the wrong
length), so nothing written by something else is sent or skipped unnoticed.
It does not send the other API's key: a name, a refusal, a detail or
reasoning items do not go to Anthropic, nor ``cache_control`` to OpenAI.
:func:`to_openai` does not send what only the Responses shape carries;
:func:`to_openai_responses` does not send how a Chat Completions content was
spelled (``parts`` order, ``empty``, ``absent``, ``spelled``, breakpoints)
and refuses the ``audio``, ``function_call`` and parts kept whole it has no
place for.

Hostile input
-------------

Hostile input gets the same error, never a builtin one from deep inside: a
wrong type, a value that is not JSON where JSON is kept (a set, bytes, a
non-str key, ``NaN``, any other object in a ``tool_use`` input or a kept
field), and JSON nested deeper than
:data:`~chatledger.messages.MAX_METADATA_DEPTH` levels where it will sit in
the metadata, measured before anything recurses through it (tool-call
arguments too, when :func:`to_anthropic` parses them). A message the
converters build is a :class:`~chatledger.Message` and refuses what it always
refuses with :class:`~chatledger.InvalidMessageError`.

Round trips: ``from_X(to_X(messages)) == messages`` (``Message`` equality)
hold for every history the shape can carry. ``to_openai(from_openai(m)) ==
m`` holds for every Chat Completions message list, and
``to_anthropic(from_anthropic(r)) == r`` for every Anthropic request, that
the SDKs' types describe, given as dicts and lists: what a converter cannot
write back exactly it refuses, naming the place. For the Responses shape,
``to_openai_responses(from_openai_responses(items)) == items`` holds for
items written as ``to_openai_responses`` writes them. The docstrings of the
``from_`` functions say which histories and requests those are.

For converters of one's own, such as the framework bridges: :func:`loads_value`
and :func:`dumps_value` read and write JSON text by the rules chatledger keeps
JSON by (the depth limit, no ``NaN``), and :func:`thaw` turns a message's
frozen metadata into plain ``dict`` and ``list`` values.
"""

from __future__ import annotations

from chatledger.codec import dumps_value, loads_value, thaw
from chatledger.convert_anthropic import from_anthropic, to_anthropic
from chatledger.convert_openai import from_openai, to_openai
from chatledger.convert_responses import from_openai_responses, to_openai_responses
from chatledger.convert_shared import UnsupportedContentError

__all__ = [
    "UnsupportedContentError",
    "dumps_value",
    "from_anthropic",
    "from_openai",
    "from_openai_responses",
    "loads_value",
    "thaw",
    "to_anthropic",
    "to_openai",
    "to_openai_responses",
]
