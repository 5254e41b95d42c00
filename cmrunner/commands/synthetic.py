"""`cm synthetic-model serve`: cm's own synthetic model, to try the real setup without a provider.

It is the fake model ``cm demo`` and ``cm eval --synthetic`` use (``cmrunner.synthetic.fakemodel``)
with its careful policy: a few rules for a fixed phrasebook, not a language model. It binds
127.0.0.1 only, stops by itself after ``--minutes`` (or at Ctrl-C / SIGTERM), accepts any key and
keeps no record of what it is sent. It answers ``cm network-test`` (and the wizard's connection
test) with a short text, and the Memory Agent's observation and edit (Adjust Memory) tasks.
"""

from __future__ import annotations

import datetime
import shlex

import click

from cmrunner.commands.base import cli, echo
from cmrunner.core.errors import CmError

MODEL_NAME = "synthetic"
KEY = "not-a-secret"


@cli.group("synthetic-model")
def synthetic_model() -> None:
    """cm's own SYNTHETIC model (rules for a fixed phrasebook, not a language model), on 127.0.0.1."""


@synthetic_model.command("serve")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port on 127.0.0.1 (0: any free one).")
@click.option("--minutes", type=click.IntRange(1, 24 * 60), default=60, show_default=True,
              help="Stop by itself after this long.")
@click.pass_context
def serve(ctx: click.Context, port: int, minutes: int) -> None:
    """Serve the synthetic model in the foreground until --minutes pass or Ctrl-C; print how to point cm at it."""
    from cmrunner.synthetic import fakemodel

    typed = ctx.find_root().obj.get("home")
    cm = "cm" if typed is None else f"cm --home {shlex.quote(typed)}"
    until = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=minutes)

    def ready(bound: int) -> None:
        base = f"http://{fakemodel.HOST}:{bound}/v1"
        echo("SYNTHETIC MODEL: cm's own fake model, not a language model (a few rules for a fixed phrasebook, "
             "the one `cm demo` uses)")
        echo(f"listening:   {base} (127.0.0.1 only) until {until:%H:%M} UTC; Ctrl-C stops it sooner")
        echo("             any key is accepted; nothing it is sent is recorded")
        echo("point cm at it (or use these values in the `cm config` wizard):")
        echo(f"  echo {KEY} | {cm} config init --base-url {base} --model {MODEL_NAME} --api-key-stdin")
        echo(f"  {cm} network-test")
        echo(f"a home that already has a model: {cm} config set remote.baseUrl {base}")

    try:
        fakemodel.run_server({"policy": "careful"}, minutes * 60.0, ready, port=port, models=(MODEL_NAME,))
    except OSError as exc:
        raise CmError("PORT_UNAVAILABLE", f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pass another "
                                          "--port or 0 for any free one") from None
    echo("synthetic model stopped")
