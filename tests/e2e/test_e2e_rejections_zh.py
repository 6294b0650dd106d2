"""A bad input on a page switched to 中文, one per app on the hub: the message is drawn on
that input in 中文 and every figure keeps what it showed (no "Error" badge; the callback never
ran)."""

from __future__ import annotations

import pytest

from apps.ui import LANGS

# app -> (input, bad value, the button in 中文, a piece of the message in 中文)
BAD = {
    "prefix_replay": ("batch-slots", 4, "一起服务", "必须是 [5, 64] 内的整数，收到 4"),
    "int8_checkpoint": ("tokens", 5000, "停放并恢复", "内的整数，收到 5000"),
    "checkpoint_density": ("intervals", "1000", "运行", "必须是块大小 512 的整数倍"),
    "unified_memory": ("ratios", "0.5, x", "运行", "静态比例必须是 [0.01, 100] 内的数，收到 'x'"),
    "chunk_scan": ("chunk", 0, "运行", "必须是 [1, 256] 内的整数，收到 0"),
    "speculative_replay": ("d", 100, "验证并提交", "必须是 [1, 64] 内的整数，收到 100"),
    "memory_planner": ("tp", 7, "规划", "TP 必须整除 96 个递推状态头；收到 TP=7"),
    "state_transfer": ("tp", 7, "预填充 → 解码", "TP 必须整除 K3 的 96 个 KDA 头，收到 7"),
    "context_parallel": ("docs", "100, 100", "运行", "文档长度之和必须等于 T = 512，收到 200"),
    "fleet_routing": ("replicas", 0, "路由", "副本数必须是 [1, 16] 内的整数，收到 0"),
}


def test_every_app_is_listed() -> None:
    from apps.ui import APPS

    assert set(BAD) == {a.name for a in APPS}


@pytest.mark.parametrize("name", list(BAD))
def test_a_bad_input_is_refused_in_chinese(hub_url, ui, name: str) -> None:  # noqa: ANN001
    field, value, button, message = BAD[name]
    ui.goto(f"{hub_url}{name}/")
    ui.page.wait_for_selector(".js-plotly-plot .main-svg")
    ui.page.wait_for_timeout(2500)  # the load events' later figures
    ui.page.get_by_role("radio", name=LANGS[1]).check()
    ui.page.wait_for_timeout(2500)  # every figure redrawn in 中文
    ids = ui.page.evaluate(
        "() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.data)"
        ".map(g => g.closest('[id]').id)"
    )
    ui.rejects(f"{name}-{field}", value, button, message, tuple(ids))
