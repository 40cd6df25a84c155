"""``ttftscope doctor``: name the bottleneck and the remedy, from live checks and records."""

from __future__ import annotations

import time
from pathlib import Path

import click

from ttftscope.cli.console import make_console
from ttftscope.cli.options import CliState, cli_state, dumps, endpoint_options, run_async
from ttftscope.cli.probe import parse_numbers
from ttftscope.cli.progress import RequestProgress, SampleProgress
from ttftscope.client.endpoint import Endpoint
from ttftscope.config.loader import LoadedSettings
from ttftscope.doctor.diagnose import Inputs, diagnose
from ttftscope.doctor.gather import Live, read_live, read_recorded, recorded_runs
from ttftscope.doctor.sampling import DEFAULT_SECONDS, Sampling
from ttftscope.findings import Diagnosis
from ttftscope.localserver.model import model_dir
from ttftscope.probe.experiments import ProbeOptions, run_probe
from ttftscope.records import DOCTOR_PROBE, RecordWriter, RequestRecord
from ttftscope.report.terminal import print_diagnosis, print_verdict
from ttftscope.results.runs import Run
from ttftscope.tokenization.loader import Tokenizer, load_tokenizer

__all__ = ["doctor", "records_diagnosis"]


def _tokenizer(loaded: LoadedSettings) -> Tokenizer | None:
    path = loaded.settings.tokenizer.path
    if path is None and loaded.sources["api.base_url"].kind == "local":
        path = model_dir()  # the local server's own model: its tokenizer is right here
    return None if path is None or not Path(path).exists() else load_tokenizer(path)


def _logs(loaded: LoadedSettings) -> list[Path]:
    s = loaded.settings
    out = []
    if s.gateway.log_prompts and s.gateway.request_log is not None:
        out.append(s.gateway.request_log)
    if s.observability.records_dir is not None:
        out.append(s.observability.records_dir / "requests.jsonl")
    return out


def _live_probe(
    state: CliState,
    ep: Endpoint,
    tok: Tokenizer | None,
    sizes: list[int],
    out: Path,
    budget_s: float,
) -> Path:
    """A short probe (chat, then text vs ids with a tokenizer, then the chat in non-ASCII
    letters) whose records the rules read.

    Its requests are labelled the doctor's own (:data:`DOCTOR_PROBE`): the tokenization it
    times is ttftscope's, never a finding about the user's client. It says how long it may
    take, and sends no new request once ``budget_s`` is spent.
    """
    opts = ProbeOptions(
        context_tokens=sizes,
        repeat=3,
        num_warmups=1,
        ab="ids" if tok is not None else None,
        salt=f"doctor-{time.time_ns() % 10**9}",
        metrics_settle_s=2.0,
        budget_s=budget_s,
        client_tokenize=False,
        non_ascii=True,
    )
    what = "chat/" + ("ids/" if tok is not None else "") + "non-ASCII"
    state.err.print(  # under 80 columns: 79 with three-digit figures
        f"short probe ({what}): {opts.total_requests} requests, {budget_s:g} s at most "
        "(--probe-seconds)…",
        highlight=False,
    )
    path = out / f"probe-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"
    with RecordWriter(path) as writer, RequestProgress(opts.total_requests, state.err) as bar:

        def labelled(rec: RequestRecord) -> None:
            rec.notes.append(DOCTOR_PROBE)
            bar.record(rec)

        run_async(
            run_probe(
                ep,
                opts,
                writer=writer,
                on_record=labelled,
                local_tokenizer=tok,
                on_stage=bar.stage,
            )
        )
    return path


def _read_live(
    state: CliState, ep: Endpoint, loaded: LoadedSettings, seconds: float | None
) -> Live:
    """The live checks, the queue watched for ``seconds`` (5 by default; progress on stderr).

    Watched before any short probe: the probe's own requests would be the queue it saw.
    """
    seconds = DEFAULT_SECONDS if seconds is None else seconds
    if seconds <= 0:
        return run_async(read_live(ep, loaded))
    total = Sampling.window(seconds).count
    with SampleProgress(seconds, total, state.err) as bar:
        return run_async(read_live(ep, loaded, Sampling.window(seconds, bar.sample)))


