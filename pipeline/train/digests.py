"""One identity for a JSON-describable thing: the SHA-256 of its canonical JSON (keys sorted), used by run
fingerprints, fit rows' ``plan_key`` and the fit rule's digest."""

import hashlib
import json
from typing import Any


def json_digest(value: Any, *, length: int = 64, compact: bool = False) -> str:
    """The first ``length`` hex digits of SHA-256 over ``value`` as JSON with sorted keys; ``compact`` drops the
    spaces after separators (run fingerprints were first written that way and stay so)."""
    separators = (",", ":") if compact else None
    text = json.dumps(value, sort_keys=True, separators=separators)
    return hashlib.sha256(text.encode()).hexdigest()[:length]
