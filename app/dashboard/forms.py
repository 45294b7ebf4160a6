"""HTML form bodies (application/x-www-form-urlencoded), read with the standard library: the dashboard's
two small forms do not justify a multipart parser dependency."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import parse_qs

from fastapi import Depends, HTTPException, Request

MAX_FORM_BYTES = 16 * 1024
MAX_FIELDS = 10
FORM_TYPE = "application/x-www-form-urlencoded"


async def form_fields(request: Request) -> dict[str, str]:
    """The first value of each field; 415 for another encoding, 413 for a body no form of ours makes."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != FORM_TYPE:
        raise HTTPException(415, f"send the form as {FORM_TYPE}")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise HTTPException(413, f"a form is at most {MAX_FORM_BYTES} bytes")
    try:
        parsed = parse_qs(body.decode(), keep_blank_values=True, max_num_fields=MAX_FIELDS)
    except (UnicodeDecodeError, ValueError):
        raise HTTPException(400, "not a form body") from None
    return {name: values[0] for name, values in parsed.items()}


FormFields = Annotated[dict[str, str], Depends(form_fields)]
