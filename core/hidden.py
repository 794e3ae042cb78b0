"""Hidden text: characters a reader does not see but a model reads, found where they do nothing
visible. Facts only: no word lists and no judging of prose, so the finding cannot be wrong.

The characters looked at are Unicode's Default_Ignorable_Code_Point set (rendered as nothing
when they have no effect: zero-width characters, bidi controls, variation selectors, tag
characters, fillers, the soft hyphen, unassigned ignorables) and the interlinear annotation
controls (U+FFF9-FFFB, which hide the annotation's text). Each is reported unless it sits where
Unicode gives it a visible job, decided from Unicode's own character data (the `regex` module's
properties, the Unicode version its data carries):

- a tag character (U+E0000-E007F) only inside a subdivision flag: U+1F3F4, a subdivision code
  in tag letters and digits (two letters or three digits, then one to four letters or digits;
  UTS #51 and CLDR), then U+E007F CANCEL TAG. Any other run of tags is reported with the ASCII
  it spells;
- ZERO WIDTH JOINER in an emoji ZWJ sequence (UAX #29 GB11: an Extended_Pictographic character,
  its modifiers and selectors, ZWJ, then an Extended_Pictographic character);
- ZWJ and ZERO WIDTH NON-JOINER beside a character of a joining script (Joining_Type Dual,
  Right, Left or Join_Causing, skipping transparent marks: Arabic, Persian, Syriac, N'Ko,
  Mongolian, ...), where they choose a letter's cursive form, or right beside a virama
  (Canonical_Combining_Class 9: Devanagari, Bengali, Sinhala, Malayalam, Khmer, ...), where
  they choose a conjunct, a half form or an explicit virama;
- one variation selector after a base Unicode's sequences use: VS15/VS16 after an Emoji
  or Extended_Pictographic character, VS1-VS14 after a letter, number, punctuation, symbol or spacing mark
  (StandardizedVariants),
  VS17-VS256 after an ideograph (the Ideographic Variation Database), a Mongolian free
  variation selector after a Mongolian letter. Two selectors in a row select nothing: a run
  of them is how bytes are smuggled, and is reported with the bytes decoded;
- ZERO WIDTH SPACE between two letters where one is of a script written without spaces
  (Line_Break SA, ID or CJ: Thai, Lao, Khmer, Myanmar, Chinese, Japanese), as a word break;
- the soft hyphen between letters (a hyphenation point); the combining grapheme joiner before
  a combining mark; the Mongolian vowel separator between Mongolian letters; the Hangul
  choseong filler before a jungseong and the jungseong filler after a choseong (not the two
  fillers together, a syllable with nothing in it); U+FEFF at the very start of a text (a byte
  order mark);
- LEFT-TO-RIGHT, RIGHT-TO-LEFT and ARABIC LETTER marks, and embeddings and isolates, in a text
  that holds right-to-left letters, the embeddings and isolates each closed in order within
  it. Overrides (U+202D, U+202E) reorder what is shown against what is read, and are always
  reported, as are direction controls in a text with no right-to-left letter (Trojan Source).

Anything else of the set is reported: a zero-width character between Latin letters, a word
joiner, the invisible mathematical operators, deprecated format characters, fillers used as
blank names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import regex

from .records import Hidden, Kind

MAX_FOUND = 50  # runs reported per scan, the rest counted
MAX_SPELLED = 500  # characters of spelled text kept per run
MAX_DEPTH = 64  # nesting walked in a JSON value
MAX_STRINGS = 100_000  # strings scanned in one JSON value

CANDIDATE = regex.compile(r"[\p{Default_Ignorable_Code_Point}\uFFF9-\uFFFB]")
_FLAG = regex.compile(
    "\U0001f3f4(?:[\U000e0061-\U000e007a]{2}|[\U000e0030-\U000e0039]{3})"
    "[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,4}\U000e007f"
)
_RTL_LETTER = regex.compile(
    r"(?=\p{L})[\p{Bidi_Class=R}\p{Bidi_Class=AL}]"
)  # RLM and ALM are R, AL too
_PICTOGRAPHIC = regex.compile(r"\p{Extended_Pictographic}")
# Extended_Pictographic holds code points kept for emoji to come: a newer sender is not wrong.
_EMOJI = regex.compile(r"[\p{Emoji}\p{Extended_Pictographic}]")
_EMOJI_EXTEND = regex.compile(r"[\p{Emoji_Modifier}\uFE0E\uFE0F\u20E3\U000E0020-\U000E007F]")
_JOINING = regex.compile(
    r"[\p{Joining_Type=D}\p{Joining_Type=R}\p{Joining_Type=L}\p{Joining_Type=C}]"
)
_TRANSPARENT = regex.compile(r"\p{Joining_Type=T}")
_VIRAMA = regex.compile(r"\p{Canonical_Combining_Class=Virama}")
_NO_SPACES = regex.compile(r"[\p{Line_Break=SA}\p{Line_Break=ID}\p{Line_Break=CJ}]")
_LETTER = regex.compile(r"\p{L}")
_LETTER_OR_MARK = regex.compile(r"[\p{L}\p{M}]")
_MARK = regex.compile(r"\p{M}")
_GRAPHIC_BASE = regex.compile(r"[\p{L}\p{N}\p{P}\p{S}\p{Mc}]")
_IDEOGRAPH = regex.compile(r"\p{Ideographic}")
_MONGOLIAN = regex.compile(r"\p{Script_Extensions=Mongolian}")
_CHOSEONG = regex.compile(r"\p{Hangul_Syllable_Type=L}")
_JUNGSEONG = regex.compile(r"\p{Hangul_Syllable_Type=V}")

ZWSP, ZWNJ, ZWJ, WJ, BOM = "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"
_ZERO_WIDTH = frozenset((ZWSP, ZWNJ, ZWJ, WJ, BOM))
_MARKS = frozenset("\u200e\u200f\u061c")  # LRM, RLM, ALM
_OPENERS = {"\u202a": "\u202c", "\u202b": "\u202c", "\u2066": "\u2069", "\u2067": "\u2069",
            "\u2068": "\u2069"}  # fmt: skip
_CLOSERS = frozenset(("\u202c", "\u2069"))
_OVERRIDES = frozenset("\u202d\u202e")
_PRIORITY: tuple[Kind, ...] = ("tag", "variation-selector", "bidi", "zero-width", "format")


def _kind(char: str) -> Kind:
    code = ord(char)
    if 0xE0000 <= code <= 0xE007F:
        return "tag"
    if (
        0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or code in (0x180B, 0x180C, 0x180D, 0x180F)
    ):
        return "variation-selector"
    if char in _MARKS or char in _OPENERS or char in _CLOSERS or char in _OVERRIDES:
        return "bidi"
    if char in _ZERO_WIDTH:
        return "zero-width"
    return "format"


def _is(pattern: Any, char: str | None) -> bool:
    return char is not None and pattern.match(char) is not None


def _joining_neighbour(text: str, index: int, step: int) -> str | None:
    """The nearest character from index in the direction step that is not transparent to
    joining (marks, and format characters other than the joiners)."""
    position = index + step
    while 0 <= position < len(text):
        char = text[position]
        if char not in (ZWNJ, ZWJ) and not _TRANSPARENT.match(char):
            return char
        position += step
    return None


def _emoji_before(text: str, index: int) -> bool:
    """Does an Extended_Pictographic character come before index, past its modifiers,
    presentation selectors and tags (UAX #29 GB11)?"""
    position = index - 1
    while position >= 0 and _EMOJI_EXTEND.match(text[position]):
        position -= 1
    return position >= 0 and _PICTOGRAPHIC.match(text[position]) is not None


def _selector_base(char: str, before: str | None) -> bool:
    """One variation selector after a base that sequences of its kind use."""
    if before is None or _kind(before) == "variation-selector":
        return False
    code = ord(char)
    if char in "\ufe0e\ufe0f":
        return _is(_EMOJI, before)
    if 0xFE00 <= code <= 0xFE0D:
        return _is(_GRAPHIC_BASE, before)
    if 0xE0100 <= code <= 0xE01EF:
        return _is(_IDEOGRAPH, before)
    return _is(_MONGOLIAN, before) and _is(_LETTER, before)  # Mongolian FVS1-FVS4


def _direction_allowed(text: str) -> tuple[bool, bool]:
    """(marks allowed, embeddings and isolates allowed) in this text: it holds right-to-left
    letters, and every embedding or isolate is closed, in order, within it."""
    if _RTL_LETTER.search(text) is None:
        return False, False
    stack: list[str] = []
    for char in text:
        if char in _OPENERS:
            stack.append(_OPENERS[char])
        elif char in _CLOSERS:
            if not stack or stack.pop() != char:
                return True, False
        elif char in _OVERRIDES:
            stack.append("\u202c")  # an override is closed by PDF too; it is reported anyway
    return True, not stack


def _legitimate(text: str, index: int, direction: tuple[bool, bool]) -> bool:
    """Does the character at index do a visible job where it is?"""
    char = text[index]
    before = text[index - 1] if index > 0 else None
    after = text[index + 1] if index + 1 < len(text) else None
    if char in (ZWJ, ZWNJ):
        if _is(_VIRAMA, before) or _is(_VIRAMA, after):
            return True
        if char == ZWJ and _emoji_before(text, index) and _is(_PICTOGRAPHIC, after):
            return True
        return _is(_JOINING, _joining_neighbour(text, index, -1)) or _is(
            _JOINING, _joining_neighbour(text, index, 1)
        )
    kind = _kind(char)
    if kind == "variation-selector":
        return _selector_base(char, before)
    if kind == "bidi":
        if char in _OVERRIDES:
            return False
        return direction[0] if char in _MARKS else direction[1]
    if char == ZWSP:
        return (
            _is(_LETTER_OR_MARK, before)
            and _is(_LETTER, after)
            and (_is(_NO_SPACES, before) or _is(_NO_SPACES, after))
        )
    if char == BOM:
        return index == 0
    if char == "\u00ad":  # soft hyphen
        return _is(_LETTER_OR_MARK, before) and _is(_LETTER, after)
    if char == "\u034f":  # combining grapheme joiner
        return before is not None and _is(_MARK, after)
    if char == "\u180e":  # Mongolian vowel separator
        return _is(_MONGOLIAN, before) and _is(_MONGOLIAN, after)
    # The Hangul fillers stand in for a syllable's missing part; the two together show nothing.
    if char == "\u115f":  # Hangul choseong filler
        return after != "\u1160" and _is(_JUNGSEONG, after)
    if char == "\u1160":  # Hangul jungseong filler
        return before != "\u115f" and _is(_CHOSEONG, before)
    return False


def _spelled(run: list[str]) -> str | None:
    tags = [chr(ord(c) - 0xE0000) for c in run if 0xE0020 <= ord(c) <= 0xE007E]
    if tags:
        return _cut("".join(tags))
    selectors = [
        c for c in run if _kind(c) == "variation-selector" and c not in "\u180b\u180c\u180d\u180f"
    ]
    if len(selectors) < 2:
        return None
    data = bytes(ord(c) - 0xFE00 if ord(c) <= 0xFE0F else ord(c) - 0xE0100 + 16 for c in selectors)
    return _cut(data.decode("utf-8", "replace"))


def _cut(text: str) -> str:
    return text if len(text) <= MAX_SPELLED else text[:MAX_SPELLED] + "…"


def scan_text(text: str, where: str = "$") -> list[Hidden]:
    """Every run of hidden characters in one text, each with where it is. Pure and total."""
    if text.isascii():
        return []
    found = [m.start() for m in CANDIDATE.finditer(text)]
    if not found:
        return []
    inside_flags = {i for m in _FLAG.finditer(text) for i in range(m.start(), m.end())}
    direction = _direction_allowed(text)
    hidden = [i for i in found if i not in inside_flags and not _legitimate(text, i, direction)]
    runs: list[list[int]] = []
    for index in hidden:
        if runs and runs[-1][-1] == index - 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    out = []
    for run in runs:
        chars = [text[i] for i in run]
        kinds = {_kind(c) for c in chars}
        out.append(
            Hidden(
                where=where,
                kind=next(k for k in _PRIORITY if k in kinds),
                at=run[0],
                count=len(run),
                chars=[f"U+{ord(c):04X}" for c in dict.fromkeys(chars)],
                spelled=_spelled(chars),
            )
        )
    return out


def strings(value: Any, where: str = "$") -> Iterator[tuple[str, str]]:
    """Every string in a JSON value, keys included, with its path; bounded in depth and count.
    Pure."""
    stack: list[tuple[Any, str, int]] = [(value, where, 0)]
    seen = 0
    while stack and seen < MAX_STRINGS:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            seen += 1
            yield path, node
        elif depth >= MAX_DEPTH:
            continue
        elif isinstance(node, dict):
            for key, child in reversed(node.items()):
                child_path = json_path(path, key)
                stack.append((child, child_path, depth + 1))
                if isinstance(key, str) and not key.isascii():  # a key is read too
                    stack.append((key, f"{child_path} (key)", depth + 1))
        elif isinstance(node, list):
            items = [(child, f"{path}[{i}]", depth + 1) for i, child in enumerate(node)]
            items.reverse()  # in place: mypyc fails on reversed() over tuples holding Any
            stack.extend(items)


_PLAIN_KEY = regex.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def json_path(path: str, key: Any) -> str:
    """path.key, or path['key'] for a key that is not a plain name. Pure."""
    text = str(key)
    if _PLAIN_KEY.fullmatch(text):
        return f"{path}.{text}"
    escaped = text.replace("\\", "\\\\").replace("'", "\\'")
    return f"{path}['{escape(escaped)}']"


def escape(text: str) -> str:
    """Text with its hidden characters written as \\u{XXXX}, for a line a person reads. Pure."""
    escaped: str = CANDIDATE.sub(lambda m: f"\\u{{{ord(m.group()):X}}}", text)
    return escaped


def _ascii(value: Any) -> bool:
    """Is every string of a JSON value, keys included, ASCII? Checked at C speed: orjson writes
    them as UTF-8, unescaped, so any other character shows as a byte over 127. Every character
    scan_text looks for is past ASCII. False when orjson cannot write the value (a lone
    surrogate, a huge integer): then it is walked."""
    if isinstance(value, str):
        return value.isascii()
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).isascii()
    except (TypeError, orjson.JSONEncodeError):
        return False


def scan(value: Any, where: str = "$") -> tuple[list[Hidden], int]:
    """Every run of hidden characters in the strings of a JSON value: the first MAX_FOUND, and
    how many more there were. Pure and total."""
    if value is None or _ascii(value):
        return [], 0
    found: list[Hidden] = []
    more = 0
    for path, text in strings(value, where):
        for hidden in scan_text(text, path):
            if len(found) < MAX_FOUND:
                found.append(hidden)
            else:
                more += 1
    return found, more