def _diagnose(
    loaded: LoadedSettings, paths: list[Path], live: Live | None, tok: Tokenizer | None
) -> tuple[Diagnosis, list[Run]]:
    """Every rule over ``paths`` (and the configured request logs) and what ``live`` saw;
    the runs read, for the chart."""
    recorded = read_recorded(paths, _logs(loaded))
    found = diagnose(
        Inputs(loaded=loaded, cwd=Path.cwd(), recorded=recorded, live=live, tokenizer=tok)
    )
    return found, list(recorded.runs)


def records_diagnosis(
    state: CliState, paths: list[Path], runs: list[Run] | None = None
) -> Diagnosis:
    """The doctor's diagnosis of result paths, without live checks (what ``report`` shows).

    ``runs`` already read from ``paths`` are not read again.
    """
    loaded = state.load()
    recorded = (
        read_recorded(paths, _logs(loaded))
        if runs is None
        else recorded_runs(runs, paths, _logs(loaded))
    )
    return diagnose(
        Inputs(loaded=loaded, cwd=Path.cwd(), recorded=recorded, tokenizer=_tokenizer(loaded))
    )


@click.command()
@endpoint_options
@click.option(
    "--records",
    "records",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Probe/bench result dir, records file or request log (repeatable)",
)
@click.option(
    "--live/--no-live",
    default=True,
    show_default=True,
    help="Scrape the endpoint's /metrics (its queue over --sample-seconds) and models "
    "(and the gateway's)",
)
@click.option(
    "--sample-seconds",
    type=click.FloatRange(min=0),
    default=None,
    help=f"Watch the server's queue in /metrics this long, live [default: {DEFAULT_SECONDS:g}; "
    "0: one scrape]",
)
@click.option(
    "--probe/--no-probe",
    "do_probe",
    default=None,
    help="Run a short probe (default: when live and no --records)",
)
@click.option(
    "--context-tokens",
    default="2000,8000",
    show_default=True,
    help="Context sizes of the short probe",
)
@click.option(
    "--probe-seconds",
    type=click.FloatRange(min=1),
    default=60.0,
    show_default=True,
    help="The short probe sends no new request after this long",
)
@click.option(
    "--result-dir",
    type=click.Path(path_type=Path),
    help="Where the short probe's records go [default: ttftscope-results/doctor]",
)
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON")
@click.pass_context
def doctor(
    ctx: click.Context,
    records: tuple[Path, ...],
    live: bool,
    sample_seconds: float | None,
    do_probe: bool | None,
    context_tokens: str,
    probe_seconds: float,
    result_dir: Path | None,
    as_json: bool,
) -> None:
    """Look at the endpoint and the records and say what slows TTFT, with numbers and the
    remedy. Exits 1 when any finding is a warning or worse (gate a pipeline on it)."""
    state = cli_state(ctx)
    loaded = state.load()
    ep = Endpoint.from_settings(loaded.settings, headers=state.headers)
    tok = _tokenizer(loaded)
    sizes = parse_numbers(context_tokens, "--context-tokens", int)
    if sample_seconds is not None and not live:
        raise click.UsageError("--sample-seconds watches the live server: drop --no-live")
    got = _read_live(state, ep, loaded, sample_seconds) if live else None
    paths = list(records)
    reachable = got is not None and got.served_models is not None
    if (do_probe if do_probe is not None else live and not records) and reachable:
        out = result_dir or Path("ttftscope-results/doctor")
        paths.append(_live_probe(state, ep, tok, sizes, out, probe_seconds))
    found, runs = _diagnose(loaded, paths, got, tok)
    if as_json:
        click.echo(dumps(found.model_dump(mode="json") | {"exit_code": found.exit_code}))
    else:
        console = make_console()
        print_verdict(found, runs, console)
        print_diagnosis(found, console, headline=False)
    ctx.exit(found.exit_code)
