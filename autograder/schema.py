"""Configuration declared as frozen dataclasses, read from YAML data and described in a reference page.

A configuration key is a dataclass field made with `setting(...)`: its annotation is the type, its
default is the default and `help` says what it means. Everything else derives from that one line:

- `read(cls, data, ...)` walks the YAML mapping, converts and checks each value, and raises
  `ConfigError` with one line naming the key path ("assignments[0].limits.cell_seconds: expected a
  positive number, got -1"). Keys that are not declared are errors.
- `reference(cls)` renders the Markdown tables of every key (the generated `docs/config.md`).

Types understood: str, int, float, bool, datetime, Path, Literal[...], X | None, tuple[X, ...] (a YAML
list), dict[str, X] (a YAML mapping) and nested dataclasses (a YAML mapping read the same way).
A nested mapping given in part keeps the missing keys from its default, so `limits: {cell_seconds:
60}` changes one limit and inherits the others.

A default that depends on other settings is a `derive` function of the `Scope`: the values of the
same mapping and, through it, of the mappings around it (`scope["notebooks"]`, `scope["defaults"]`).
Fields without `setting(...)` are not keys; the reader fills them from `given` (the course folder,
or a problem's name taken from its mapping key).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import functools
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union

from .errors import ConfigError
from .text import with_article

SCHEMA = "schema"            # the key of a field's metadata that holds its Setting
_MISSING: Any = dataclasses.MISSING


@dataclass(frozen=True)
class Check:
    """A rule a value must follow beyond its type. `expected` completes "expected ...", with {} for
    the type's noun ("a positive {}" -> "a positive number" or "a positive integer")."""
    expected: str
    holds: Callable[[Any], bool]

    def for_type(self, tp: Any) -> str:
        """The rule in words for values of type `tp`: "a positive number", "an integer >= 0"."""
        text = self.expected.format("integer" if _bare(tp) is int else "number")
        return with_article(text[2:]) if text.startswith("a ") else text


@dataclass(frozen=True)
class Setting:
    help: str
    key: str | None = None                    # the YAML key, when it differs from the field's name
    check: Check | None = None
    derive: Callable[[Scope], Any] | None = None   # default computed from other settings
    default_doc: str | None = None            # how the docs show a derived default
    keyed_by: str | None = None               # tuple of dataclasses read from a mapping: the field
                                              # of each item that receives its key
    keys: tuple[str, ...] | None = None       # dict: the only keys allowed
    item_check: Check | None = None           # tuple: a rule for each item
    check_scope: Callable[[Any, str, Scope], None] | None = None   # rules involving other settings
    resolve: Callable[[Any, Scope], Any] | None = None   # applied to the value, given or default


def setting(default: Any = _MISSING, *, help: str, key: str | None = None, check: Check | None = None,
            derive: Callable[[Scope], Any] | None = None, default_doc: str | None = None,
            keyed_by: str | None = None, keys: tuple[str, ...] | None = None,
            item_check: Check | None = None, factory: Callable[[], Any] | None = None,
            check_scope: Callable[[Any, str, Scope], None] | None = None,
            resolve: Callable[[Any, Scope], Any] | None = None) -> Any:
    """A dataclass field that is a configuration key (see the module docstring)."""
    meta = {SCHEMA: Setting(help=" ".join(help.split()), key=key, check=check, derive=derive,
                            default_doc=default_doc, keyed_by=keyed_by, keys=keys, item_check=item_check,
                            check_scope=check_scope, resolve=resolve)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is _MISSING:     # required, or derived: the reader always passes a value
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


# --------------------------------------------------------------------------- common checks

POSITIVE = Check("a positive {}", lambda v: v > 0)
NON_NEGATIVE = Check("a {} >= 0", lambda v: v >= 0)
FRACTION = Check("a fraction between 0 and 1", lambda v: 0 <= v <= 1)
NON_EMPTY = Check("a non-empty list", lambda v: len(v) > 0)


def pattern(expected: str, regex: str) -> Check:
    """Text that matches `regex` in full; `expected` says so in words."""
    compiled = re.compile(regex)
    return Check(expected, lambda v: bool(compiled.fullmatch(v)))


# --------------------------------------------------------------------------- reading

def show(value: Any) -> str:
    """A YAML value as an error message quotes it."""
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "nothing"
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return repr(value)


def _factory_default(f: dataclasses.Field[Any]) -> Any:
    """The value of `f`'s default_factory, or _MISSING when it has none."""
    factory: Callable[[], Any] | Any = f.default_factory
    return factory() if callable(factory) else _MISSING


@functools.cache
def fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Setting | None, Any], ...]:
    """(field, its Setting or None, its resolved type) for each field of dataclass `cls`; worked
    out once per class (resolving the annotations compiles each one: most of reading a course.yml)."""
    hints = typing.get_type_hints(cls)
    return tuple((f, f.metadata.get(SCHEMA), hints[f.name]) for f in dataclasses.fields(cls))


