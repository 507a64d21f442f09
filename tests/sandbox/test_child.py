"""Inside the sandbox: how notebook cells are run and calls answered (driven through a real host)."""
from __future__ import annotations

import numpy as np
import pytest

from autograder.sandbox.outcomes import BadReturnValue, FunctionMissing, NotCallable, StudentRaised

from .conftest import FAST, Caller, cells

# A notebook whose layer_norm has the unbiased-variance mistake, and which then tries to make
# every numpy comparison pass; the later cells define helpers the call tests use.
NOTEBOOK = cells(
    "import numpy as np\n%matplotlib inline\n!pip install nothing",
    """
def layer_norm(x, gamma, beta, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True, ddof=1)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta
""",
    """
np.allclose = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
np.array_equal = lambda *a, **k: True
np.isclose = lambda a, b, **k: np.ones(np.shape(a), dtype=bool)
""",
    """
def echo(*args, **kwargs):
    return args if not kwargs else (args, kwargs)

def to32(x):
    return (x * 2).astype(np.float32)

def count(params):
    return sum(v.size for v in params.values())

def scalar32():
    return np.float32(1.5)

def divide(a, b):
    return helper(a, b)

def helper(a, b):
    if b == 0:
        raise ValueError(f"cannot divide {a} by zero")
    return a / b

def overflow(x):
    for _ in range(3):
        y = np.exp(x)
    return np.log(x - x)

def add_one(x):
    x += 1
    return x

def scale_params(params, factor=2.0):
    params["W"] *= factor
    return None

def add_key(params):
    params["extra"] = 1
    return 0

def pure(x, params):
    return x.sum() + sum(v.sum() for v in params.values())

def chatty(n):
    for i in range(n):
        print("line", i)
    return n

masked = lambda: np.ma.masked_array([1.0, 2.0], mask=[0, 1])
class ArrayLike:
    def __array__(self, dtype=None, copy=None):
        return np.zeros(3)
array_like = lambda: ArrayLike()
gen = lambda: (i for i in range(3))
objects = lambda: np.array([1, None], dtype=object)
nested = lambda: (np.zeros(2), [1.0, np.matrix([[1.0]])])
answer = 42
""",
)


@pytest.fixture(scope="module")
def box(host):
    run = host.submission(NOTEBOOK, FAST)
    yield Caller(run)
    run.close()


def run(submit, *sources, limits=FAST):
    r = submit(list(sources), limits)
    return Caller(r), r.report


# --------------------------------------------------------------------------- cells

def test_cells_share_one_namespace_named_main(submit):
    """Do later cells see earlier definitions, with __name__ == '__main__'?"""
    sb, report = run(submit, "a = 2", "if __name__ == '__main__':\n    b = a * 3", "def f():\n    return b")
    assert [c.status for c in report.cells] == ["ok", "ok", "ok"]
    assert sb.call("f").value == 6


def test_a_failing_cell_does_not_stop_later_cells(submit):
    """Does a cell that raises get reported (type, message, line) while later cells still run?"""
    sb, report = run(submit, "x = 1", "y = 2\nz = undefined_name + 1", "def g():\n    return x + 10")
    bad = report.cell(2)
    assert (bad.status, bad.error_type) == ("error", "NameError")
    assert "undefined_name" in bad.message and bad.where == "line 2: `z = undefined_name + 1`"
    assert report.cell(3).status == "ok" and sb.call("g").value == 11
    assert report.state == "ok"
    assert "The 2nd code cell (`y = 2`) raised NameError: name 'undefined_name' is not defined " \
           "(line 2: `z = undefined_name + 1`)" in report.notes


def test_a_long_line_quoted_in_a_note_is_cut_inside_its_backticks_with_an_ellipsis(submit):
    """Is a failing line longer than the quote's 120 characters cut inside the backticks, ending
    in "…", so the note's closing bracket does not read as the code's?"""
    long_line = "z = undefined_name + " + " + ".join(["'long message with spaces'"] * 20)
    _, report = run(submit, "x = 1\n" + long_line)
    where = report.cell(1).where
    assert where.startswith("line 2: `z = undefined_name + 'long message") and where.endswith("\u2026`")
    assert len(where) == len("line 2: ``") + 120


