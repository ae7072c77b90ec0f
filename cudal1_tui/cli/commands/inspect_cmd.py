"""``cudal1-tui inspect FILE``: check a problem file's contract, then probe it."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cudal1_evaluator.schema import ProbeResult, TensorSpec
from cudal1_tui.errors import ProblemError
from cudal1_tui.problem.inspect import inspect_source
from cudal1_tui.problem.model import Inspection
from cudal1_tui.problem.probing import probe_problem
from cudal1_tui.problem.problem_file import read_source
from cudal1_tui.problem.sizing import cpu_sizes, shrink_for_cpu

NAME = "inspect"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(NAME, help="check a problem file and probe it in a subprocess")
    parser.add_argument("files", type=Path, nargs="+", metavar="FILE")
    parser.add_argument("--device", default="cpu",
                        help="cpu, cuda or cuda:N (default cpu, at the file's `# cpu-sizes:`)")
    parser.add_argument("--no-probe", action="store_true", help="static checks only")
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


@dataclass
class FileReport:
    path: Path
    error: str = ""  # the file could not be read
    inspection: Inspection | None = None
    probe: ProbeResult | None = None
    probed_sizes: dict[str, int | float] = field(default_factory=dict)  # CPU sizes used

    @property
    def ok(self) -> bool:
        if self.error or self.inspection is None or not self.inspection.ok:
            return False
        return self.probe is None or self.probe.ok

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "ok": self.ok,
            "error": self.error,
            "inspection": self.inspection.to_dict() if self.inspection else None,
            "probe": asdict(self.probe) if self.probe else None,
            "probed_sizes": self.probed_sizes,
        }


def check_file(path: Path, *, device: str, probe: bool) -> FileReport:
    report = FileReport(path)
    try:
        source = read_source(path)
    except ProblemError as exc:
        report.error = exc.message
        return report
    report.inspection = inspect_source(source, str(path))
    if not probe or not report.inspection.ok:
        return report
    if device == "cpu":  # H100-sized problems would take minutes on a CPU: use their CPU sizes
        try:
            report.probed_sizes = cpu_sizes(source)
            source = shrink_for_cpu(source)
        except ProblemError as exc:
            report.error = f"{path}: {exc.message}"
            return report
    report.probe = probe_problem(source, device, name=path.stem)
    return report


def run(args: argparse.Namespace) -> int:
    console = Console(highlight=False, soft_wrap=True)
    reports = []
    for path in args.files:
        report = check_file(path, device=args.device, probe=not args.no_probe)
        reports.append(report)
        if not args.json:
            _render(console, report)
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
    return 0 if all(r.ok for r in reports) else 1


def _render(console: Console, report: FileReport) -> None:
    if report.error:
        console.print(f"[bold red]✗[/] {escape(report.error)}")
        return
    assert report.inspection is not None
    inspection = report.inspection
    if not inspection.ok:
        console.print(f"[bold red]✗[/] {escape(inspection.path)}: does not meet the problem "
                      "contract")
        console.print(inspection.report(), markup=False)
        return
    for warning in inspection.warnings:
        console.print(f"[yellow]{escape(warning.render(inspection.path))}[/]")
    probe = report.probe
    if probe is not None and not probe.ok:
        console.print(f"[bold red]✗[/] {escape(inspection.path)}: the probe failed "
                      f"({probe.error_kind or 'error'})")
        console.print(f"  {probe.message}", markup=False)
        return
    console.print(_table(inspection, probe, report.probed_sizes))


def _table(inspection: Inspection, probe: ProbeResult | None,
           probed_sizes: dict[str, int | float]) -> Table:
    title = f"[green]✓[/] {escape(inspection.path)}"
    table = Table(title=title, title_justify="left", show_header=False, box=None,
                  padding=(0, 2))
    table.add_column("what", style="bold")
    table.add_column("value")
    if inspection.docstring:
        table.add_row("computes", escape(inspection.docstring.splitlines()[0]))
    if inspection.forward is not None:
        table.add_row("forward", escape(inspection.forward.render()))
    if inspection.init is not None:
        table.add_row("__init__", escape(inspection.init.render()))
    if inspection.sizes:
        table.add_row("sizes", ", ".join(f"{s.name}={s.value}" for s in inspection.sizes))
    if probe is not None:
        if probed_sizes:
            table.add_row("probed at", "CPU sizes: " + ", ".join(
                f"{k}={v}" for k, v in probed_sizes.items()))
        _probe_rows(table, probe)
    return table


def _probe_rows(table: Table, probe: ProbeResult) -> None:
    table.add_row("init inputs", escape(", ".join(map(str, probe.init_inputs)) or "none"))
    table.add_row("inputs", escape(_specs(probe.inputs)))
    table.add_row("outputs", escape(_specs(probe.outputs)))
    table.add_row("parameters", f"{probe.parameter_count:,}")
    device = probe.device.get("name", "") or probe.device.get("type", "")
    if probe.reference_time_ms is not None:
        table.add_row("reference time", f"{probe.reference_time_ms:.3f} ms on {device} "
                                        f"(eager, median, first estimate)")
    if probe.input_sensitivity is not None:
        table.add_row("input sensitivity", f"{probe.input_sensitivity:.3g} (relative output "
                                           "change across seeds)")
    if probe.message:
        table.add_row("note", f"[yellow]{escape(probe.message)}[/]")


def _specs(specs: list[TensorSpec]) -> str:
    return "\n".join(f"{s.dtype}{list(s.shape)} on {s.device}" for s in specs) or "none"
