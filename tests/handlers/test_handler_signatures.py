"""Every handler implements every op of the op table with its signature."""

import ast
import inspect
from pathlib import Path

import pytest

import brainstorm.handlers
from brainstorm.handlers import (
    DebugHandler,
    NumpyHandler,
    PyCudaHandler,
    debug_handler,
    ops,
)
from brainstorm.handlers.base_handler import ACTIVATIONS, Handler

# The "Handler ops" line of the SPEC checklist (section 7.1), verbatim.
SPEC_HANDLER_OPS = """
allocate, zeros, ones, create_from_numpy, get_numpy_copy, set_from_numpy,
copy_to, copy_to_if, fill, fill_if, add_into_if, is_fully_finite, abs_t,
sign_t, sqrt_t, log_t, clip_t, add_tt, subtract_tt, mult_tt, divide_tt,
modulo_tt, mult_add_tt, add_st, mult_st, mult_add_st, add_mv, subtract_mv,
divide_mv, mult_mv, mult_add_mv, dot_mm, dot_add_mm, sum_t, broadcast_t,
binarize_v, index_m_by_v, merge_tt, split_add_tt, softmax_m, fill_gaussian,
generate_probability_mask, sigmoid, sigmoid_deriv, tanh, tanh_deriv, rel,
rel_deriv, el, el_deriv, conv2d_forward_batch, conv2d_backward_batch,
maxpool2d_forward_batch, maxpool2d_backward_batch, avgpool2d_forward_batch,
avgpool2d_backward_batch
"""
SPEC_OPS = {name.strip() for name in SPEC_HANDLER_OPS.split(',')}


def concrete_handlers():
    # PyCudaHandler imports without PyCUDA: its class is inspected anywhere
    return [NumpyHandler, DebugHandler, PyCudaHandler]


def base_ops() -> list:
    """Every op of the base Handler: its public methods, abstract or not."""
    return sorted(
        name
        for name, member in vars(Handler).items()
        if not name.startswith('_') and inspect.isfunction(member)
    )


def test_the_base_class_ops_are_the_table():
    """Every row is a method of the base class (with the row's signature and
    contract), abstract unless the row says otherwise; no other op."""
    assert set(base_ops()) == set(ops.OPS) | {
        'keeps_conv_columns',
        'network_pass',
        'fixed_operand',
    }
    abstract = {name for name, op in ops.OPS.items() if op.abstract}
    assert Handler.__abstractmethods__ == abstract
    for name, op in ops.OPS.items():
        method = getattr(Handler, name)
        assert inspect.signature(method) == ops.signature(op), name
        assert inspect.getdoc(method) == inspect.cleandoc(op.doc), name


def test_every_check_rule_of_the_table_exists():
    for name, op in ops.OPS.items():
        assert op.rule, f'{name}: no check rule (none from the grammar either)'
        assert callable(getattr(DebugHandler, f'_check_{op.rule}', None)), name


def test_every_table_row_is_consistent():
    for name, op in ops.OPS.items():
        kinds = op.kinds
        assert op.section in ops.SECTIONS, name
        for written in op.writes:
            assert kinds.get(written) == 'array', (name, written)
        for optional in op.optional:
            assert kinds.get(optional) == 'array', (name, optional)
        if op.alias:
            assert op.writes, f'{name}: may alias, but writes nothing'


def test_debug_handler_writes_no_op_by_hand():
    """Its ops come from the table; the file defines only check rules and
    keeps_conv_columns, network_pass and fixed_operand (a layout question
    and contexts, not ops)."""
    tree = ast.parse(inspect.getsource(debug_handler))
    (cls,) = [
        n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == 'DebugHandler'
    ]
    public = {
        node.name
        for node in cls.body
        if isinstance(node, ast.FunctionDef) and not node.name.startswith('_')
    }
    assert public <= {
        'keeps_conv_columns',
        'network_pass',
        'fixed_operand',
        'dtype',
        'rnd',
    }, public
    for name in ops.OPS:
        assert vars(DebugHandler)[name].__qualname__ == f'DebugHandler.{name}'


def test_pycuda_handler_class_is_inspected_without_pycuda():
    assert brainstorm.handlers.PyCudaHandler is PyCudaHandler
    assert isinstance(PyCudaHandler, type) and issubclass(PyCudaHandler, Handler)