def test_error_in_a_function_defined_elsewhere_names_that_cell(submit):
    """When a cell fails inside a function from an earlier cell, is the earlier cell named as a
    student counts it (code cells only, from 1) with the function it defines?"""
    _, report = run(submit, "def f():\n    return 1 / 0", "f()")
    assert report.cell(2).where == "the 1st code cell (`def f`), line 2: `return 1 / 0`"


def test_syntax_error_is_reported_with_its_line(submit):
    """Is a cell with a syntax error reported as SyntaxError with its line, without stopping the rest?"""
    _, report = run(submit, "a = 1\nb = (2 +\n", "c = 3")
    assert report.cell(1).error_type == "SyntaxError" and report.cell(1).where.startswith("line ")
    assert report.cell(2).status == "ok"


def test_compile_time_warnings_of_a_cell_are_notes_with_their_line(submit):
    """Is a SyntaxWarning compiling a cell gives (`x is "literal"`, which Jupyter's interned strings can
    let pass) a note naming the cell, the warning and its line, while the cell runs as compiled?"""
    sb, report = run(submit, 'def pick(norm):\n    if norm is "layernorm":\n        return 1\n    return 2',
                     'pattern = "\\d+"\nvalue = pick("layer" + "norm".strip())')
    first, second = report.cell(1), report.cell(2)
    assert first.status == second.status == "ok"
    assert len(first.notes) == 1 and first.notes[0].startswith("the 1st code cell (`def pick`): SyntaxWarning: ")
    assert '"is" with a' in first.notes[0] and first.notes[0].endswith(' \u2014 line 2: `if norm is "layernorm":`')
    assert len(second.notes) == 1 and "invalid escape sequence" in second.notes[0]
    assert second.notes[0].endswith("\u2014 line 1: `pattern = \"\\d+\"`")
    assert sb.call("pick", ("layernorm",)).value == 2     # a string from the grader is not the interned literal


def test_compile_time_warnings_are_bounded_per_cell_and_never_stop_a_cell(submit):
    """Are a cell's many compile-time warnings cut to a few notes, and does a notebook that made warnings
    errors get, as in Jupyter, a SyntaxError for a cell that warns?"""
    many = "\n".join(f'a{i} = {i} is "x{i}"' for i in range(12))
    _, report = run(submit, many, 'import warnings\nwarnings.simplefilter("error")', 'b = 1 is "y"', "c = 3")
    notes = report.cell(1).notes
    assert report.cell(1).status == "ok" and len(notes) == 4
    assert notes[-1].endswith("more compile-time warnings like these, not shown")
    assert (report.cell(3).status, report.cell(3).error_type, report.cell(3).notes) == ("error", "SyntaxError", ())
    assert report.cell(4).status == "ok"


def test_line_magics_and_shell_lines_are_skipped_with_notes(submit):
    """Are `%magic`, `!shell` and `x?` lines replaced by pass (indentation kept) and noted?"""
    sb, report = run(submit,
                     "%matplotlib inline\nimport numpy as np\n!ls -la\nnp.mean?\n"
                     "for i in range(2):\n    %time x = i\nres = 'ran'",
                     "def r():\n    return res")
    assert report.cell(1).status == "ok" and sb.call("r").value == "ran"
    assert report.cell(1).notes == (
        "the 1st code cell (`%matplotlib inline`): skipped IPython magic `%matplotlib inline`",
        "the 1st code cell (`%matplotlib inline`): skipped shell command `!ls -la`",
        "the 1st code cell (`%matplotlib inline`): skipped IPython help `np.mean?`",
        "the 1st code cell (`%matplotlib inline`): skipped IPython magic `%time x = i`",
    )


def test_valid_python_starting_with_percent_is_left_alone(submit):
    """Is a continuation line starting with `%` (modulo) run as Python, not dropped as a magic?"""
    sb, report = run(submit, "v = (17\n     % 5)", "def get():\n    return v")
    assert report.cell(1).notes == () and sb.call("get").value == 2


