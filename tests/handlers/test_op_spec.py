"""Rows of the op table: their signatures and the methods made from them."""

import inspect

import pytest

from brainstorm.handlers.op_spec import Op, grammar_check, op_method, signature

ROW = Op(
    'blend_batch',
    'a, b, out, weight: float = 0.5, *, work=None, exact: bool = False',
    """Blend.

    More text.
    """,
    optional=('work',),
)


def test_signature_is_read_from_the_row():
    sig = signature(ROW)
    assert str(sig) == (
        "(self, a, b, out, weight: 'float' = 0.5, *, work=None, "
        "exact: 'bool' = False) -> 'None'"
    )
    assert signature(ROW._replace(returns='')).return_annotation is sig.empty
    assert ROW.kinds == {
        'a': 'array',
        'b': 'array',
        'out': 'array',
        'weight': 'array',  # not a known scalar name
        'work': 'array',
        'exact': 'array',
    }


def test_grammar_decides_the_check_rule():
    assert [grammar_check(n) for n in ('add_tt', 'abs_t', 'mult_st', 'tanh')] == [
        'same'
    ] * 4
    assert grammar_check('add_mv') == 'mv' and grammar_check('dot_add_mm') == 'dot'
    assert grammar_check('index_m_by_v') == grammar_check('conv2d_forward_batch') == ''
    assert ROW._replace(check='sum').rule == 'sum'


class Owner:
    pass


def test_a_method_made_from_a_row_binds_like_its_signature():
    calls = []
    method = op_method(ROW, lambda self, op, args: calls.append(args) or 7, Owner)
    assert method.__qualname__ == 'Owner.blend_batch'
    assert method.__module__ == Owner.__module__
    assert inspect.getdoc(method) == 'Blend.\n\nMore text.'
    assert inspect.signature(method) == signature(ROW)
    owner = Owner()
    assert method(owner, 1, 2, 3, 0.25) == 7
    method(owner, 1, 2, out=3)
    method(owner, 1, 2, 3, exact=True)
    assert calls == [
        {'a': 1, 'b': 2, 'out': 3, 'weight': 0.25, 'work': None, 'exact': False},
        {'a': 1, 'b': 2, 'out': 3, 'weight': 0.5, 'work': None, 'exact': False},
        {'a': 1, 'b': 2, 'out': 3, 'weight': 0.5, 'work': None, 'exact': True},
    ]
    with pytest.raises(TypeError):
        method(owner, 1, 2, 3, 0.5, None, True)  # keyword-only ones by position
    with pytest.raises(TypeError):
        method(owner, 1, 2)  # out missing
    with pytest.raises(TypeError):
        method(owner, 1, 2, 3, colour='red')
