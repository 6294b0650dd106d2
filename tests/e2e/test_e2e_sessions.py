"""Fifty browser tabs of prefix_replay opened and closed leave the server's memory where it
was (``apps.ui.bound_sessions``: a closed tab's session is deleted at once, freed memory
trimmed back to the system, the scenario's engine shared instead of copied per tab).

The server runs in this process (``ui.launched``), so its RSS is this process's."""

from __future__ import annotations

import gc
import time

from apps import prefix_replay, ui

N = "prefix_replay"
TABS = 50
# The bound. Gradio's defaults keep every closed tab's session for an hour (its gr.State: here
# a TabState whose engine was a private fork of the scenario's, ~3 MB, and Gradio's copy of
# the page): measured +168 MB of RSS after these 50 tabs, growing linearly (3.4 MB a tab).
# Bounded, the same 50 tabs measured +19 MB, flat after ~30 tabs (allocator slack from serving
# the batch view on each load, not sessions: no session is left, asserted below). 40 MB is
# about twice the bounded figure and a quarter of the unbounded one: keeping 0.8 MB per
# closed tab, or any tab's engine fork, fails it.
MAX_GROWTH_MB = 40


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_fifty_closed_tabs_leave_no_session_and_bounded_rss(browser) -> None:
    demo = prefix_replay.build()
    with ui.launched(demo) as url:
        ctx = browser.new_context()

        def tab() -> None:
            page = ctx.new_page()
            page.goto(url)
            page.locator(f"#{N}-batch-summary", has_text="Batch").wait_for(timeout=120_000)
            page.locator(f"#{N}-vllm-summary table").wait_for(timeout=60_000)
            page.close()

        for _ in range(3):  # warm the caches every tab shares (model, scenario, figures)
            tab()
        time.sleep(2)
        gc.collect()
        before = _rss_mb()
        for _ in range(TABS):
            tab()
        deadline = time.monotonic() + 30  # the unload events run after the tabs disconnect
        while demo.state_holder.session_data and time.monotonic() < deadline:
            time.sleep(0.5)
        gc.collect()
        grown = _rss_mb() - before
        ctx.close()
        assert not demo.state_holder.session_data, "a closed tab's session was kept"
        assert grown <= MAX_GROWTH_MB, f"RSS grew {grown:.1f} MB over {TABS} closed tabs"
