"""File uploads (POST /v1/files, Anthropic's and OpenAI's Files APIs): the file a multipart body
carries, and the id the response gives it. A later request that sends the id is then costed by the
file's real size and pages (prefixguard.model.media.remember_upload) instead of the documented estimate."""

from __future__ import annotations

import base64
import binascii
import json
import re
from urllib.parse import urlsplit

from prefixguard.model import media

_PATH = re.compile(r"/v1/files/?$")
_TYPE = re.compile(rb"Content-Type:\s*([^\s;]+)", re.I)


def is_upload(path: str | None, method: str = "POST") -> bool:
    return method == "POST" and path is not None and _PATH.search(urlsplit(path).path) is not None


def upload(body: bytes) -> tuple[str | None, str] | None:
    """(media type, base64 of the file) of a multipart/form-data upload's "file" part, else None."""
    boundary = body[: body.find(b"\n")].strip() if body.startswith(b"--") else b""
    if len(boundary) < 3:
        return None
    for part in body.split(boundary)[1:]:
        head, sep, content = part.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = part.partition(b"\n\n")
        if not sep or b'name="file"' not in head:
            continue
        found = _TYPE.search(head)
        media_type = found.group(1).decode("ascii", "replace") if found else None
        return media_type, base64.b64encode(content.removesuffix(b"\r\n").removesuffix(b"\n")).decode("ascii")
    return None


def uploaded_id(response: bytes) -> str | None:
    """The id a Files API response gives the upload ("file_...")."""
    try:
        doc = json.loads(response)
    except (ValueError, UnicodeDecodeError):
        return None
    file_id = doc.get("id") if isinstance(doc, dict) else None
    return file_id if isinstance(file_id, str) else None


def remember(body: bytes, response: bytes) -> bool:
    """Remember the file an upload carried under the id its response gave; False if either is unreadable.
    A body stored as base64 text (as recorders keep binary bodies) is read decoded."""
    if not body.startswith(b"--"):
        try:
            body = base64.b64decode(body, validate=True)
        except (ValueError, binascii.Error):
            return False
    found, file_id = upload(body), uploaded_id(response)
    if found is None or file_id is None:
        return False
    media.remember_upload(file_id, *found)
    return True
