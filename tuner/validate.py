"""One validation layer for everything occtune reads: files (schemas) and CLI options (types).

- :class:`Rule`: what one value may be: its kind, a range, finiteness, the known values.
- Schemas are small dataclasses whose fields carry a rule (``spec(Rule(...))``); :func:`load`
  checks a mapping against one (required keys present, unknown keys rejected, every value by its
  rule) and builds the instance. Target profiles, kernel profiles and results files use it.
- click parameter types on the same rules (:class:`Value`, :class:`ValueList`) and the common
  ones: :data:`POSITIVE_INT`, :func:`finite`, :data:`SIZE_VALUE`, :data:`SIZE_LIST`.

Every failure is a :class:`~occtune.errors.UserError` (or click's usage error for an option),
one line naming where and what, exit code 2.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import MISSING, dataclass, field
from pathlib import Path

import click

from occtune.errors import UserError
from occtune.units import parse_size

SIZE = "size"     # a Rule kind: a byte count, as an integer or a string such as 40K
_KIND_TEXT = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false",
              list: "a list", dict: "a mapping", SIZE: "a byte size"}
NAME_PATTERN = r"[A-Za-z0-9_.+-]{1,64}"     # target and family names: one plain word


@dataclass(frozen=True)
class Rule:
    kind: object = object       # int, float (an int is accepted), str, bool, list, dict or SIZE
    min: float | None = None    # inclusive bounds (for a list: on each item via ``items``)
    max: float | None = None
    above: float | None = None  # exclusive lower bound: above=0 means positive
    choices: tuple = ()         # the known values
    pattern: str | None = None  # a str must match it whole
    items: "Rule | None" = None  # a list: the rule of every item
    length: int | None = None   # a list: exactly this many items
    multiple: int | None = None  # an int: a multiple of this
    text: str = ""              # what the value must be, in words, where the fields don't say it
    nullable: bool = False      # None is allowed

    def describe(self) -> str:
        if self.text:
            return self.text
        if len(self.choices) == 2:
            return f"{self.choices[0]} or {self.choices[1]}"
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices))
        text = _KIND_TEXT.get(self.kind, "a value")
        if self.min is not None and self.max is not None:
            text += f" in {_num(self.min)}..{_num(self.max)}"
        elif self.min is not None:
            text += f" >= {_num(self.min)}"
        elif self.max is not None:
            text += f" <= {_num(self.max)}"
        if self.above == 0:
            text = "a positive " + text.split(" ", 1)[1]
        elif self.above is not None:
            text += f" > {_num(self.above)}"
        if self.multiple is not None:
            text += f", a multiple of {self.multiple}"
        if self.length is not None:
            text = f"a list of {self.length}"
        if self.items is not None:
            text += f", each {self.items.describe()}"
        if self.kind is SIZE:
            text += " (e.g. 40960, 40K, 40KiB)"
        return text + (" (or null)" if self.nullable else "")

    def check(self, value, what: str):
        """``value`` if it obeys the rule (a SIZE parsed to an int), else a UserError naming ``what``."""
        if value is None and self.nullable:
            return None
        value = self._typed(value, what)
        if self.choices and value not in self.choices:
            self._fail(value, what)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if ((self.min is not None and value < self.min) or (self.max is not None and value > self.max)
                    or (self.above is not None and value <= self.above)):
                self._fail(value, what)
        if self.multiple is not None and value % self.multiple:
            self._fail(value, what)
        if self.pattern is not None and not re.fullmatch(self.pattern, value):
            self._fail(value, what)
        if self.length is not None and len(value) != self.length:
            self._fail(value, what)
        if self.items is not None:
            value = [self.items.check(v, f"{what}[{i}]") for i, v in enumerate(value)]
        return value

    def _typed(self, value, what: str):
        if self.kind is SIZE:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                self._fail(value, what)
            try:
                return parse_size(value, what)
            except UserError:
                self._fail(value, what)
        if self.kind is object:
            return value
        if isinstance(value, bool) and self.kind is not bool:
            self._fail(value, what)
        if self.kind is float:
            ok = isinstance(value, (int, float)) and _finite(value)
        else:
            ok = isinstance(value, self.kind)
        if not ok:
            self._fail(value, what)
        return value

    def _fail(self, value, what: str):
        raise UserError(f"{what} must be {self.describe()}, got {_show(value)}")


def _finite(x) -> bool:
    try:
        return math.isfinite(float(x))
    except OverflowError:           # an int too large for a float
        return False


def _num(x) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else str(x)


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


POSITIVE = Rule(int, above=0)
NON_NEGATIVE = Rule(int, min=0)
TEXT = Rule(str, pattern=r"(?s).*\S.*", text="a non-blank string")
NAME = Rule(str, pattern=NAME_PATTERN, text="a plain name (at most 64 letters, digits, _ . + -)")


# --------------------------------------------------------------------------- schema dataclasses


def parse_yaml(text: str):
    """yaml.safe_load, with libyaml's C parser where PyYAML has it (a timed results file of
    3,000 lines: ~10x faster)."""
    import yaml

    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def read_yaml(path: str | Path, what: str):
    """The parsed contents of a YAML file; an unreadable or malformed file is a UserError."""
    import yaml

    path = Path(path)
    try:
        return parse_yaml(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read {what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text (UTF-8) file; pass a {what} YAML") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None


def spec(rule: Rule, default=MISSING):
    """A dataclass field checked by ``rule`` when loaded through :func:`load`; with a default the
    key is optional."""
    return field(default=default, metadata={"rule": rule})


def _schema_fields(cls) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(cls) if "rule" in f.metadata}


def load(cls, data, where: str, **extra):
    """An instance of the schema dataclass ``cls`` from the mapping ``data`` (a file's contents).

    Every key must be a field of ``cls`` with a rule, every field without a default must be
    there, every value must obey its rule. ``extra``: fields that are not keys (e.g. ``path``).
    """
    fields = _schema_fields(cls)
    if not isinstance(data, dict):
        raise UserError(f"{where}: {not_a_mapping(data)}; expected a mapping with keys {', '.join(fields)}")
    for key in data:
        if key not in fields:
            raise UserError(f"{where}: unknown key {_show(key)} (allowed: {', '.join(fields)})")
    values = {}
    for name, f in fields.items():
        if name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise UserError(f"{where}: missing key '{name}'")
            continue
        values[name] = f.metadata["rule"].check(data[name], f"{where}: key '{name}'")
    return cls(**values, **extra)


def not_a_mapping(data) -> str:
    """What a file's contents are, said to someone who expected ``key: value`` lines."""
    if data is None:
        return "the file is empty"
    if isinstance(data, str):
        return f"it reads as plain text ({_show(data)}), not as YAML keys"
    if isinstance(data, list):
        return f"it holds a list of {len(data)} item(s), not keys"
    return f"it holds one value ({_show(data)}), not keys"


def check_keys(data, rules: dict[str, Rule], where: str, key: str, *, required: bool = True,
               closed: bool = True) -> dict:
    """The mapping under ``key`` of file ``where``, checked entry by entry against ``rules``: for
    schemas known only at run time or open to more keys. ``required``: every key of ``rules``
    must be there; ``closed``: no other key may be."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: key '{key}' must be a mapping, got {_show(data)}")
    for k in data:
        if closed and k not in rules:
            raise UserError(f"{where}: unknown key {_show(f'{key}.{k}')}")
    for k in rules:
        if required and k not in data:
            raise UserError(f"{where}: missing key '{key}.{k}'")
    return {k: rules[k].check(v, f"{where}: key '{key}.{k}'") if k in rules else v for k, v in data.items()}


# --------------------------------------------------------------------------- click option types


class Value(click.ParamType):
    """One option value checked by a rule: ``--k 2048``, ``--headroom 1.25``, ``--static-lds 7K``."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.name = {int: "integer", float: "number", SIZE: "size"}.get(rule.kind, "value")

    def convert(self, value, param, ctx):
        try:
            return self.rule.check(typed_value(value, self.rule.kind, sizes=False), "")
        except UserError:
            self.fail(f"must be {self.rule.describe()}, got {_show(value)}", param, ctx)


class ValueList(click.ParamType):
    """A comma-separated list of values each checked by a rule: ``--budgets 32K,40K``; never empty."""

    def __init__(self, rule: Rule, example: str):
        self.rule, self.example = rule, example
        self.name = "list"

    def convert(self, value, param, ctx):
        if isinstance(value, (list, tuple)):
            return list(value)
        items = [t.strip() for t in str(value).split(",")]
        if not all(items):
            self.fail(f"must be a comma-separated list such as {self.example}, got {_show(value)}", param, ctx)
        bad = next((t for t in items if not _obeys(self.rule, t)), None)
        if bad is not None:
            self.fail(f"{_show(bad)} is not {self.rule.describe()}", param, ctx)
        return [self.rule.check(typed_value(t, self.rule.kind, sizes=False), "") for t in items]


def _obeys(rule: Rule, text: str) -> bool:
    try:
        rule.check(typed_value(text, rule.kind, sizes=False), "")
        return True
    except UserError:
        return False


def typed_value(text, kind=object, *, sizes: bool = True):
    """One value as typed on the command line (``--k 2048``, ``--set BLOCK_M=16``), as ``kind``
    reads it: true or false for bool, an integer for int (with ``sizes``, 40K too), a number for
    float; text the kind cannot read is left as it is, for the rule to reject (a value that is
    no text is returned as it is). ``object`` (a kind nobody declared): a bool, an integer, a
    size, a number or a word, whichever the text is."""
    if not isinstance(text, str):
        return text
    t = text.strip()
    if kind is bool or (kind is object and t.lower() in ("true", "false")):
        return {"true": True, "false": False}.get(t.lower(), t)
    if kind in (int, float, object):
        try:
            return int(t) if kind is not float else float(t)
        except ValueError:
            pass
        if sizes and t[:1].isdigit():
            try:
                return parse_size(t, "value")
            except UserError:
                pass
        if kind is not int:
            try:
                return float(t)
            except ValueError:
                pass
    return t


def rule_like(values, ints: Rule = NON_NEGATIVE) -> Rule:
    """The rule of a value like ``values`` (a family's default values of one axis or workload
    key), for families that declare none: true or false, an integer (``ints``), a finite number,
    or a plain word."""
    vals = [v for v in values if v is not None]
    if vals and all(isinstance(v, bool) for v in vals):
        return Rule(bool)
    if vals and all(isinstance(v, int) and not isinstance(v, bool) for v in vals):
        return ints
    if vals and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        return Rule(float)
    if vals and all(isinstance(v, str) for v in vals):
        return NAME
    return Rule()


def assignments(items: tuple[str, ...], rules: dict[str, Rule], option: str, owner: str,
                noun: str = "axis") -> dict[str, list]:
    """``("BLOCK_M=16,32", ...)`` given to ``option`` (``--set``) -> ``{"BLOCK_M": [16, 32]}``:
    each name one of ``rules`` (the ``noun``s of ``owner``, e.g. the axes of topk), each value
    typed and checked by its rule; a one-line UserError otherwise."""
    out: dict[str, list] = {}
    for item in items:
        name, sep, values = item.partition("=")
        name = name.strip()
        texts = [v.strip() for v in values.split(",")]
        if not sep or not name or not all(texts):
            word = "AXIS" if noun == "axis" else "KEY"
            raise UserError(f"{option} {item!r}: write {word}=VALUE, e.g. {option} "
                            f"{next(iter(rules), 'x')}=...")
        if name not in rules:
            plural = "axes" if noun == "axis" else f"{noun}s"
            raise UserError(f"{option} {item}: {owner} has no {noun} {name!r}; {plural}: {', '.join(rules) or 'none'}")
        rule = rules[name]
        out[name] = list(dict.fromkeys(rule.check(typed_value(t, rule.kind), f"{option} {name}") for t in texts))
    return out


def finite(lo: float | None = None, *, above: float | None = None) -> Value:
    return Value(Rule(float, min=lo, above=above))


POSITIVE_INT = Value(POSITIVE)
SIZE_VALUE = Value(Rule(SIZE))
SIZE_LIST = ValueList(Rule(SIZE, above=0), "32K,40K,48K")
POSITIVE_INT_LIST = ValueList(POSITIVE, "8,16,32")
