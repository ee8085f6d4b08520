"""Help pages without Typer's type placeholders (``<bool>``, ``<str>``, ``<int range>``).

Typer 0.29 prints each parameter's Python type beside it, flags included, though a flag
takes no value. Every group and command of ``sheetsync`` uses the classes here instead:
click's plain help, where a flag is just its name, an option that takes a value shows
its metavar and an argument is its metavar.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

#: What an option's value is called when it has no metavar of its own.
DEFAULT_VALUE_NAME = "VALUE"


def new_app(help_text: str) -> typer.Typer:
    """A command group whose help (and its commands' help) is plain and placeholder-free."""
    return typer.Typer(
        help=help_text,
        cls=HelpGroup,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
    )


def _argument_name(param: Any, *, bare: bool = False) -> str:
    """``ID``, or ``ID...`` when it takes several (unless ``bare``)."""
    name = str(param.metavar or param.name.upper())
    return name if bare or param.nargs == 1 else name + "..."


def _label(param: Any) -> str:
    """``-v, --verbose``, ``--limit N``, ``ID...``: what a parameter looks like when typed."""
    if param.param_type_name == "argument":
        return _argument_name(param)
    switches = sorted(param.opts, key=lambda opt: opt.startswith("--"))
    label = ", ".join(switches)
    if param.secondary_opts:
        label += " / " + ", ".join(param.secondary_opts)
    if not (param.is_flag or param.count):
        label += f" {param.metavar or DEFAULT_VALUE_NAME}"
    return label


def _write_parameters(command: Any, ctx: Any, formatter: Any) -> None:
    arguments: list[tuple[str, str]] = []
    options: list[tuple[str, str]] = []
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:  # hidden
            continue
        row = (_label(param), record[1])
        (arguments if param.param_type_name == "argument" else options).append(row)
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


class HelpCommand(TyperCommand):
    """A command with plain, placeholder-free help."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] NAME...`` and ``[OPTIONS] [ID]...``, as click writes them."""
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            name = _argument_name(param, bare=True)
            dots = "..." if param.nargs != 1 else ""
            pieces.append((name if param.required else f"[{name}]") + dots)
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _write_parameters(self, ctx, formatter)


class HelpGroup(TyperGroup):
    """A group with plain, placeholder-free help."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        _write_parameters(self, ctx, formatter)
        self.format_commands(ctx, formatter)
