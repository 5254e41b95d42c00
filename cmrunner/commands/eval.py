"""`cm eval`: run the memory-quality worlds against a model and report the score.

The harness (``cmrunner/evals``) runs and scores; this module only parses options, says what will
be sent where (on stderr, before anything is sent), asks before spending on a real provider
or a judge (unless ``--yes``; with no terminal to ask on, ``CONFIRMATION_REQUIRED``), draws a progress bar on
stderr when stderr is a terminal, and prints the report as Markdown or ``--json``. The exit code
is 0 only when every world ran and passed.
"""

from __future__ import annotations

import json
import os

import click

from cmrunner.commands.base import _home, cli, confirm, echo, is_terminal

BAR = 30


def _bar(done: int, total: int, world: str, status: str) -> None:
    filled = BAR * done // max(total, 1)
    click.echo(f"\r[{'#' * filled}{'.' * (BAR - filled)}] {done}/{total} {world[:40]:<40} {status:<8}", err=True,
               nl=done == total)


@cli.command("eval")
@click.option("--synthetic", "synthetic", default=None, metavar="POLICY",
              help="Test cm's fake model with this policy (careful, faulty_<class>, …) instead of a real one.")
@click.option("--model", default=None, help="A candidate model name (default: the configured one).")
@click.option("--base-url", default=None, help="The candidate's OpenAI-compatible base URL.")
@click.option("--api", type=click.Choice(["responses", "chat_completions"]), default=None, help="The candidate's API.")
@click.option("--api-key-env", default=None, help="The variable in your private .env that holds the candidate's key.")
@click.option("--world", "worlds", multiple=True, metavar="ID", help="Run this shipped world (repeatable).")
@click.option("--class", "classes", multiple=True, metavar="CLASS", help="Run the shipped worlds testing this class.")
@click.option("--world-file", "files", multiple=True, type=click.Path(dir_okay=False),
              help="Run a world you wrote (TOML, repeatable); shipped worlds only if named too.")
@click.option("--judge-model", default=None, help="A judge model for the judgement checks (never scored).")
@click.option("--judge-base-url", default=None, help="The judge's OpenAI-compatible base URL.")
@click.option("--judge-api", type=click.Choice(["responses", "chat_completions"]), default=None, help="The judge's API.")
@click.option("--judge-api-key-env", default=None, help="The variable in your private .env with the judge's key.")
@click.option("--jobs", type=click.IntRange(1, 16), default=min(4, os.cpu_count() or 1), show_default=True,
              help="Worlds run at the same time.")
@click.option("--keep", type=click.Path(file_okay=False), default=None,
              help="Keep each world's temporary home (without its key) in this new folder.")
@click.option("--list", "list_only", is_flag=True, help="List the shipped worlds and their classes.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--yes", is_flag=True, help="Do not ask before sending the worlds to a real provider.")
@click.pass_context
def eval_command(ctx: click.Context, synthetic: str | None, model: str | None, base_url: str | None, api: str | None,
                 api_key_env: str | None, worlds: tuple[str, ...], classes: tuple[str, ...], files: tuple[str, ...],
                 judge_model: str | None, judge_base_url: str | None, judge_api: str | None,
                 judge_api_key_env: str | None, jobs: int, keep: str | None, list_only: bool, as_json: bool,
                 yes: bool) -> None:
    """Score how well a model keeps memory: synthetic worlds, each in a temporary home, through cm's real path.

    By default the model you configured; --model/--base-url for a candidate; --synthetic POLICY for
    cm's own fake model. It sends only the worlds' synthetic text, never your memory."""
    from cmrunner.evals import models, report, runner, world as world_mod

    suite = world_mod.select(worlds, classes, files)
    if list_only:
        for w in suite:
            echo(f"{w.id:<28} {', '.join(w.classes):<60} {w.title}")
        return
    home = _home(ctx)
    tested = models.resolve(home, models.Choice(synthetic, model, base_url, api, api_key_env))
    judge = models.judge(home, judge_model, judge_base_url, judge_api_key_env, judge_api)
    echo(models.statement(tested, sum(len(w.sessions) for w in suite), sum(w.user_turns for w in suite), len(suite)),
         err=True)
    if judge is not None:
        echo(f"judge: {judge.label} receives each judged world's resulting memory (synthetic) and one question.",
             err=True)
    if (not tested.synthetic or judge is not None) and not yes:
        confirm("Go ahead?", "this sends requests to a paid provider")
    if keep is not None:
        runner.make_keep(keep)
    progress = (lambda p: _bar(p.done, p.total, p.world, p.status)) if is_terminal(err=True) else (lambda _p: None)
    result = runner.drive(runner.run(suite, tested, judge, jobs, keep), progress)
    if as_json:
        echo(json.dumps(result.model_dump(by_alias=True), indent=2, ensure_ascii=False))
    else:
        echo(report.markdown(result), nl=False)
    if result.score.passed != result.score.worlds:
        ctx.exit(1)
