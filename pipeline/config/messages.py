"""One sentence per malformed preset: the key, what was expected and what was found."""

from __future__ import annotations

import jsonschema


class ConfigError(ValueError):
    """A preset is malformed; the message is one sentence naming the file, the key and the expectation."""


def schema_error_sentence(error: jsonschema.ValidationError) -> str:
    """One sentence for the first schema error of a preset (inside ``oneOf``/``allOf``: of the alternative meant):
    which key, what was expected, what was found."""
    error = _best_error(error)
    key = ".".join(str(part) for part in error.absolute_path) or "<top level>"
    kind, expected = error.validator, error.validator_value
    if kind == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - set(allowed))
        hint = f"expected one of {allowed}" if allowed else "expected no other keys"
        return f"unknown key {unknown[0]!r} under {key!r}; {hint}"
    if kind == "required":
        missing = [name for name in expected if name not in error.instance]
        return f"key {key!r} is missing required key {missing[0]!r}"
    if kind == "type" and isinstance(error.instance, float) and error.instance.is_integer() and "integer" in expected:
        return (
            f"key {key!r} must be an integer (got {error.instance!r}; an integral float such as 8.0 or 1e3 is "
            f"refused, not rounded: write {int(error.instance)})"
        )
    if kind == "type":
        return f"key {key!r} must be of type {expected} (got {error.instance!r})"
    if kind == "enum":
        return f"key {key!r} must be one of {expected} (got {error.instance!r})"
    if kind == "const":
        return f"key {key!r} must be {expected!r} (got {error.instance!r})"
    if kind == "contains" and "const" in expected:
        return f"key {key!r} must contain {expected['const']!r} (got {error.instance!r})"
    bounds = {"minimum": "≥", "exclusiveMinimum": ">", "maximum": "≤", "exclusiveMaximum": "<"}
    if kind in bounds:
        return f"key {key!r} must be {bounds[kind]} {expected} (got {error.instance!r})"
    if kind == "pattern" and "propertyNames" in error.schema_path:
        return f"key {key!r} has an entry named {error.instance!r}; names must match {expected!r}"
    if kind == "pattern":
        return f"key {key!r} must match {expected!r} (got {error.instance!r})"
    if kind in ("minItems", "maxItems", "minProperties", "uniqueItems", "minLength"):
        return f"key {key!r} violates {kind}={expected} (got {error.instance!r})"
    return f"key {key!r}: {error.message}"


def _best_error(error: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a failed ``oneOf``/``allOf``, descend into the alternative the instance meant: alternatives are told
    apart by a ``kind`` constant, so those whose constant fails are not the one meant."""
    while error.validator in ("oneOf", "anyOf", "allOf") and error.context:
        consts = [e for e in error.context if e.validator == "const"]
        meant = [e for e in error.context if e.schema_path[0] not in {c.schema_path[0] for c in consts}]
        if not meant and consts:
            kinds = sorted(c.validator_value for c in consts)
            return jsonschema.ValidationError(
                f"must be one of {kinds} (got {consts[0].instance!r})",
                validator="enum",
                validator_value=kinds,
                instance=consts[0].instance,
                path=consts[0].absolute_path,
            )
        error = jsonschema.exceptions.best_match(meant or list(error.context))
    return error
