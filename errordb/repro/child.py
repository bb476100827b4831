"""The process that actually executes record snippets for :mod:`errordb.repro`.

Run ONLY by :mod:`errordb.repro.sandbox`, as ``python -I -S -B <path to this file>``:

* ``-I`` (isolated mode) ignores ``PYTHON*`` environment variables and the user
  site directory and, since Python 3.11, does not put this file's directory on
  ``sys.path`` -- so nothing of the project (or of the user's environment) is
  importable here; ``-S`` skips ``site``, so site-packages (and any ``.pth``
  file, e.g. an editable install of this project) is not on the path either.
  That is why this script is stdlib-only and is passed by file path, never
  with ``-m``.
* The parent starts it in an empty temporary working directory with a minimal
  environment, kills its whole process group on timeout, and treats a
  non-zero exit or a signal as a crash.

Protocol
--------
stdin: one JSON object (the *job*, built by ``errordb.repro.run._subject_job``; the sandbox
adds ``limits``)::

    {"protocol": 1,
     "limits": {"cpu_seconds": 11, "address_space_bytes": 2147483648},
     "guards": {RECORD_ID: {"filename", "source", "function", "first_line",
                            "prelude"}},
     "stand_in_modules": {"pkg.mod": {"attr": "pp_group" | "model" | "config"}},
     "advice": [{"key", "record", "field", "filename", "source", "call"}],
     "scenarios": [{"key", "guard", "call", "caller_filename", "pp",
                    "config", "state", "model_state"}]}

stdout: one JSON line per scenario, flushed as soon as that scenario is done,
so that the parent can tell *which* scenario hung or crashed.  Everything a
snippet prints goes to stderr instead (file descriptor 1 is re-pointed at 2
before any snippet runs), so snippet output can never forge a result line.

The security boundary is around this process, not in it: on Linux it runs in
bubblewrap's sandbox (:mod:`errordb.repro.sandbox`), and without one only
definitions a maintainer reviewed, whose record fields are pinned by digest,
are sent here (unless the user says ``--unsafe``).
"""

import ast
import builtins
import inspect
import json
import linecache
import os
import sys
import traceback
import types

PROTOCOL = 1

# The attributes the stand-ins own; they are not part of the observed state.
_STAND_IN_ATTRS = ("pp_group", "model", "config")


class HarnessError(Exception):
    """The scenario could not be set up (not an outcome of the snippet)."""


# --------------------------------------------------------------------------
# sandbox set-up
# --------------------------------------------------------------------------


def _apply_limits(limits):
    """Lower resource limits for this process (best effort, POSIX only).

    Limits are lowered for soft *and* hard values, so snippet code cannot
    raise them again.  CPython ignores SIGXFSZ, so with RLIMIT_FSIZE = 0 a
    file write simply fails with an OSError instead of writing anything.
    """
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    wanted = {
        "RLIMIT_CPU": limits.get("cpu_seconds"),
        "RLIMIT_FSIZE": 0,
        "RLIMIT_CORE": 0,
        "RLIMIT_AS": limits.get("address_space_bytes"),
    }
    for name, value in wanted.items():
        if value is None or not hasattr(resource, name):
            continue
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (ValueError, OSError):
            pass


def _remember_source(filename, source):
    """Seed linecache so tracebacks show the stored source lines.

    ``mtime=None`` marks the entry as not backed by a file: ``checkcache``
    leaves it alone, so no path of this machine is ever consulted.
    """
    lines = source.splitlines(keepends=True)
    linecache.cache[filename] = (len(source), None, lines, filename)


def _display_path(filename):
    """Hide paths of this machine (interpreter prefix, this script)."""
    if filename == __file__ or filename == os.path.abspath(__file__):
        return "<errordb.repro.child>"
    for prefix in (sys.base_prefix, sys.prefix):
        if prefix and filename.startswith(prefix + os.sep):
            return "<python>" + filename[len(prefix):]
    return filename


# --------------------------------------------------------------------------
# stand-in objects
# --------------------------------------------------------------------------


def _literal_attrs(mapping, what):
    """Attribute values are Python literals written in the reviewed definition."""
    values = {}
    for name, text in (mapping or {}).items():
        try:
            values[name] = ast.literal_eval(text)
        except (ValueError, SyntaxError) as exc:
            raise HarnessError(f"{what} {name!r}: not a Python literal: {text!r}") from exc
    return values


def _make_pp_group(pp):
    world_size, rank = int(pp["world_size"]), int(pp["rank"])
    # The attribute names of sglang's GroupCoordinator that the guards read.
    return types.SimpleNamespace(
        world_size=world_size,
        rank_in_group=rank,
        is_first_rank=rank == 0,
        is_last_rank=rank == world_size - 1,
    )


