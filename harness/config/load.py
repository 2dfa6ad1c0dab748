"""Reads a YAML config, applies `--config.KEY=VALUE` overrides, and builds the Experiment."""

from __future__ import annotations

import copy
import dataclasses
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from harness.common import userfiles
from harness.config import schema
from harness.config.experiment import (
    Collector,
    ConfigError,
    ConfigErrors,
    Experiment,
    Program,
    Variant,
    combined,
)
from harness.store.records import shown, suggest

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
OVERRIDE_PREFIX = "--config."


@dataclasses.dataclass(frozen=True)
class OverrideFlag:
    """One `--config.KEY=VALUE` flag: the dotted key, the value as typed, and what it replaced."""

    key: str
    text: str
    value: Any = None
    previous: Any = None


@dataclasses.dataclass(frozen=True)
class LoadedConfig:
    """The validated experiment plus where it came from, for the manifest."""

    path: Path
    experiment: Experiment
    raw: Mapping[str, Any]
    overrides: tuple[OverrideFlag, ...]


def resolve_path(name: str) -> Path:
    """Returns the config file for `name`; a bare file name is looked up in configs/."""
    path = Path(name)
    if not path.exists() and len(path.parts) == 1:
        path = CONFIG_DIR / name
    if not path.exists():
        raise ConfigError(str(name), "", f"config file not found (also looked in {CONFIG_DIR})")
    if not path.is_file():
        raise ConfigError(str(path), "", "is not a file")
    return path


MAX_YAML_BYTES = 1 << 20
MAX_YAML_NODES = 100_000  # aliases counted as expanded: a billion-laughs file stops here
MAX_YAML_DEPTH = 32


