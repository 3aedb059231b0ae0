"""Fuzzy key matching: map a model's JSON keys onto the keys a response format expects.

Models misspell keys (``"anwser"``), change case (``"Answer"``) or style
(``"extension-needed"``). Before validation, each key that is not expected
is matched to the most similar expected key still unmatched, by Jaro-Winkler
similarity, when the similarity reaches the threshold (0.85 by default, as in
the reference system). Jaro-Winkler rewards a shared prefix, which suits keys.

The similarity is a small pure function here rather than a dependency: it is
about thirty lines, and the maintained libraries that have it (rapidfuzz,
jellyfish) are compiled packages pride would otherwise not need.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..errors import ParseFailed

__all__ = ["HandleUnmatched", "jaro_winkler", "match_keys"]

HandleUnmatched = Literal["ignore", "raise", "remove", "fill", "force"]
"""What to do with keys that match nothing, and expected keys that are missing.

``ignore`` keeps unmatched keys; ``raise`` fails on them; ``remove`` drops
them; ``fill`` keeps them and fills missing required keys; ``force`` drops
them and fills missing required keys (the default).
"""

_PREFIX_LIMIT = 4
_PREFIX_SCALE = 0.1

# The similarity work of one `match_keys`, in pairs of characters compared: a
# comparison costs about the product of the two lengths (plus a call's worth,
# `_CALL`, for each), and every key the format lacks was compared with every key
# it still misses. Both come from outside (a Parse request carries its text and
# its schema), so unbounded that was quadratic twice over: 2,000 keys against
# 2,000 properties took 12 s of the event loop, one key of 8,000 characters
# against a property as long 1.8 s. About 0.3 s at most; a misspelt key of a
# format of a hundred fields costs a few thousandths of it.
_MAX_WORK = 10_000_000
_CALL = 8


def jaro_winkler(first: str, second: str) -> float:
    """The Jaro-Winkler similarity of two strings, from 0.0 (nothing shared) to 1.0 (equal)."""
    if first == second:
        return 1.0
    len1, len2 = len(first), len(second)
    if not len1 or not len2:
        return 0.0
    window = max(max(len1, len2) // 2 - 1, 0)
    matched1 = [False] * len1
    matched2 = [False] * len2
    matches = 0
    for i, char in enumerate(first):
        for j in range(max(0, i - window), min(i + window + 1, len2)):
            if not matched2[j] and second[j] == char:
                matched1[i] = matched2[j] = True
                matches += 1
                break
    if not matches:
        return 0.0
    transposed = 0
    j = 0
    for i in range(len1):
        if matched1[i]:
            while not matched2[j]:
                j += 1
            if first[i] != second[j]:
                transposed += 1
            j += 1
    jaro = (matches / len1 + matches / len2 + (matches - transposed / 2) / matches) / 3
    prefix = 0
    for char1, char2 in zip(first[:_PREFIX_LIMIT], second[:_PREFIX_LIMIT], strict=False):
        if char1 != char2:
            break
        prefix += 1
    return jaro + prefix * _PREFIX_SCALE * (1.0 - jaro)


def _normal(key: str) -> str:
    return key.strip().lower().replace("-", "_").replace(" ", "_")


def match_keys(
    data: Mapping[str, Any],
    expected: Sequence[str],
    *,
    required: Sequence[str] = (),
    fuzzy: bool = True,
    threshold: float = 0.85,
    handle_unmatched: HandleUnmatched = "force",
    fill_value: Any = None,
    fill_mapping: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return ``data`` with its keys mapped onto ``expected``.

    Exact keys are kept; with ``fuzzy``, each other key is renamed to the most
    similar unmatched expected key when the similarity (Jaro-Winkler, after
    lower-casing and treating ``-`` and spaces as ``_``) is at least
    ``threshold``, as long as the comparisons stay within a bound of work
    (`_MAX_WORK`, far past what a real format needs): a key they would take past
    it is left unmatched. Filling (``fill``/``force``) gives each missing key its
    ``fill_mapping`` value when it has one, and each missing *required* key
    ``fill_value``; keys with defaults are left out so their defaults apply.

    Raises:
        ParseFailed: ``handle_unmatched="raise"`` and some keys match nothing.
        ValueError: ``handle_unmatched`` is not one of its values.
    """
    if handle_unmatched not in ("ignore", "raise", "remove", "fill", "force"):
        raise ValueError(f"unknown handle_unmatched {handle_unmatched!r}")
    wanted = set(expected)
    result: dict[str, Any] = {}
    leftover: list[str] = []
    for key, value in data.items():
        if key in wanted:
            result[key] = value
        else:
            leftover.append(key)
    if fuzzy and leftover:
        open_keys = {key: _normal(key) for key in expected if key not in result}
        open_size = sum(len(normal) + _CALL for normal in open_keys.values())
        work = 0
        unmatched: list[str] = []
        for key in leftover:
            probe = _normal(key)
            cost = (len(probe) + _CALL) * open_size
            if not open_keys or work + cost > _MAX_WORK:  # past the bound: like no key
                unmatched.append(key)
                continue
            work += cost
            score, best = max((jaro_winkler(probe, normal), c) for c, normal in open_keys.items())
            if score >= threshold:
                result[best] = data[key]
                open_size -= len(open_keys.pop(best)) + _CALL
            else:
                unmatched.append(key)
        leftover = unmatched
    if leftover and handle_unmatched == "raise":
        raise ParseFailed(
            f"unexpected keys {', '.join(map(repr, leftover))}; expected {', '.join(expected)}"
        )
    if handle_unmatched in ("ignore", "fill"):
        for key in leftover:
            result[key] = data[key]
    if handle_unmatched in ("fill", "force"):
        mapping = fill_mapping or {}
        needed = set(required)  # looked up once per expected key: a list was quadratic
        for key in expected:
            if key in result:
                continue
            if key in mapping:
                result[key] = mapping[key]
            elif key in needed:
                result[key] = fill_value
    return result