def _make_model(function, scenario):
    """A stand-in for the model object whose method is the record's guard.

    The guard is installed as a plain class attribute, so calling
    ``model.<name>(...)`` goes through Python's normal method binding and the
    frame that runs is the guard's own code object.
    """
    cls = type("StandInModel", (), {function.__name__: function})
    model = cls()
    model.pp_group = _make_pp_group(scenario.get("pp") or {})
    model.config = types.SimpleNamespace(**(scenario.get("config") or {}))
    model.model = types.SimpleNamespace()
    for name, value in _literal_attrs(scenario.get("state"), "state").items():
        setattr(model, name, value)
    for name, value in _literal_attrs(scenario.get("model_state"), "model_state").items():
        setattr(model.model, name, value)
    return model


def _install_stand_in_modules(spec, stand_ins):
    """Put stand-in modules (e.g. ``sglang.srt.distributed``) in sys.modules.

    Each attribute is a zero-argument function returning one of the
    scenario's stand-ins, e.g. ``get_pp_group() -> pp_group``.  Parent
    packages are created as needed; they are rebuilt for every scenario.
    """
    for dotted, attrs in (spec or {}).items():
        parts = dotted.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            module = types.ModuleType(name)
            module.__path__ = []  # make it a package so submodules import
            sys.modules[name] = module
            if depth > 1:
                setattr(sys.modules[".".join(parts[: depth - 1])], parts[depth - 1], module)
        module = sys.modules[dotted]
        for attr, target in attrs.items():
            if target not in stand_ins:
                raise HarnessError(f"stand-in module {dotted}.{attr}: unknown stand-in {target!r}")
            value = stand_ins[target]
            setattr(module, attr, lambda value=value: value)


def _snapshot(model):
    """The observable state after a call: repr of every non-stand-in attribute."""
    state = {}
    for name, value in vars(model).items():
        if name not in _STAND_IN_ATTRS:
            state[name] = repr(value)
    for name, value in vars(model.model).items():
        state["model." + name] = repr(value)
    return state


# --------------------------------------------------------------------------
# exceptions and tracebacks
# --------------------------------------------------------------------------


def _exception_type_name(exc):
    cls = type(exc)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _format_traceback(exc, start_filename):
    """Format like the interpreter does, starting at the scenario's caller frame.

    Frames of this harness (above the caller) are dropped.  The format is
    built by hand -- the classic ``File "...", line N, in name`` plus the
    stripped source line, without the column carets newer Pythons add -- so
    that committed transcripts do not depend on the Python version.
    """
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != start_filename:
        tb = tb.tb_next
    frames = traceback.extract_tb(tb) if tb is not None else []
    lines = []
    if frames:
        lines.append("Traceback (most recent call last):")
    for frame in frames:
        lines.append(f'  File "{_display_path(frame.filename)}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append("    " + frame.line.strip())
    for part in traceback.format_exception_only(type(exc), exc):
        lines.extend(part.rstrip("\n").split("\n"))
    raising = None
    if frames:
        last = frames[-1]
        raising = {"file": _display_path(last.filename), "line": last.lineno, "function": last.name}
    return "\n".join(lines) + "\n", raising


def _describe_exception(exc, start_filename):
    text, raising = _format_traceback(exc, start_filename)
    return {
        "type": _exception_type_name(exc),
        "name": type(exc).__name__,
        "message": str(exc),
        "raisingFrame": raising,
    }, text


# --------------------------------------------------------------------------
# running one scenario
# --------------------------------------------------------------------------


def _load_guard(guard):
    """Run the reviewed prelude and the record's function in a fresh module.

    ``source`` is the record's function text padded with blank lines (and,
    for an indented method, an ``if True:`` header on the line just above),
    so the code object carries the real line numbers; ``filename`` is the
    path the real traceback would show.
    """
    namespace = {"__name__": "__repro__", "__builtins__": builtins}
    if guard.get("prelude"):
        exec(compile(guard["prelude"], "<repro prelude>", "exec"), namespace)
    _remember_source(guard["filename"], guard["source"])
    code = compile(guard["source"], guard["filename"], "exec")
    exec(code, namespace)
    function = namespace.get(guard["function"])
    if not callable(function):
        raise HarnessError(f"the snippet did not define {guard['function']!r}")
    if function.__code__.co_firstlineno != guard["first_line"]:
        raise HarnessError(
            f"{guard['function']} starts at line {function.__code__.co_firstlineno}, "
            f"expected {guard['first_line']}"
        )
    return function


def _call_arguments(call, function):
    """Bind the scenario call's literal arguments to the guard's parameters.

    ``model.set_dspark_layers_to_capture(layer_ids=[5])`` gives
    ``{"layer_ids": [5]}``.  The names come from the guard's own signature,
    so advice snippets see exactly the value the guard received.
    """
    tree = ast.parse(call, mode="exec")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        raise HarnessError("the call is not a single expression")
    node = tree.body[0].value
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == function.__name__):
        raise HarnessError(f"the call is not model.{function.__name__}(...)")
    try:
        args = [ast.literal_eval(arg) for arg in node.args]
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    except ValueError as exc:
        raise HarnessError("the call's arguments are not literals") from exc
    bound = inspect.signature(function).bind(None, *args, **kwargs)
    bound.apply_defaults()
    names = dict(bound.arguments)
    names.pop(next(iter(names)))  # ``self``
    return names


