"""Shared UI package of the KDA State Lab apps (re-exports only; see docs/apps.md).

``from apps import ui`` gives the whole stable API: the registry (``APPS``, ``load_app``),
messages (``Catalog``, ``Msg``, ``T``, ``UserError``, ``LANGS``), figure styling (``style``,
``log_axis``, ``vline``), CSV export (``write_csv``, ``series_csv``), validation
(``check_int``, ``fail``, ``study_errors``) and serving (``main``, ``launched``). The page
shell and its language switch are ``apps.ui.page`` (``Page``, ``rendered``); ``apps.ui.guard``
(validators that leave the page alone on bad input) and ``apps.ui.player`` (Play / Pause) are
imported as submodules.
"""

from __future__ import annotations

from apps.ui.catalog import LANGS, Catalog, Msg, T, UserError
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
    top_margin,
    vline,
)
from apps.ui.launch import (
    CSS,
    HOST,
    LAUNCH_KWARGS,
    MAX_UPLOAD_MIB,
    PORT,
    PORT_TRIES,
    SESSION_CAPACITY,
    SESSION_KWARGS,
    SESSION_TTL_S,
    THEME,
    bind_port,
    bound_sessions,
    free_port,
    launch_on_free_port,
    launched,
    main,
    next_free_port,
    plot_from_client,
)
from apps.ui.registry import APPS, ASSETS, ROOT, SCREENSHOTS, AppInfo, app_info, load_app

__all__ = [
    "APPS",
    "ASSETS",
    "AppInfo",
    "Catalog",
    "Msg",
    "T",
    "UserError",
    "fail",
    "COLORS",
    "CSS",
    "FONT",
    "HOST",
    "LANGS",
    "LAUNCH_KWARGS",
    "SESSION_CAPACITY",
    "SESSION_KWARGS",
    "SESSION_TTL_S",
    "MAX_UPLOAD_MIB",
    "PORT",
    "PORT_TRIES",
    "ROOT",
    "SCREENSHOTS",
    "SERIES",
    "THEME",
    "app_info",
    "bind_port",
    "bound_sessions",
    "check_choice",
    "check_float",
    "check_int",
    "clip_text",
    "compact",
    "empty_figure",
    "free_port",
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
    "top_margin",
    "vline",
    "write_csv",
]
