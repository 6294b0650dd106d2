"""fleet_routing in headless Chromium: the worked default (three figures and the routers'
table), more replicas, a bad input rejected on its field with the page kept, the language
switch translating labels and figures."""

from __future__ import annotations

APP = "fleet_routing"
FIGS = ("rates", "over", "load")


def test_page(app_url, ui):
    ui.goto(app_url)
    for fig in FIGS:
        ui.wait_plot(f"fleet_routing-{fig}")
    old = ui.figure("fleet_routing-rates")
    assert "1000 requests, 4 replicas" in old
    ui.page.get_by_text("State-aware vs KV events").wait_for()

    ui.fill("fleet_routing-replicas", 3)
    ui.click("Route")
    new = ui.wait_new_figure("fleet_routing-rates", old)
    assert "1000 requests, 3 replicas" in new

    figs = tuple(f"fleet_routing-{f}" for f in FIGS)
    ui.rejects(
        "fleet_routing-replicas", 0, "Route", "replicas must be an integer in [1, 16], got 0", figs
    )
    ui.rejects(
        "fleet_routing-weight", -1, "Route", "overlap weight w must be a number in [0, 100]", figs
    )
    ui.fill("fleet_routing-weight", 1)
    ui.fill("fleet_routing-replicas", 3)

    rates = ui.figure("fleet_routing-rates")
    ui.page.get_by_label("中文").check()
    ui.page.get_by_text("在多个副本之间路由混合模型").first.wait_for()
    zh = ui.wait_new_figure("fleet_routing-rates", rates)
    assert "各路由器的命中率" in zh and "状态感知" in zh
    ui.page.get_by_text("状态感知相对 KV 事件").wait_for()