def test_cell_magics_skip_the_cell_except_time_and_capture(submit):
    """Is a `%%bash` cell skipped whole with a note, while a `%%time` cell's code still runs?"""
    sb, report = run(submit, "%%bash\necho hi", "%%time\nt = 5", "def get():\n    return t")
    assert report.cell(1).status == "skipped"
    assert report.cell(1).notes == (
        "the 1st code cell (`%%bash`): skipped: it starts with the cell magic `%%bash`, so none of the cell runs as "
        "Python in your notebook, as in Jupyter; if the cell defines a function to be graded, remove the `%%bash` "
        "line",)
    assert report.cell(2).status == "ok" and sb.call("get").value == 5
    assert "skipped" in " ".join(report.notes)


def test_a_function_defined_under_timeit_is_missing_and_told_why(submit):
    """As in Jupyter, where `%%timeit` runs its body inside a function of its own, is a function
    defined in a `%%timeit` cell missing, with a note and an error that name the magic and say to
    remove its line, rather than suggest the function was renamed; is one defined under `%%time` kept?"""
    sb, report = run(submit, "%%timeit -n 3\ndef silu(x):\n    return x", "%%time\ndef relu(x):\n    return x")
    assert report.cell(1).status == "skipped"
    assert report.cell(1).notes == (
        "the 1st code cell (`def silu`): skipped: it starts with the cell magic `%%timeit -n 3`, which keeps none "
        "of the cell's definitions, as in Jupyter; if the cell defines a function to be graded, remove the "
        "`%%timeit` line",)
    with pytest.raises(FunctionMissing) as info:
        sb.call("silu", (1,))
    assert info.value.feedback == (
        "`silu` is not defined in your notebook: the 1st code cell, which defines it, starts with the cell magic "
        "`%%timeit`, which keeps none of the cell's definitions, as in Jupyter; remove the `%%timeit` line.")
    assert sb.call("relu", (2,)).value == 2


def test_a_function_under_another_cell_magic_is_missing_saying_which(submit):
    """Is a function in a cell under a magic whose body is not Python in the notebook (`%%writefile`)
    missing with the magic named, and one missing for no such reason told as before?"""
    sb, _ = run(submit, "%%writefile answer.py\ndef gelu(x):\n    return x")
    with pytest.raises(FunctionMissing) as info:
        sb.call("gelu", (1,))
    assert info.value.feedback == (
        "`gelu` is not defined in your notebook: the 1st code cell, which defines it, starts with the cell magic "
        "`%%writefile`, so its body does not run as Python in your notebook, as in Jupyter; remove the "
        "`%%writefile` line.")
    with pytest.raises(FunctionMissing) as info:
        sb.call("swish", (1,))
    assert "perhaps it was renamed" in info.value.feedback


def test_get_ipython_and_display_are_harmless(submit):
    """Do get_ipython().run_line_magic(...) and display(...) work (doing nothing / printing) with a note?"""
    _, report = run(submit, "get_ipython().run_line_magic('matplotlib', 'inline')\ndisplay([1, 2])")
    cell = report.cell(1)
    assert cell.status == "ok" and cell.stdout == "[1, 2]\n"
    assert cell.notes == ("the 1st code cell (`get_ipython().run_line_magic('matplot...`): "
                          "`get_ipython().run_line_magic(...)` did nothing (the grader does not run IPython)",)


def test_prints_are_captured_per_cell_and_bounded(submit):
    """Is each cell's output captured separately and cut to a bounded size with a marker?"""
    _, report = run(submit, "print('first')", "import sys\nprint('x' * 200_000)\nsys.stderr.write('end')")
    assert report.cell(1).stdout == "first\n"
    out = report.cell(2).stdout
    assert len(out) < 70_000 and "characters of output dropped" in out and out.endswith("end")


