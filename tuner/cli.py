"""The ``tune`` command line: a lazy click group; each verb lives in ``tuner/commands/<verb>.py``.

Commands are imported only when invoked, so ``tune occupancy`` never pays for importing torch.
Every error meant for the user is a :class:`occtune.errors.UserError`: one line, exit code 2.
The same program installs as ``occtune`` (a name no other package takes: Ray ships a ``tune``)
and runs as ``python -m occtune``; ``--help`` says so where ``tune`` on PATH is another program.
"""

from __future__ import annotations

import importlib
import signal
import sys

import click

from occtune import __version__
from occtune.engine import replay
from occtune.errors import UserError
from occtune.fsutil import INTERRUPTED, on_interrupt

# verb -> "module:attribute" of a click.Command. Family verbs (tune topk, tune rope, ...) come
# from the families themselves (their family.py's COMMANDS), found by occtune.engine.registry.
COMMANDS = {
    "targets": "occtune.commands.targets:command",
    "occupancy": "occtune.commands.occupancy:command",
    "sweep": "occtune.commands.sweep:command",
    "analyze": "occtune.commands.analyze:command",
    "export": "occtune.commands.export:command",
    "report": "occtune.commands.report:command",
}


def _all_commands() -> dict[str, str]:
    from occtune.engine.registry import family_commands

    return {**family_commands(), **COMMANDS}


class LazyGroup(click.Group):
    def format_epilog(self, ctx, formatter):
        other = foreign_tune()
        if other:
            formatter.write_paragraph()
            formatter.write_text(f"note: 'tune' on this PATH runs {other}, another program (Ray Tune's, if Ray "
                                 "is installed): run these commands as 'occtune ...' or 'python3 -m occtune ...'.")
        super().format_epilog(ctx, formatter)

    def list_commands(self, ctx):
        return sorted(k for k, spec in _all_commands().items() if _available(spec))

    def get_command(self, ctx, name):
        spec = COMMANDS.get(name) or _all_commands().get(name)
        if spec is None:
            return None
        module, attr = spec.split(":")
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:
                return None
            raise
        return getattr(mod, attr)


def _available(spec: str) -> bool:
    return importlib.util.find_spec(spec.split(":")[0]) is not None


def foreign_tune() -> str | None:
    """The path of the ``tune`` on PATH where it is not occtune's (its script does not import
    ``occtune.cli``), else None (occtune's, or none at all)."""
    import shutil
    from pathlib import Path

    found = shutil.which("tune")
    if found is None:
        return None
    try:
        head = Path(found).read_bytes()[:4096]
    except OSError:
        return None
    return None if b"occtune.cli" in head else found


def prog_name() -> str:
    """``occtune`` when run through that script, else ``tune`` (the documented verb)."""
    import os

    return "occtune" if os.path.basename(sys.argv[0] or "") == "occtune" else "tune"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="occtune")
def cli():
    """occtune: occupancy analysis and autotuning of GPU kernels (AMD Instinct and NVIDIA).

    \b
    tune targets                                  known targets, detected local device
    tune occupancy --target gfx950 --threads 512 --dynamic-lds 40K --static-lds 7K
    tune topk --target gfx950                     LDS-budget sweep of the radix top-k kernel
    tune export results/gfx950/topk.yaml --format header

    Also installed as 'occtune' (the same commands), for where another program's 'tune' comes
    first on PATH; or run 'python3 -m occtune'.
    """


def main(argv=None) -> None:
    # Triton 3.9 warns on every compile unless this is set; "1" is its current default (FP fusion
    # on), so setting it changes nothing but the noise. A user's own setting wins.
    import os

    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    try:                      # the replay check runs before _run's handler: a Ctrl-C there stops here
        code = _replayed(list(sys.argv[1:] if argv is None else argv))
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        code = 130
        replay.finish(code)
    if code is None:
        code = _run(argv)
        replay.finish(code)
    if INTERRUPTED.is_set() and code != 130:    # a Ctrl-C some library swallowed still stops us
        click.echo("interrupted", err=True)
        code = 130
    _quiet_shutdown()
    sys.exit(code)


def _quiet_shutdown() -> None:
    """Ignore Ctrl-C once the interpreter shuts down: the work is done (results written), and a
    Ctrl-C then would only print a traceback from a library's exit handler (certifi's, seen in
    CI). Registered once, after the libraries' handlers, so it runs before them."""
    import atexit

    if _main_thread() and not getattr(_quiet_shutdown, "done", False):
        atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
        _quiet_shutdown.done = True


# the built-in verbs but `sweep` never run a timed sweep: no replay key to compute on their start-up
NEVER_TIMED = tuple(verb for verb in COMMANDS if verb != "sweep")


def _replayed(argv: list[str]) -> int | None:
    """The exit code of a replay of this unchanged command (:mod:`occtune.engine.replay`), else None."""
    if next((a for a in argv if not a.startswith("-")), None) in NEVER_TIMED:
        return None
    try:
        return 0 if replay.begin(argv) else None
    except UserError as e:          # e.g. a recorded file can no longer be written
        click.echo(f"error: {e}", err=True)
        return UserError.exit_code


def _run(argv) -> int:
    """Run the command; the exit code (errors printed as one line)."""
    INTERRUPTED.clear()
    previous = signal.signal(signal.SIGINT, on_interrupt) if _main_thread() else None
    try:
        rv = cli.main(args=argv, prog_name=prog_name(), standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except UserError as e:
        click.echo(f"error: {e}", err=True)
        return UserError.exit_code
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        return 130
    except click.UsageError as e:
        hint = f"; run '{e.ctx.command_path} --help'" if e.ctx is not None else ""
        click.echo(f"error: {_clause(e.format_message())}{hint}", err=True)
        return 2
    except click.ClickException as e:
        click.echo(f"error: {e.format_message()}", err=True)
        return e.exit_code
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _clause(message: str) -> str:
    """Click's sentence as a clause of our one line: its full stop dropped ("Missing option
    '--threads'." -> "Missing option '--threads'"), so "; run ..." can follow it."""
    message = message.strip()
    return message[:-1] if message.endswith(".") and not message.endswith("..") else message


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
