"""How measurements look in a terminal (rich tables). Pure formatting: no measuring here."""

from __future__ import annotations

from rich.table import Table

from speedopt.knobs import value_text
from speedopt.measure import TrialResult


def shown_name(name: object, markup: bool = False) -> str:
    """A name read from storage (a study's name, the dataset path it stores) as a terminal may print it: unchanged
    when every character is printable, else as ``speedopt import`` names it (Python's repr: ``'\\x1b[31m'``, never
    the escape sequence itself), so an imported study cannot drive the user's terminal. ``markup``: also escaped
    for rich, which would read ``[bold]`` in a name as markup."""
    text = str(name)
    if not text.isprintable():
        text = repr(text)
    if markup:
        from rich.markup import escape

        text = escape(text)
    return text


def _fmt(value: object, unit: str = "", digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}{unit}"
    return f"{value}{unit}"


def trial_table(result: TrialResult) -> Table:
    """One trial's status, knobs as run and measured figures."""
    table = Table(title=f"trial: {result.status.value}", show_header=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    table.add_row("message", result.message)
    table.add_row("config (as run)", " ".join(f"{k}={value_text(v)}" for k, v in result.config.to_dict().items()))
    table.add_row("device / engine", f"{result.device} / {result.engine} {result.engine_version or ''}")
    table.add_row("images/s (measured)", _fmt(result.images_per_s, digits=1))
    table.add_row("step time median / p90", f"{_fmt(result.step_s_median, ' s', 3)} / {_fmt(result.step_s_p90, ' s', 3)}")
    wait = None if result.data_wait_fraction is None else 100 * result.data_wait_fraction
    table.add_row("waiting for data", _fmt(wait, " %", 1))
    table.add_row("setup (scan, cache, model)", _fmt(result.setup_s, " s", 1))
    table.add_row("of which label scan", _fmt(result.label_scan_s, " s", 1) + (" (read from the label cache)" if result.label_scan_s == 0.0 else ""))
    read = "-"
    if result.image_bytes_mean is not None and result.image_long_side is not None:
        read = f"long side {result.image_long_side} px, {result.image_bytes_mean / 2**10:.0f} KiB each (mean)"
    table.add_row("train images read", read)
    if result.config.compile != "off" or result.compile_s is not None:
        table.add_row("torch.compile (one time)", _fmt(result.compile_s, " s", 1) + " in the warm-up steps beyond steady ones: paid once per run, not in images/s")
        gap = None if result.compile_loss_gap is None else 100 * result.compile_loss_gap
        table.add_row("compiled vs eager loss", _fmt(gap, " %", 4) + " apart on the first batch (accuracy-neutral within 1%)")
    table.add_row("peak RAM (with workers)", _fmt(result.peak_ram_mb, " MB", 0))
    table.add_row("peak GPU memory", _fmt(result.peak_gpu_mem_mb, " MB", 0))
    table.add_row("GPU busy (NVML) / CPU utilisation", f"{_fmt(result.gpu_util_mean, ' %', 0)} / {_fmt(result.cpu_util_mean, ' %', 0)}")
    table.add_row("model FLOPs per trained image", flops_text(result))
    table.add_row("share of the device's peak", peak_text(result))
    table.add_row("torch CPU threads", _fmt(result.torch_threads))
    table.add_row("images used / total", f"{_fmt(result.images_used)} / {_fmt(result.images_total)}")
    for note in result.notes:
        table.add_row("note", note)
    if result.log_tail and not result.ok:
        table.add_row("trainer log (last lines)", result.log_tail)
    return table


def flops_text(result: TrialResult) -> str:
    """The model's GFLOPs per trained image with its basis (an estimate), or why it was not counted."""
    if result.gflops_per_image is None:
        return result.flops_basis or "-"
    return f"{result.gflops_per_image:.3g} GFLOPs, {result.flops_basis}"


def peak_text(result: TrialResult) -> str:
    """The share of the device's dense peak reached, with the TFLOP/s it stands for, or "peak unknown" and why."""
    if result.peak_share is None:
        return result.peak_unknown or "-"
    achieved = result.achieved_tflops or 0.0
    return f"{result.peak_percent} of {result.peak_basis}: {achieved:.3g} TFLOP/s per GPU (estimate, from the FLOPs above)"