def test_megabytes_of_output_do_not_disturb_the_protocol(submit):
    """Do many MB printed from Python and written to fd 1/2 at OS level leave the channel intact?"""
    spam = ("import os, sys\n"
            "for i in range(20000):\n    print('spam' * 250)\n"
            "os.write(1, b'\\x00garbage' * 1_000_000)\nos.write(2, b'more' * 1_000_000)\n"
            "def loud():\n    os.write(1, b'frame?' * 100_000)\n    print('q' * 5_000_000)\n    return 7")
    sb, report = run(submit, spam, "after = 1")
    assert report.cell(1).status == "ok" and report.cell(2).status == "ok"
    assert sb.call("loud").value == 7
    assert sb.call("loud").value == 7


def test_output_that_is_not_valid_utf8_is_made_safe(submit):
    """Are lone surrogates in printed output and exception messages replaced, so reports can be written?"""
    _, report = run(submit, "print('a\\udcff b')\nraise ValueError('\\ud800')")
    cell = report.cell(1)
    assert cell.stdout == "a? b\n" and cell.message == "?"
    cell.stdout.encode("utf-8")


def test_exit_in_a_cell_is_an_error_not_the_end(submit):
    """Does exit()/sys.exit() in a cell count as that cell's error while later cells run?"""
    sb, report = run(submit, "import sys\nsys.exit(3)", "exit()", "def ok():\n    return 'alive'")
    assert report.cell(1).error_type == "SystemExit" and report.cell(2).error_type == "SystemExit"
    assert sb.call("ok").value == "alive"


# --------------------------------------------------------------------------- calls

def test_tampering_with_numpy_does_not_reach_the_trusted_side(box):
    """With np.allclose & co. replaced in the notebook, does the trusted side get the true wrong array?"""
    rng = np.random.default_rng(1)
    x, gamma, beta = rng.standard_normal((4, 8)), rng.standard_normal(8), rng.standard_normal(8)
    got = box.call("layer_norm", (x, gamma, beta)).value
    mean = x.mean(-1, keepdims=True)
    right = gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) + beta
    wrong = gamma * (x - mean) / np.sqrt(x.var(-1, keepdims=True, ddof=1) + 1e-5) + beta
    assert type(got) is np.ndarray
    assert not np.allclose(got, right)
    assert np.array_equal(got, wrong)
    assert box.report.cell(3).status == "ok"


def test_values_round_trip_through_a_call(box):
    """Do arrays (float32, batch shapes), numbers, strings and containers cross both ways intact?"""
    x = np.random.default_rng(2).standard_normal((8, 16, 64))
    back = box.call("echo", (x, x.astype(np.float32), 3, 2.5, "s", None, (1, [2]), 1j)).value
    assert np.array_equal(back[0], x) and back[1].dtype == np.float32
    assert back[2:] == (3, 2.5, "s", None, (1, [2]), 1j)
    y = box.call("to32", (x,)).value
    assert y.dtype == np.float32 and y.shape == (8, 16, 64) and np.array_equal(y, (x * 2).astype(np.float32))
    assert box.call("count", ({"W": np.zeros((4, 5)), "b": np.zeros(5)},)).value == 25
    s = box.call("scalar32").value
    assert type(s) is np.float32 and s == 1.5
    assert box.call("echo", (1,), {"k": np.ones(2)}).value[1]["k"].tolist() == [1.0, 1.0]


def test_raised_exception_names_type_message_and_line(box):
    """Does an exception in student code come back as StudentRaised with its cell and line?"""
    with pytest.raises(StudentRaised) as info:
        box.call("divide", (1.0, 0))
    err = info.value
    assert err.type_name == "ValueError" and err.message == "cannot divide 1.0 by zero"
    assert err.where == ("the 4th code cell (`def echo`), line 15: `return helper(a, b)`",
                         "the 4th code cell (`def echo`), line 19: `raise ValueError(f\"cannot divide {a} by zero\")`")
    assert "`divide` raised ValueError" in err.feedback
    assert box.call("divide", (1.0, 4)).value == 0.25


def test_missing_and_non_callable_names(box):
    """Are an undefined name and a name bound to a number reported as such?"""
    with pytest.raises(FunctionMissing) as info:
        box.call("multi_head_attention", (1,))
    assert "`multi_head_attention` is not defined in your notebook" in info.value.feedback
    with pytest.raises(NotCallable) as info2:
        box.call("answer")
    assert "is an int" in info2.value.feedback


