"""Output paths the docstrings give as examples exist.

``Network.predict``'s and ``Scorer``'s docstrings named
``'Output.outputs.probabilities'``, an output no layer has (a leftover of
0.5's docs, which HISTORY says the new docs no longer mention): a user who
copied it got UnknownOutputError.
"""

import pathlib
import re

import brainstorm
from brainstorm.layers.base_layer import describe_layers

PACKAGE = pathlib.Path(brainstorm.__file__).parent
DOCS = PACKAGE.parent / 'docs'
#: ``'Layer.outputs.name'``: a placeholder, not an example
PLACEHOLDERS = {'name'}


def _output_names() -> set:
    names = set()
    for layer in describe_layers():
        names |= set(layer['outputs'] or ())
    return names


def test_every_example_output_path_names_an_output_some_layer_has():
    known = _output_names()
    assert {'default', 'predictions', 'loss'} <= known
    texts = [p.read_text(encoding='utf-8') for p in PACKAGE.rglob('*.py')]
    if DOCS.is_dir():  # a checkout, not an installed package
        texts += [p.read_text(encoding='utf-8') for p in DOCS.glob('*.rst')]
    named = {
        m.group(1)
        for text in texts
        for m in re.finditer(r"'\w+\.outputs\.(\w+)'", text)
    }
    assert named, 'no example paths found: the pattern is stale'
    assert named - PLACEHOLDERS <= known, sorted(named - PLACEHOLDERS - known)
