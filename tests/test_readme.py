"""README.rst's set-up commands and the CI script agree."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent


def readme_commands():
    text = (ROOT / 'README.rst').read_text()
    return re.findall(r'^    (python3 -m venv .*)$', text, flags=re.M)


def test_readme_gives_exactly_two_setup_commands():
    commands = readme_commands()
    assert len(commands) == 2, commands
    assert 'examples/mnist_pi.py' in commands[0]
    assert 'pytest' in commands[1]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / '.ci' / 'run').read_text()
    assert readme_commands()[1] in ci.splitlines()
