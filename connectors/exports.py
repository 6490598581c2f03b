"""Chat-assistant data exports: ChatGPT's and Claude's ``conversations.json``.

Both are one JSON list of conversations, read whole.

**ChatGPT** (Settings -> Data controls -> Export). A conversation holds ``title``,
``create_time`` (epoch seconds), ``conversation_id`` (or ``id``), ``current_node`` and ``mapping``:
node id -> ``{id, message, parent, children}``, a tree because an edited prompt or a regenerated
answer starts a branch. The conversation as the user last saw it is the path from the root to
``current_node``; only that path is read (a conversation without ``current_node`` reads the branch
that always follows the last child). A node's ``message`` has ``id``, ``author.role``
(``user``, ``assistant``, ``system``, ``tool``), ``author.name``, ``create_time`` and ``content``:
``{content_type: "text", parts: [...]}`` (text parts are joined; image and file parts are objects
and are left out), or ``{content_type: "code" | "execution_output" | ..., text: ...}``.

**Claude** (Settings -> Privacy -> Export data). A conversation holds ``uuid``, ``name``,
``created_at`` (ISO 8601), ``account.uuid`` and ``chat_messages``: ``{uuid, sender ("human" or
"assistant"), text, content: [{type: "text", text}, ...], created_at, attachments, files}``; the
text is ``text``, or the text parts of ``content`` when ``text`` is empty.

How a message becomes a canonical record (see ``connectors.records``): ``conversation_id`` is the
conversation's id, ``session_id`` the same, ``message_id`` the message's id, ``timestamp`` the
message's time (the conversation's when it has none), ``metadata`` holds the conversation title
(``{"title": ...}``). Claude's ``account.uuid`` is the ``user_id`` (one owner for an account's
conversations); ChatGPT exports name no account, so the owner is the conversation (pass the file
source's ``owner_id`` to gather them). Nodes without a message, and messages without text (a
hidden system prompt, an image alone, a tool call's empty body) are structure and are skipped.
A conversation or message of the wrong shape is a ``Refused`` value (a dead letter); it takes one
position like a message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skillstream.connectors.fileio import InputFile, open_binary
from skillstream.connectors.records import Refused
from skillstream.errors import InputError

Item = dict[str, Any] | Refused


def load_document(path: str | Path | InputFile, what: str) -> Any:
    """Read a whole JSON file.

    Raises:
        InputError: The file is missing or is not JSON.
    """
    try:
        with open_binary(path) as fh:
            return json.load(fh)
    except FileNotFoundError:
        raise InputError(f"{what} file {str(path)!r} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InputError(f"{what} file {str(path)!r} is not valid JSON: {e}") from e


def kind_of_export(data: Any) -> str | None:
    """``chatgpt``, ``claude`` or ``locomo`` for a decoded JSON document of that shape."""
    first = data[0] if isinstance(data, list) and data else data
    if not isinstance(first, dict):
        return None
    if "mapping" in first:
        return "chatgpt"
    if "chat_messages" in first:
        return "claude"
    if "sample_id" in first and "conversation" in first:
        return "locomo"
    return None


def _conversations(data: Any, path: Any, fmt: str, key: str) -> list[Any]:
    conversations = [data] if isinstance(data, dict) else data
    if not isinstance(conversations, list) or (
        conversations and not any(isinstance(c, dict) and key in c for c in conversations)
    ):
        raise InputError(
            f"{str(path)!r} is not a {fmt} export: expected a list of conversations with "
            f"{key!r}; pass another format for other JSON files"
        )
    return conversations


def _iter_export(
    path: str | Path | InputFile,
    data: Any,
    fmt: str,
    key: str,
    conversation: Callable[[Any, int], Iterator[Item]],
) -> Iterator[tuple[int, Item]]:
    """The items of every conversation of an export, numbered from 0 over the file."""
    if data is None:
        data = load_document(path, f"{fmt} export")
    position = 0
    for n, conv in enumerate(_conversations(data, path, fmt, key)):
        try:
            for item in conversation(conv, n):
                yield position, item
                position += 1
        except Exception as e:  # noqa: BLE001 - one odd conversation must not end the file
            reason = f"{fmt} conversation {n} cannot be read further ({type(e).__name__}: {e})"
            yield position, Refused(reason, conv)
            position += 1


# ------------------------------------------------------------------------------------- ChatGPT


def iter_chatgpt(path: str | Path | InputFile, data: Any = None) -> Iterator[tuple[int, Item]]:
    """Yield the messages of a ChatGPT export as canonical records, conversation by conversation.

    Args:
        path: The ``conversations.json`` file.
        data: The decoded document, when the caller has read it already.

    Yields:
        ``(position, record or Refused)``, position counting from 0 over the file.

    Raises:
        InputError: The file is not JSON or not a ChatGPT export.
    """
    return _iter_export(path, data, "ChatGPT", "mapping", _chatgpt_conversation)


def _chatgpt_conversation(conv: Any, n: int) -> Iterator[Item]:
    mapping = conv.get("mapping") if isinstance(conv, dict) else None
    if not isinstance(mapping, dict):
        yield Refused(f"ChatGPT conversation {n} has no 'mapping' object of messages", conv)
        return
    conv_id = conv.get("conversation_id") or conv.get("id") or f"chatgpt-{n}"
    title = conv.get("title")
    for node in _active_path(mapping, conv.get("current_node")):
        if not isinstance(node, dict):
            yield Refused(f"ChatGPT conversation {conv_id!r}: a node is not an object", node)
            continue
        message = node.get("message")
        if message is None:
            continue
        if not isinstance(message, dict):
            yield Refused(
                f"ChatGPT conversation {conv_id!r}: the message of node {node.get('id')!r} is "
                "not an object",
                message,
            )
            continue
        text = _chatgpt_text(message.get("content"))
        if not text:
            continue
        author = message.get("author")
        if not isinstance(author, dict):
            author = {}
        yield {
            "conversation_id": conv_id,
            "session_id": conv_id,
            "message_id": message.get("id") or node.get("id"),
            "role": author.get("role"),
            "name": author.get("name") or None,
            "content": text,
            "timestamp": message.get("create_time") or conv.get("create_time"),
            "metadata": {"title": title} if title else None,
        }


def _active_path(mapping: dict[str, Any], current: Any) -> list[Any]:
    """The nodes from the root to ``current`` (or down the last children when it is missing).

    A node id that is not text (a list, an object) names no node: it ends the path there.
    """
    current = _node_id(current)
    if current is not None and current in mapping:
        path, seen = [], set()
        node_id: str | None = current
        while node_id is not None and node_id in mapping and node_id not in seen:
            seen.add(node_id)
            node = mapping[node_id]
            path.append(node)
            node_id = _node_id(node.get("parent")) if isinstance(node, dict) else None
        return path[::-1]
    roots = [k for k, v in mapping.items() if isinstance(v, dict) and not v.get("parent")]
    path, seen = [], set()
    node_id = roots[0] if roots else None
    while node_id is not None and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        path.append(node)
        children = node.get("children") if isinstance(node, dict) else None
        node_id = _node_id(children[-1]) if isinstance(children, list) and children else None
    return path


def _node_id(value: Any) -> str | None:
    """A node id as the mapping's keys are: text (a JSON object's keys are always text)."""
    return value if isinstance(value, str) else None


def _chatgpt_text(content: Any) -> str:
    if not isinstance(content, dict):
        return ""
    parts = content.get("parts")
    if isinstance(parts, list):
        return "\n".join(p for p in parts if isinstance(p, str) and p.strip()).strip()
    text = content.get("text")
    return text.strip() if isinstance(text, str) else ""


# -------------------------------------------------------------------------------------- Claude


def iter_claude(path: str | Path | InputFile, data: Any = None) -> Iterator[tuple[int, Item]]:
    """Yield the messages of a Claude export as canonical records, conversation by conversation.

    Args:
        path: The ``conversations.json`` file.
        data: The decoded document, when the caller has read it already.

    Yields:
        ``(position, record or Refused)``, position counting from 0 over the file.

    Raises:
        InputError: The file is not JSON or not a Claude export.
    """
    return _iter_export(path, data, "Claude", "chat_messages", _claude_conversation)


def _claude_conversation(conv: Any, n: int) -> Iterator[Item]:
    messages = conv.get("chat_messages") if isinstance(conv, dict) else None
    if not isinstance(messages, list):
        yield Refused(f"Claude conversation {n} has no 'chat_messages' list", conv)
        return
    conv_id = conv.get("uuid") or f"claude-{n}"
    account = conv.get("account") if isinstance(conv.get("account"), dict) else {}
    title = conv.get("name")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            yield Refused(f"Claude conversation {conv_id!r}: message {i} is not an object", message)
            continue
        text = _claude_text(message)
        if not text:
            continue
        yield {
            "conversation_id": conv_id,
            "session_id": conv_id,
            "user_id": account.get("uuid") or None,
            "message_id": message.get("uuid"),
            "role": message.get("sender"),
            "content": text,
            "timestamp": message.get("created_at") or conv.get("created_at"),
            "metadata": {"title": title} if title else None,
        }


def _claude_text(message: dict[str, Any]) -> str:
    text = message.get("text")
    if isinstance(text, str) and text.strip():
        return text.strip()
    parts = message.get("content")
    if not isinstance(parts, list):
        return ""
    texts = [
        p["text"]
        for p in parts
        if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
    ]
    return "\n".join(t for t in texts if t.strip()).strip()