class Scope:
    """The settings of one mapping being read, computed on first use, and the scopes around it.
    Looking up a name not declared here asks the enclosing scope."""

    def __init__(self, cls: type, data: Mapping[str, Any], path: str, *, base: Any = None,
                 given: Mapping[str, Any] | None = None, parent: Scope | None = None):
        self.cls = cls
        self.data = data
        self.path = path
        self.base = base
        self.parent = parent
        self.known: dict[str, Any] = dict(given or {})   # values read so far
        self.given = frozenset(self.known)      # filled by the caller, not read from YAML
        self.declared = {f.name: (f, s, t) for f, s, t in fields(cls)}

    def key_path(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def __getitem__(self, name: str) -> Any:
        if name in self.known:
            return self.known[name]
        if name in self.declared and self.declared[name][1] is not None:
            self.known[name] = self._read(name)
            return self.known[name]
        if self.parent is not None:
            return self.parent[name]
        raise KeyError(name)

    def _default(self, f: dataclasses.Field[Any], s: Setting) -> Any:
        if self.base is not None:
            return getattr(self.base, f.name)
        if s.derive is not None:
            return s.derive(self)
        if f.default is not _MISSING:
            return f.default
        return _factory_default(f)

    def _read(self, name: str) -> Any:
        f, s, tp = self.declared[name]
        assert s is not None
        key = s.key or f.name
        path = self.key_path(key)
        default = self._default(f, s)
        raw = self.data.get(key)
        if raw is None:
            if default is _MISSING:
                raise ConfigError(f"{path}: missing (required)")
            value = default
        else:
            value = convert(tp, raw, path, setting=s, base=default, scope=self)
        if s.resolve is not None:
            value = s.resolve(value, self)
        if s.check_scope is not None:
            s.check_scope(value, path, self)
        return value

    def build(self) -> Any:
        keys = {(s.key or f.name): f.name for f, s, _ in self.declared.values()
                if s is not None and f.name not in self.given}
        for key in self.data:
            if key not in keys:
                expected = ", ".join(keys)
                raise ConfigError(f"{self.key_path(str(key))}: unknown key (expected one of: {expected})")
        missing = [n for n, (_, s, _) in self.declared.items() if s is None and n not in self.given]
        if missing:
            raise TypeError(f"{self.cls.__name__}: no value given for {', '.join(missing)}")
        return self.cls(**{name: self[name] for name in self.declared})


def read(cls: type, data: Any, path: str = "", *, base: Any = None, given: Mapping[str, Any] | None = None,
         parent: Scope | None = None) -> Any:
    """An instance of dataclass `cls` from the YAML mapping `data` at key path `path`."""
    if not isinstance(data, dict):
        hint = ""
        if isinstance(data, (int, float)) and not isinstance(data, bool) and \
                "points" in {f.name for f in dataclasses.fields(cls)}:
            hint = f" (a problem's points go under its name: `{path.rsplit('.', 1)[-1]}: {{points: {show(data)}}}`)"
        raise ConfigError(f"{path or 'top level'}: expected a mapping, got {show(data)}{hint}")
    return Scope(cls, data, path, base=base, given=given, parent=parent).build()


def _fail(path: str, expected: str, value: Any) -> ConfigError:
    return ConfigError(f"{path}: expected {expected}, got {show(value)}")


def convert(tp: Any, raw: Any, path: str, *, setting: Setting | None = None, base: Any = None,
            scope: Scope | None = None) -> Any:
    """The YAML value `raw` as type `tp`, checked; `base` is what a partial mapping completes."""
    check = setting.check if setting is not None else None
    expected = check.for_type(tp) if check else describe(tp, setting)
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return convert(inner[0] if len(inner) == 1 else Union[tuple(inner)], raw, path,  # noqa: UP007
                       setting=setting, base=base, scope=scope)
    if dataclasses.is_dataclass(tp):
        return read(tp, raw, path, base=base, parent=scope)     # type: ignore[arg-type]
    value: Any
    if origin is tuple:
        value = _convert_tuple(args[0], raw, path, setting, expected, scope)
    elif origin is dict:
        value = _convert_dict(args[1], raw, path, setting, base, scope)
    elif origin is Literal:
        if raw not in args:
            raise _fail(path, expected, raw)
        value = raw
    else:
        value = _scalar(tp, raw, path, expected, scope)
    if check is not None and not check.holds(value):
        raise _fail(path, expected, raw)
    return value


def _convert_tuple(item: Any, raw: Any, path: str, setting: Setting | None, expected: str,
                   scope: Scope | None) -> tuple[Any, ...]:
    if setting is not None and setting.keyed_by:
        if not isinstance(raw, dict):
            raise _fail(path, describe(tuple[item, ...], setting), raw)
        out = []
        for key, value in raw.items():
            kpath = f"{path}.{key}"
            key_setting = {f.name: s for f, s, _ in fields(item)}[setting.keyed_by]
            name = convert(_key_type(item, setting.keyed_by), key, kpath, setting=key_setting, scope=scope)
            out.append(read(item, value if value is not None else {}, kpath, given={setting.keyed_by: name},
                            parent=scope))
        return tuple(out)
    if not isinstance(raw, list):
        raise _fail(path, expected, raw)
    each = Setting(help="", check=setting.item_check) if setting is not None and setting.item_check else None
    return tuple(convert(item, v, f"{path}[{i}]", setting=each, scope=scope) for i, v in enumerate(raw))


def _key_type(cls: type, name: str) -> Any:
    return {f.name: t for f, _, t in fields(cls)}[name]


def _convert_dict(item: Any, raw: Any, path: str, setting: Setting | None, base: Any,
                  scope: Scope | None) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _fail(path, "a mapping", raw)
    allowed = setting.keys if setting is not None else None
    out: dict[str, Any] = dict(base) if isinstance(base, dict) else {}
    for key, value in raw.items():
        kpath = f"{path}.{key}"
        if allowed is not None and key not in allowed:
            raise ConfigError(f"{kpath}: unknown key (expected one of: {', '.join(allowed)})")
        if not isinstance(key, str):
            raise _fail(kpath, "a text key", key)
        inherited = out.get(key)
        if value is None and inherited is not None:
            continue
        out[key] = convert(item, value, kpath, base=inherited, scope=scope)
    return out


def _scalar(tp: Any, raw: Any, path: str, expected: str, scope: Scope | None) -> Any:
    if tp is bool:
        if not isinstance(raw, bool):
            raise _fail(path, expected, raw)
        return raw
    if tp in (int, float):
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            raise _fail(path, expected, raw)
        if tp is int and raw != int(raw):
            raise _fail(path, expected, raw)
        return tp(raw)
    if tp is str:
        if not isinstance(raw, str) or not raw.strip():
            raise _fail(path, expected, raw)
        return raw
    if tp is Path:
        if not isinstance(raw, str) or not raw.strip():
            raise _fail(path, expected, raw)
        return Path(raw)
    if tp is dt.datetime:
        return _datetime(raw, path, expected)
    raise TypeError(f"{path}: the schema uses a type the reader does not know: {tp!r}")


_ISO_SHAPE = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$")


def _datetime(raw: Any, path: str, expected: str) -> dt.datetime:
    """A date-time; a date alone is the end of that day (23:59:59), whether YAML read it as a date
    (`due: 2026-12-14`) or a string (`due: "2026-12-14"`); no timezone: UTC."""
    if isinstance(raw, str):
        with contextlib.suppress(ValueError):
            raw = dt.date.fromisoformat(raw)
    if isinstance(raw, dt.datetime):
        parsed = raw
    elif isinstance(raw, dt.date):
        parsed = dt.datetime.combine(raw, dt.time(23, 59, 59))
    elif isinstance(raw, str):
        try:
            parsed = dt.datetime.fromisoformat(raw)
        except ValueError as exc:
            if _ISO_SHAPE.match(raw.strip()):    # written as one, but no such day or time (Feb 30, 24:00)
                raise ConfigError(f"{path}: {show(raw)} is written as an ISO date-time but no such date or time "
                                  f"exists ({exc})") from None
            raise _fail(path, expected, raw) from None
    else:
        raise _fail(path, expected, raw)
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)


