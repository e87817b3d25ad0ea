"""Subcommands made when named: argparse's subparsers, each command listed with its help at once, and its
parser made (its arguments added) only when the command line names it.

``scriptorium --help`` then makes no command's parser and ``scriptorium memory status`` two, of some forty:
each costs argparse a formatter and gettext look-ups, together a good part of a bare Python start (issue 56).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from scriptorium.settings import Settings

Handler = Callable[[argparse.Namespace, "Settings"], int]
Arguments = Callable[[argparse.ArgumentParser], object]
"""Adds a command's arguments to its parser once it is made."""


class Declare(Protocol):
    """How a module adds its commands: a name, the handler that runs it, its help (also its description) and
    what adds its arguments."""

    def __call__(self, name: str, handler: Handler, help_text: str, arguments: Arguments | None = None) -> None: ...


if TYPE_CHECKING:  # generic in typeshed only
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


class Commands(_SubParsers):
    """argparse's subparsers action whose parsers are made on first lookup (:meth:`add_command`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.later: dict[str, tuple[Arguments, dict[str, Any]]] = {}
        self._name_parser_map = self.choices = _Parsers(self)

    def add_command(self, name: str, help_text: str, arguments: Arguments, **parser: Any) -> None:
        """List ``name`` with ``help_text`` now; when the command line names it, make its parser (``parser``:
        ``add_parser``'s keywords) and run ``arguments`` on it."""
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help_text))
        self.later[name] = (arguments, parser)


class _Parsers(dict[str, argparse.ArgumentParser]):
    """The commands' parsers by name: one declared and not made yet is in it, and is made when looked up."""

    def __init__(self, commands: Commands) -> None:
        super().__init__()
        self.commands = commands

    def __missing__(self, name: str) -> argparse.ArgumentParser:
        arguments, keywords = self.commands.later.pop(name)  # KeyError: no such command, as argparse expects
        made = self.commands.add_parser(name, **keywords)  # which files it here
        arguments(made)
        return made

    def __contains__(self, name: object) -> bool:
        return super().__contains__(name) or name in self.commands.later

    def __iter__(self) -> Iterator[str]:
        return iter([*super().__iter__(), *self.commands.later])

    def __len__(self) -> int:
        return super().__len__() + len(self.commands.later)


def subcommands(parser: argparse.ArgumentParser, **keywords: Any) -> Commands:
    """``parser.add_subparsers(**keywords)``, its commands made when named."""
    action = parser.add_subparsers(action=Commands, **keywords)
    assert isinstance(action, Commands)
    return action