def _advice_outcome(exc, filename):
    """The verdict of an advice snippet that raised ``exc``, and the detail that says which check
    said no (``AssertionError: ... (line 2: assert all(...))``).

    reject = the snippet stopped the input on purpose (an assert, or a ``raise`` line of its own).
    Any other exception (ImportError, TypeError from ``len(5)``, ...) means the advice itself
    broke on this input: "error".
    """
    detail = _exception_type_name(exc) + (f": {exc}" if str(exc) else "")
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    line = ""
    if tb is not None and tb.tb_frame.f_code.co_filename == filename:
        line = linecache.getline(filename, tb.tb_lineno).strip()
        detail += f" (line {tb.tb_lineno}: {line})"
    return ("reject" if isinstance(exc, AssertionError) or line.startswith("raise") else "error"), detail


def _stand_ins(job, function, scenario):
    """A fresh stand-in model for ``scenario``, with the stand-in modules returning its parts."""
    model = _make_model(function, scenario)
    _install_stand_in_modules(
        job.get("stand_in_modules"),
        {"pp_group": model.pp_group, "model": model, "config": model.config},
    )
    return model


def _run_advice(job, scenario, function, names):
    results = []
    for advice in job.get("advice", []):
        result = {"key": advice["key"], "record": advice["record"], "field": advice["field"]}
        try:
            model = _stand_ins(job, function, scenario)  # fresh: advice must not see (or leave) the call's effects
            namespace = {"__name__": "__advice__", "__builtins__": builtins, "model": model}
            namespace.update(names)
            _remember_source(advice["filename"], advice["source"])
            exec(compile(advice["source"], advice["filename"], "exec"), namespace)
            if advice.get("call"):
                value = eval(compile(advice["call"], "<repro advice call>", "eval"), namespace)
                result.update(verdict="accept" if value else "reject", detail=f"returns {value!r}")
            else:
                result.update(verdict="accept", detail="passes")
        except BaseException as exc:  # noqa: BLE001 - SystemExit etc. are outcomes too
            verdict, detail = _advice_outcome(exc, advice["filename"])
            result.update(verdict=verdict, detail=detail)
        results.append(result)
    return results


def run_scenario(job, scenario):
    result = {"key": scenario["key"], "outcome": None, "exception": None,
              "traceback": None, "returnValue": None, "state": None,
              "advice": [], "harnessError": None}
    try:
        function = _load_guard(job["guards"][scenario["guard"]])
        model = _stand_ins(job, function, scenario)
        try:
            names = _call_arguments(scenario["call"], function)
        except (HarnessError, TypeError, SyntaxError) as exc:
            names = None
            result["advice"] = [
                {"key": a["key"], "record": a["record"], "field": a["field"],
                 "verdict": "not evaluated", "detail": str(exc)}
                for a in job.get("advice", [])
            ]
        if names is not None:
            result["advice"] = _run_advice(job, scenario, function, names)
        caller = scenario["caller_filename"]
        _remember_source(caller, scenario["call"] + "\n")
        try:
            mode = "eval" if _is_expression(scenario["call"]) else "exec"
            code = compile(scenario["call"], caller, mode)
        except SyntaxError as exc:
            raise HarnessError(f"the call does not compile: {exc}") from exc
    except BaseException as exc:  # noqa: BLE001
        result["outcome"] = "error"
        result["harnessError"] = f"{_exception_type_name(exc)}: {exc}"
        return result

    try:
        value = (eval if mode == "eval" else exec)(code, {"__builtins__": builtins, "model": model})
    except BaseException as exc:  # noqa: BLE001 - SystemExit is an outcome too
        result["outcome"] = "raised"
        result["exception"], result["traceback"] = _describe_exception(exc, caller)
    else:
        result["outcome"] = "returned"
        result["returnValue"] = repr(value)
    result["state"] = _snapshot(model)
    return result


def _is_expression(code):
    try:
        ast.parse(code, mode="eval")
    except SyntaxError:
        return False
    return True


def main():
    os.environ.pop("PWD", None)  # set by the sandbox as it enters this folder: not the parent's environment
    job = json.loads(sys.stdin.buffer.read().decode("utf-8"))
    if job.get("protocol") != PROTOCOL:
        print(f"unsupported protocol {job.get('protocol')!r}", file=sys.stderr)
        return 2
    # Keep a private handle on the real stdout for results, then send fd 1 to
    # stderr so that whatever snippet code prints cannot reach the protocol.
    results = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _apply_limits(job.get("limits") or {})
    for scenario in job["scenarios"]:
        line = json.dumps(run_scenario(job, scenario), ensure_ascii=False)
        results.write(line + "\n")
        results.flush()
    results.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