@pytest.mark.parametrize("name, fragment", [
    ("masked", "a MaskedArray (an ndarray subclass); return a plain numpy array"),
    ("array_like", "an object of type ArrayLike (array-like, but not a numpy array)"),
    ("gen", "a generator"),
    ("objects", "an array of dtype object"),
    ("nested", "a value whose element [1][1] is a matrix (an ndarray subclass)"),
])
def test_unsendable_returns_are_bad_return_values(box, name, fragment):
    """Are ndarray subclasses, array-likes, generators and object arrays refused with a clear reason?"""
    with pytest.raises(BadReturnValue) as info:
        box.call(name)
    assert fragment in info.value.feedback
    assert box.call("echo", (1,)).value == (1,)


def test_numpy_warnings_are_recorded_and_deduplicated(box):
    """Are RuntimeWarnings from inside the call recorded once each, with the cell line?"""
    result = box.call("overflow", (np.array([1000.0]),))
    assert result.warnings == (
        "RuntimeWarning: overflow encountered in exp, at the 4th code cell (`def echo`), line 24",
        "RuntimeWarning: divide by zero encountered in log, at the 4th code cell (`def echo`), line 25",
    )
    assert box.call("echo", (1,)).warnings == ()


def test_argument_mutation_is_detected(box):
    """Are arrays changed in place (also inside a params dict) and dicts gaining keys reported by path?"""
    x = np.zeros(3)
    assert box.call("add_one", (x,)).mutated == ("x",)
    assert x.tolist() == [0.0, 0.0, 0.0]          # the trusted copy is never touched
    params = {"W": np.ones((2, 2)), "b": np.zeros(2)}
    assert box.call("scale_params", (params,)).mutated == ("params['W']",)
    assert box.call("add_key", (params,)).mutated == ("params",)
    assert box.call("pure", (x, params)).mutated == ()


def test_call_output_is_captured(box):
    """Is what a call prints returned with it (bounded), never mixed into the value?"""
    result = box.call("chatty", (3,))
    assert result.value == 3 and result.stdout == "line 0\nline 1\nline 2\n"
    big = box.call("chatty", (50_000,))
    assert big.value == 50_000 and len(big.stdout) < 70_000 and "dropped" in big.stdout


def test_tampering_with_builtins_and_modules_does_not_break_calls(submit):
    """Do calls still work after a notebook rebinds builtins, json, socket and struct functions?"""
    sb, report = run(submit, """
import builtins, json, socket, struct
import numpy as np
def double(x):
    return x * 2
builtins.isinstance = lambda *a: True
builtins.len = lambda x: 0
json.dumps = json.loads = None
struct.pack = struct.unpack_from = None
socket.socket.sendall = socket.socket.recv_into = None
np.frombuffer = np.ascontiguousarray = None
""", "del np")
    assert [c.status for c in report.cells] == ["ok", "ok"]
    x = np.arange(6.0).reshape(2, 3)
    assert np.array_equal(sb.call("double", (x,)).value, x * 2)
    with pytest.raises(FunctionMissing):
        sb.call("np")


def test_builtins_a_call_changes_stay_the_students_and_calls_go_on(submit):
    """A call that rebinds, adds and deletes builtins: are the next calls answered, and do they
    see the builtins as that call left them (and as the notebook left them before it)?"""
    sb, report = run(submit, """
import builtins
def tamper():
    builtins.len = lambda x: -1
    builtins.extra = 7
    del builtins.abs
    return 1
def look(x):
    return [len([1, 2]), getattr(builtins, "extra", None), hasattr(builtins, "abs"), isinstance(x, int), x * 2]
""")
    assert [c.status for c in report.cells] == ["ok"]
    assert sb.call("look", (3,)).value == [2, None, True, True, 6]
    assert sb.call("tamper").value == 1
    assert sb.call("look", (4,)).value == [-1, 7, False, True, 8]
    assert sb.call("look", (5,)).value == [-1, 7, False, True, 10]