# --------------------------------------------------------------------------- describing

def describe(tp: Any, setting: Setting | None = None) -> str:
    """The type of a key in words, as errors and the reference page use it."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        text = " or ".join(describe(a, setting) for a in inner)
        return text
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if origin is tuple:
        if setting is not None and setting.keyed_by:
            return f"a mapping of {_keyed_noun(args[0], setting.keyed_by)} to settings"
        return "a list"
    if origin is dict:
        if setting is not None and setting.keys:
            return f"a mapping with keys {' / '.join(setting.keys)}"
        return "a mapping"
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    words = {bool: "true or false", int: "an integer", float: "a number", str: "a non-empty string",
             Path: "a file path",
             dt.datetime: "an ISO date-time like 2026-12-14T23:59:00+00:00"}
    return words.get(tp, getattr(tp, "__name__", str(tp)))


def _keyed_noun(item: Any, key: str) -> str:
    """"problem name" for Problem items keyed by their name."""
    return f"{getattr(item, '__name__', 'item').lower()} {key}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default_text(f: dataclasses.Field[Any], s: Setting) -> str:
    if s.default_doc is not None:
        return s.default_doc
    if (f.default is not _MISSING and f.default is not None) or f.default_factory is not _MISSING:
        value = f.default if f.default is not _MISSING else _factory_default(f)
        if dataclasses.is_dataclass(value):
            return "the defaults of its keys"
        if isinstance(value, dict):
            return "; ".join(f"{k}: {_inline(v)}" for k, v in value.items()) or "none"
        return f"`{value}`"
    if f.default is None:
        return "none"
    return "required"


def _inline(value: Any) -> str:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ", ".join(f"{f.name} `{getattr(value, f.name)}`" for f in dataclasses.fields(value))
    return f"`{value}`"


def sections(cls: type, where: str = "") -> list[tuple[type, list[str]]]:
    """Each dataclass reachable from `cls` with the key paths it is read at, in reading order."""
    found: dict[type, list[str]] = {}

    def walk(c: type, at: str) -> None:
        found.setdefault(c, []).append(at)
        for f, s, tp in fields(c):
            if s is None:
                continue
            sub = f"{at}.{s.key or f.name}" if at else (s.key or f.name)
            for inner, suffix in _nested(tp, s):
                walk(inner, sub + suffix)

    walk(cls, where)
    return list(found.items())


def _nested(tp: Any, s: Setting) -> list[tuple[type, str]]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (Union, types.UnionType):
        return [x for a in args for x in _nested(a, s)]
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return [(tp, "")]
    if origin is tuple:
        suffix = f".<{s.keyed_by}>" if s.keyed_by else "[]"
        return [(i, suffix) for i, _ in _nested(args[0], s)]
    if origin is dict:
        key = "<" + ("|".join(s.keys) if s.keys else "name") + ">"
        return [(i, f".{key}") for i, _ in _nested(args[1], s)]
    return []


def reference(cls: type, *, title: str, intro: str) -> str:
    """A Markdown page with one table per mapping of the schema rooted at `cls`."""
    lines = [f"# {title}", "", intro.strip(), ""]
    keyed = {(inner, s.keyed_by) for c, _ in sections(cls) for f, s, tp in fields(c)
             if s is not None and s.keyed_by for inner, _ in _nested(tp, s)}
    for c, paths in sections(cls):
        shown = ", ".join(f"`{p}`" for p in paths if p) or "top level"
        lines += [f"## {shown}", ""]
        doc = (c.__doc__ or "").strip()
        if doc and not doc.startswith(f"{c.__name__}("):
            lines += [" ".join(doc.split()), ""]
        lines += ["| key | type | default | meaning |", "|---|---|---|---|"]
        for f, s, tp in fields(c):
            if s is None:
                continue
            kind = s.check.for_type(tp) if s.check else describe(tp, s)
            each = _each(tp, s)
            if each:
                kind = f"{kind}, each {each}"
            if (c, f.name) in keyed:
                key, default = f"<{f.name}>", "(the mapping key)"
            else:
                key, default = f"`{s.key or f.name}`", _default_text(f, s)
            lines.append(f"| {key} | {_cell(kind)} | {_cell(default)} | {_cell(s.help)} |")
        lines.append("")
    return "\n".join(lines)


def _each(tp: Any, s: Setting) -> str:
    """What each item of a list or each value of a mapping is, for the reference page."""
    tp = _bare(tp)
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and not s.keyed_by:
        return s.item_check.for_type(args[0]) if s.item_check else describe(args[0])
    if typing.get_origin(tp) is dict:
        return describe(args[1])
    return ""


def _bare(tp: Any) -> Any:
    if typing.get_origin(tp) in (Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return inner[0] if len(inner) == 1 else tp
    return tp