def test_base_ops_include_the_activations_and_optional_keywords():
    ops = base_ops()
    for name in ACTIVATIONS:
        assert name in ops and f'{name}_deriv' in ops
    assert 'keeps_conv_columns' in ops
    forward = inspect.signature(Handler.conv2d_forward_batch).parameters
    backward = inspect.signature(Handler.conv2d_backward_batch).parameters
    for parameters, keyword, default in (
        (forward, 'columns', None),
        (backward, 'columns', None),
        (backward, 'skip_in_deltas', False),
    ):
        assert parameters[keyword].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[keyword].default is default


@pytest.mark.parametrize('handler_class', concrete_handlers(), ids=lambda c: c.__name__)
@pytest.mark.parametrize('op', base_ops())
def test_every_op_has_the_base_signature(handler_class, op):
    """Abstract or not, inherited or overridden, with every optional keyword.

    The classes are inspected, so this runs without a GPU; layers can pass
    the optional keywords of the base signatures to every handler.
    """
    expected = inspect.signature(getattr(Handler, op))
    got = inspect.signature(getattr(handler_class, op))
    assert got == expected, (
        f'{handler_class.__name__}.{op}{got} != Handler.{op}{expected}'
    )


@pytest.mark.parametrize('op', base_ops())
def test_debug_handler_checks_every_op(op):
    """The debug handler wraps every op (inherited ones would not be checked)."""
    assert op in vars(DebugHandler), f'DebugHandler does not define {op}'


def test_base_class_covers_the_spec_checklist():
    missing = SPEC_OPS - Handler.__abstractmethods__
    assert not missing, f'SPEC ops missing from Handler: {sorted(missing)}'


def test_every_base_op_is_documented():
    for name in Handler.__abstractmethods__:
        doc = inspect.getdoc(getattr(Handler, name))
        assert doc and len(doc) > 20, f'Handler.{name} lacks a docstring'


def signature_problems(handler_class) -> list:
    """Ops of ``handler_class`` missing or deviating from the base class."""
    problems = []
    for name in sorted(Handler.__abstractmethods__):
        method = getattr(handler_class, name)
        if method is getattr(Handler, name):
            problems.append(f'{handler_class.__name__}.{name} is missing')
            continue
        expected = inspect.signature(getattr(Handler, name))
        got = inspect.signature(method)
        if got != expected:
            problems.append(
                f'{handler_class.__name__}.{name}{got} differs '
                f'from Handler.{name}{expected}'
            )
    return problems


@pytest.mark.parametrize('handler_class', concrete_handlers(), ids=lambda c: c.__name__)
def test_handler_implements_every_op_with_the_base_signature(handler_class):
    assert not inspect.isabstract(handler_class)
    problems = signature_problems(handler_class)
    assert not problems, '\n'.join(problems)


def test_signature_check_finds_deviations():
    class Sloppy(NumpyHandler):
        def add_tt(self, a, b, out, extra=None) -> None:
            pass

        def sum_t(self, a, out, axis=None) -> None:
            pass

    problems = signature_problems(Sloppy)
    assert len(problems) == 2, problems
    assert 'Sloppy.add_tt' in problems[0] and 'Sloppy.sum_t' in problems[1]


@pytest.mark.parametrize('handler_class', concrete_handlers(), ids=lambda c: c.__name__)
def test_handler_file_keeps_the_section_order(handler_class):
    """The ops a handler file writes by hand appear in the table's order, so
    the files read side by side (ops made from the table come in its order
    anyway)."""
    source = inspect.getsourcefile(handler_class)
    written = [
        name
        for name, member in vars(handler_class).items()
        if name in ops.OPS
        and inspect.isfunction(member)
        and inspect.getsourcefile(member) == source
    ]
    assert written == [name for name in ops.OPS if name in written]


def test_handler_files_stay_readable():
    """No file of brainstorm/handlers over 800 lines, the debug handler
    under 450: its checks come from the op table, not one method per op."""
    folder = Path(brainstorm.handlers.__file__).parent
    lengths = {
        path.relative_to(folder).as_posix(): len(path.read_text().splitlines())
        for path in folder.rglob('*.py')
    }
    assert max(lengths.values()) <= 800, lengths
    assert lengths['debug_handler.py'] < 450, lengths['debug_handler.py']