def safe_yaml(text: str, source: str) -> Any:
    """Returns the plain data of YAML `text`, refusing what a config never needs.

    `yaml.safe_load` semantics (no tags that build objects), plus: at most MAX_YAML_BYTES,
    MAX_YAML_NODES nodes counting aliases as expanded, MAX_YAML_DEPTH levels of nesting, and
    no key twice in one mapping. Every refusal is a ConfigError naming `source` and the line.
    """
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(source, "", f"is {len(text)} bytes; configs are at most {MAX_YAML_BYTES}")
    depth = _bracket_depth(text)
    if depth > MAX_YAML_DEPTH:
        raise ConfigError(source, "", f"nests {depth} levels deep; at most {MAX_YAML_DEPTH}")
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_nodes(node, source)
        _check_numbers(node, source)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "unknown line"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        if isinstance(e, yaml.constructor.ConstructorError):
            raise ConfigError(
                source,
                "",
                f"YAML tag not allowed at {where}: {problem}; "
                "configs are plain YAML (mappings, lists, strings, numbers, booleans)",
            ) from e
        raise ConfigError(source, "", f"YAML syntax error at {where}: {problem}") from e
    except RecursionError:
        raise ConfigError(source, "", f"nests too deep; at most {MAX_YAML_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()


def _bracket_depth(text: str) -> int:
    """Returns the deepest nesting of flow brackets outside quotes and comments (block
    nesting is bounded by indentation, which the node walk checks)."""
    depth = deepest = 0
    for line in text.splitlines():
        quote = ""
        previous = " "
        for ch in line:
            if quote:
                if ch == quote:
                    quote = ""
            elif ch == "#" and previous in " \t":
                break
            elif ch in "\"'" and previous in " \t[{,:":
                quote = ch
            elif ch in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif ch in "]}":
                depth = max(0, depth - 1)
            previous = ch
    return deepest


def _check_nodes(root: yaml.Node, source: str) -> None:
    """Walks the node graph once per alias use, bounding its size and depth, and refuses a
    mapping that holds the same key twice (PyYAML would keep the last one silently)."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise ConfigError(
                source, "", f"expands to over {MAX_YAML_NODES} values (through aliases?)"
            )
        if depth > MAX_YAML_DEPTH:
            line = node.start_mark.line + 1
            raise ConfigError(
                source, "", f"nests deeper than {MAX_YAML_DEPTH} levels at line {line}"
            )
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if key.value in first:
                        raise ConfigError(
                            source,
                            shown(key.value),
                            f"duplicate key: at line {first[key.value]} and again at line {line}",
                        )
                    first[key.value] = line
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


# No config number needs more characters; Python's int() refuses strings past 4300 digits
# (ValueError) and float() of an integer past about 309 (OverflowError), both tracebacks.
MAX_NUMBER_CHARS = 100
_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _check_numbers(root: yaml.Node, source: str) -> None:
    """Refuses a number too long to be any config value, naming its dotted key, before
    PyYAML converts it. Runs after _check_nodes, which bounds the walk."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, key = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                name = k.value if isinstance(k, yaml.ScalarNode) else "?"
                stack.append((k, key))
                stack.append((v, f"{key}.{name}" if key else str(name)))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{key}[{i}]") for i, item in enumerate(node.value))
        elif node.tag in _NUMBER_TAGS and len(node.value) > MAX_NUMBER_CHARS:
            raise ConfigError(
                source,
                key,
                f"a number of {len(node.value)} characters (line {node.start_mark.line + 1}); "
                f"config numbers have at most {MAX_NUMBER_CHARS}",
            )


def read_yaml(path: Path) -> dict[str, Any]:
    """Returns the YAML mapping in `path`; every problem is a ConfigError naming the file."""
    try:
        # Only a regular file, read without blocking and to a bound (a FIFO, /dev/zero and
        # /proc/kmsg would block or never end).
        text = userfiles.read_text(path, MAX_YAML_BYTES)
    except userfiles.Unreadable as e:
        raise ConfigError(str(path), "", str(e).removeprefix(f"{path}: ")) from None
    data = safe_yaml(text, str(path))
    if not isinstance(data, dict):
        raise ConfigError(
            str(path), "", f"the top level must be a mapping of keys, got {type(data).__name__}"
        )
    return data


def parse_override(arg: str) -> OverrideFlag:
    """Returns the OverrideFlag for one `--config.a.b=value` flag."""
    if not arg.startswith(OVERRIDE_PREFIX):
        raise ConfigError(f"flag {arg}", "", "overrides look like --config.KEY.PATH=VALUE")
    if "=" not in arg:
        key = arg[len(OVERRIDE_PREFIX) :]
        raise ConfigError(
            f"flag {arg}", key, f"has no value; write --config.{key or 'problem.m'}=VALUE"
        )
    key, text = arg[len(OVERRIDE_PREFIX) :].split("=", 1)
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(
            f"flag {arg}", key, "the key has an empty part; write --config.problem.m=64"
        )
    return OverrideFlag(key=key, text=text)


def _field_type(cls: type, name: str, source: str, key: str) -> Any:
    hints = typing.get_type_hints(cls)
    if name not in hints:
        raise ConfigError(source, key, "unknown key" + suggest(name, hints))
    return hints[name]


def _cast(text: str, tp: Any, source: str, key: str) -> Any:
    """Returns the override text as the type the schema expects at that key."""
    origin = typing.get_origin(tp)
    if _is_flow(text, tp):
        return _flow(text, source, key)
    if origin is tuple:
        # `a,b` or YAML's flow form `[a, b]` (what the config file itself would hold).
        bare = text.strip()
        if bare.startswith("[") and bare.endswith("]"):
            bare = bare[1:-1]
        items = [t for t in bare.split(",") if t.strip()] if bare.strip() else []
        (item,) = typing.get_args(tp)[:1]
        return [_cast(t.strip(), item, source, key) for t in items]
    if tp in (int, float, bool) or origin is not None:
        try:
            value = safe_yaml(text, source)
        except ConfigError as e:
            raise ConfigError(
                source, key, f"cannot read {shown(text)} as a value: {e.problem}"
            ) from e
        if tp is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if value == "null":
            value = None
        return value
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        # A quoted item of a flow list (`["eager", "xla"]`, as the harness prints a list it
        # was given): YAML's quotes, not part of the name.
        quoted = safe_yaml(text, source)
        return quoted if isinstance(quoted, str) else text
    return text


def _is_flow(text: str, tp: Any) -> bool:
    """True for a value read whole as YAML flow: a mapping (`{attention: cudnn}`), or a list
    that nests lists or mappings (`[[256, 256], [256]]`), which splitting on commas would cut."""
    bare = text.strip()
    if bare.startswith("{"):
        return True
    return bare.startswith("[") and any(c in bare[1:-1] for c in "[]{}")


def _flow(text: str, source: str, key: str) -> Any:
    """Returns a flag's value read as YAML flow; one line naming the flag when it is not."""
    try:
        return safe_yaml(text, source)
    except ConfigError as e:
        raise ConfigError(
            source, key, f"cannot read {shown(text)} as a YAML flow value: {e.problem}"
        ) from None


def _scalar(text: str) -> Any:
    try:
        return safe_yaml(text, "flag")
    except ConfigError:
        return text


def apply_override(raw: dict[str, Any], ov: OverrideFlag) -> OverrideFlag:
    """Writes one override into `raw` in place; returns it with the value and the previous one.

    A variant is addressed by name: `variants.<name>.<key>`, for example
    `--config.variants.xla_no_fusion.xla_options.xla_disable_hlo_passes=fusion`.
    """
    source = f"flag --config.{ov.key}"
    parts = ov.key.split(".")
    node: dict[str, Any] = raw
    cls: type = Experiment
    i = 0
    while i < len(parts) - 1:
        part = parts[i]
        if cls is Experiment and part == "variants":
            node, cls, i = _named_variant(raw, parts[i + 1], source, ov.key), Variant, i + 2
            if i >= len(parts):
                raise ConfigError(
                    source, ov.key, "name a key inside the variant, e.g. variants.xla.mode"
                )
            continue
        if cls is Variant and part == "xla_options":
            return _set_free_key(node, part, ".".join(parts[i + 1 :]), ov)
        if cls is Program and part == "kwargs" and i == len(parts) - 2:
            # One keyword argument: `program.kwargs.attention=cudnn`.
            return _set_free_key(node, part, parts[-1], ov)
        node, cls = _section(node, cls, part, source, ov.key)
        i += 1
    return _set_leaf(node, cls, parts[-1], ov, source)


def _named_variant(raw: dict[str, Any], name: str, source: str, key: str) -> dict[str, Any]:
    """Returns the config's variant named `name`; one line naming the flag when there is none."""
    variants = raw.get("variants") or []
    found = [v for v in variants if isinstance(v, dict) and v.get("name") == name]
    if not found:
        names = [v.get("name") for v in variants if isinstance(v, dict)]
        raise ConfigError(source, key, f"no variant named {shown(name)}" + suggest(name, names))
    return found[0]


def _set_free_key(node: dict[str, Any], section: str, key: str, ov: OverrideFlag) -> OverrideFlag:
    """Writes a key of a section whose keys the schema does not list (a variant's
    xla_options, a program's kwargs), read as a YAML scalar; made where the file has none."""
    if not isinstance(node.get(section), dict):
        node[section] = {}
    previous = node[section].get(key)
    node[section][key] = _scalar(ov.text)
    return dataclasses.replace(ov, value=node[section][key], previous=previous)


def _section(
    node: dict[str, Any], cls: type, part: str, source: str, key: str
) -> tuple[dict[str, Any], type]:
    """Returns the mapping of the section `part` of `node` (a `cls`), made where the file has
    none, and the section's type; one line naming the flag where `part` is a value, or not a
    mapping in the file."""
    tp = _field_type(cls, part, source, key)
    if not dataclasses.is_dataclass(tp):
        raise ConfigError(source, key, f"{part!r} is a value, not a section")
    child = node.get(part)
    if child is None:
        child = node[part] = {}
    if not isinstance(child, dict):
        raise ConfigError(source, key, f"{part!r} is not a mapping in the config file")
    return child, tp


def _set_leaf(
    node: dict[str, Any], cls: type, leaf: str, ov: OverrideFlag, source: str
) -> OverrideFlag:
    """Writes the override's value, cast to its field's type, as the key `leaf` of `node`."""
    if cls is Variant and leaf == "name":
        raise ConfigError(source, ov.key, "a variant's name cannot be overridden")
    tp = _field_type(cls, leaf, source, ov.key)
    if dataclasses.is_dataclass(tp) or leaf in ("variants", "xla_options"):
        raise ConfigError(source, ov.key, f"{leaf!r} is a section; override one key inside it")
    previous = node.get(leaf)
    node[leaf] = _cast(ov.text, tp, source, ov.key)
    return dataclasses.replace(ov, value=node[leaf], previous=previous)


def load(config: str, overrides: Sequence[str] = ()) -> LoadedConfig:
    """Returns the validated config for a file name and `--config.*` flags; raises ConfigError."""
    path = resolve_path(config)
    raw = read_yaml(path)
    merged = copy.deepcopy(raw)
    # Every bad flag and every mistake of the file are reported together: a flag that fails
    # is left out, and the config is still read and checked without it.
    found = Collector()
    applied: list[OverrideFlag] = []
    for o in overrides:
        with found.check():
            applied.append(apply_override(merged, parse_override(o)))
    try:
        refuse_problem_in_program_study(merged, str(path))
        experiment = schema.build_experiment(merged, str(path))
    except ConfigError as e:
        raise combined([*found.errors, blame(path, applied, e)]) from e
    found.done()
    return LoadedConfig(path=path, experiment=experiment, raw=merged, overrides=tuple(applied))


PROGRAM_HAS_NO_PROBLEM = (
    "a program study has no `problem` (the GELU expression's m, k, n, gelu, ...), so it would "
    "change nothing; change dtypes with `program: {dtype: ..., w_dtype: ...}` and the "
    "function's own knobs with `program: {kwargs: {...}}`"
)


def refuse_problem_in_program_study(raw: Mapping[str, Any], source: str) -> None:
    """Raises ConfigError where a `program:` study's file or flags write a `problem`, at the
    study or in a variant, even one equal to the defaults (`problem: {gelu: tanh}`), which the
    built config could not tell from none. The key is the first one written, so a flag that
    wrote it is blamed (`blame`): the file, a variant and a flag are refused alike."""
    if not isinstance(raw.get("program"), Mapping):
        return

    def key_of(where: str, section: Any) -> str:
        first = next(iter(section), None) if isinstance(section, Mapping) else None
        return f"{where}.{first}" if first is not None else where

    if "problem" in raw:
        raise ConfigError(source, key_of("problem", raw["problem"]), PROGRAM_HAS_NO_PROBLEM)
    for variant in raw.get("variants") or ():
        if isinstance(variant, Mapping) and "problem" in variant:
            where = f"variants.{variant.get('name')}.problem"
            raise ConfigError(source, key_of(where, variant["problem"]), PROGRAM_HAS_NO_PROBLEM)


def blame(path: Path, overrides: Sequence[OverrideFlag], e: ConfigError) -> ConfigError:
    """Returns `e` re-sourced to the flag that set its key, else to the config file.

    Used for errors found while building the config and for those only the installed jaxlib
    or the device can find (run.preflight), so every error names where the value came from.
    """
    if isinstance(e, ConfigErrors):
        return combined([blame(path, overrides, one) for one in e.errors])
    for ov in overrides:
        if e.key == ov.key:
            return ConfigError(f"flag --config.{ov.key} (config {path})", e.key, e.problem)
    source = str(path) if not overrides else f"{path} (with overrides)"
    return ConfigError(source, e.key, e.problem)
