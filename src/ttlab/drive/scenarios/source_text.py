"""Parse the text form of a scenario source: 'name' or 'name:key=value,key=value'."""

from __future__ import annotations

from collections.abc import Iterable


def parse_items(text: str, head: str, keys: Iterable[str], usage: str) -> dict[str, str]:
    """{key: value} of 'head[:k=v,...]'; a wrong head, an unknown key or a missing '=' raises ValueError naming them."""
    name, _, rest = text.partition(":")
    if name != head:
        raise ValueError(f"scenario source {text!r}: expected {usage!r}")
    known = set(keys)
    items: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, val = item.partition("=")
        if key not in known or not eq:
            raise ValueError(f"scenario source {text!r}: bad item {item!r}; keys: {', '.join(sorted(known))}")
        items[key] = val
    return items


def as_int(text: str, key: str, val: str) -> int:
    """int(val), or a ValueError naming the source and the key."""
    try:
        return int(val)
    except ValueError as e:
        raise ValueError(f"scenario source {text!r}: {key}={val!r} is not an integer") from e


def as_bool(val: str) -> bool:
    """'1', 'true' and 'yes' (any case) are True; anything else is False."""
    return val.lower() in ("1", "true", "yes")