def test_the_builtins_guard_sees_every_kind_of_change():
    """Does the guard tell each change of the builtins (a name rebound, added, deleted) from none
    (nothing done; a name deleted and put back as it was), restore ours, and give the student's
    back to student code? Where the interpreter keeps a dict version (CPython 3.11 does) the quick
    look at it is what is tested; the full comparison decides once the version moved."""
    import builtins
    import sys

    from autograder.sandbox import child

    live = vars(builtins)
    ours = dict(live)
    changes = {"rebound": lambda: live.__setitem__("len", lambda x: -1),
               "added": lambda: live.__setitem__("extra_name", 1),
               "deleted": lambda: live.pop("abs"),
               "none": lambda: None,
               "put back": lambda: live.__setitem__("abs", live.pop("abs"))}
    try:
        for what, change in changes.items():
            guard = child._BuiltinsGuard()
            if sys.implementation.name == "cpython" and sys.version_info < (3, 14):
                assert guard._version is not None
            guard.student_code()
            change()
            guard.our_code()
            assert live == ours and all(live[k] is v for k, v in ours.items()), what
            assert (guard.student is None) == (what in ("none", "put back")), what
            if guard.student is not None:
                theirs = dict(guard.student)
                guard.student_code()            # theirs, as they left them
                assert live == theirs and all(live[k] is v for k, v in theirs.items()), what
                guard.our_code()
                assert live == ours and all(live[k] is v for k, v in ours.items()), what
    finally:
        live.clear()
        live.update(ours)


def _signature_names(func, args, kwargs):
    """What inspect.signature's binding names the arguments (the general path)."""
    import inspect

    try:
        sig = inspect.signature(func)
        bound = sig.bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return None
    out = []
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            out.extend((f"{name}[{i}]", v) for i, v in enumerate(value))
        elif kind == inspect.Parameter.VAR_KEYWORD:
            out.extend(value.items())
        else:
            out.append((name, value))
    return out


def _wrapped(f):
    import functools

    @functools.wraps(f)
    def inner(*args, **kwargs):
        return f(*args, **kwargs)
    return inner


def _plain(x, gamma, beta, eps=1e-5):
    return x


def _posonly(a, b, /, c, *, d=1):
    return a


def _star(a, *rest, key=None, **more):
    return a


@pytest.mark.parametrize("func", [_plain, _posonly, _star, _wrapped(_plain), lambda: 0, len])
@pytest.mark.parametrize("args, kwargs", [
    ((), {}), ((1,), {}), ((1, 2), {}), ((1, 2, 3), {}), ((1, 2, 3, 4, 5), {}),
    ((1,), {"beta": 3, "gamma": 2}), ((1,), {"c": 3}), ((1, 2), {"c": 3, "d": 4}),
    ((), {"a": 1}), ((1,), {"x": 2}), ((1,), {"key": 2, "zzz": 3}), ((1,), {"eps": 0.1, "x": 0}),
])
def test_arguments_are_named_as_the_signature_names_them(func, args, kwargs):
    """Does the quick reading of a plain function's parameters name arguments exactly as
    binding them to its signature does (and leave every other case to the general path)?"""
    from autograder.sandbox.child import _named_arguments, _plain_names

    expected = _signature_names(func, args, kwargs)
    quick = _plain_names(func, list(args), dict(kwargs))
    if quick is not None:
        assert quick == expected
    named = _named_arguments(func, list(args), dict(kwargs))
    if expected is not None:
        assert named == expected
    else:
        assert named == [(f"argument {i + 1}", v) for i, v in enumerate(args)] + list(kwargs.items())


def test_warm_up_leaves_the_process_as_it_found_it():
    """Does the zygote's warm-up (the call path run over a local socket pair) answer every call
    and then leave stdout, stderr, the line cache and the open descriptors as they were?"""
    import linecache
    import os
    import sys

    from autograder.sandbox import child

    before = (sys.stdout, sys.stderr, dict(linecache.cache), sorted(os.listdir("/proc/self/fd")))
    assert child.warm_up(rounds=3) == 9          # per round: one call, then two in one request
    assert (sys.stdout, sys.stderr, dict(linecache.cache), sorted(os.listdir("/proc/self/fd"))) == before
