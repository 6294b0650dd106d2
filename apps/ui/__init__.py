"""Shared UI package of the KDA State Lab apps (re-exports only; see docs/apps.md).

``from apps import ui`` gives the whole stable API: the registry (``APPS``, ``load_app``), the
page shell (``header``, ``figure_slot``), figure styling (``style``, ``log_axis``, ``vline``),
CSV export (``write_csv``, ``series_csv``), validation (``check_int``, ``study_errors``) and
serving (``main``, ``launched``). ``apps.ui.guard`` (validators that leave the page alone on bad
input) and ``apps.ui.i18n`` (the 中文 phrase tables machinery) are imported as submodules.
"""

from __future__ import annotations

from apps.ui.catalog import LANGS as LANGUAGES
from apps.ui.catalog import Catalog, Msg, T, UserError
from apps.ui.checks import check_choice, check_float, check_int, clip_text, fail, study_errors
from apps.ui.export import series_csv, write_csv
from apps.ui.figures import (
    COLORS,
    FONT,
    SERIES,
    compact,
    empty_figure,
    hline,
    log_axis,
    log_ticks,
    style,
    vline,
)
from apps.ui.launch import (
    CSS,
    HOST,
    LAUNCH_KWARGS,
    PORT,
    PORT_TRIES,
    THEME,
    bind_port,
    free_port,
    launch_on_free_port,
    launched,
    main,
    next_free_port,
    plot_from_client,
)
from apps.ui.layout import (
    CSV_ZH,
    LANGS,
    FigureSlot,
    Lang,
    _relabel,  # the switch's per-component update (tested directly)
    csv_label,
    figure_slot,
    header,
)
from apps.ui.registry import APPS, ASSETS, ROOT, SCREENSHOTS, AppInfo, app_info, load_app

__all__ = [
    "APPS",
    "ASSETS",
    "AppInfo",
    "Catalog",
    "LANGUAGES",
    "Msg",
    "T",
    "UserError",
    "fail",
    "COLORS",
    "CSS",
    "CSV_ZH",
    "FONT",
    "FigureSlot",
    "HOST",
    "LANGS",
    "LAUNCH_KWARGS",
    "Lang",
    "PORT",
    "PORT_TRIES",
    "ROOT",
    "SCREENSHOTS",
    "SERIES",
    "THEME",
    "_relabel",
    "app_info",
    "bind_port",
    "check_choice",
    "check_float",
    "check_int",
    "clip_text",
    "compact",
    "csv_label",
    "empty_figure",
    "figure_slot",
    "free_port",
    "header",
    "hline",
    "launch_on_free_port",
    "launched",
    "load_app",
    "log_axis",
    "log_ticks",
    "main",
    "next_free_port",
    "plot_from_client",
    "series_csv",
    "study_errors",
    "style",
    "vline",
    "write_csv",
]
