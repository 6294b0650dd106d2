"""The app registry: every hub card (``AppInfo``), in hub order, and ``load_app``.

``APPS`` lists every app; ``load_app(name)`` imports ``apps.<name>`` or returns None (with a
log line) when the module is missing, fails to import or has no ``build()``, so the hub survives
one broken app. ``AppInfo.thumbnail`` is the card image written by ``python -m apps.screenshots``.
Nothing here builds UI.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

log = logging.getLogger("apps")

ROOT = Path(__file__).resolve().parent.parent.parent
ASSETS = ROOT / "assets"
SCREENSHOTS = ASSETS / "screenshots"


@dataclass(frozen=True, slots=True)
class AppInfo:
    """One hub card: ``name`` is the module (``apps/<name>.py``) and the URL path (``/<name>``)."""

    name: str
    title: str
    title_zh: str
    blurb: str
    blurb_zh: str

    @property
    def thumbnail(self) -> Path | None:
        """The card image: the first figure (``thumbs/<name>.png``), else the whole page."""
        for p in (SCREENSHOTS / "thumbs" / f"{self.name}.png", SCREENSHOTS / f"{self.name}.png"):
            if p.is_file():
                return p
        return None


APPS: tuple[AppInfo, ...] = (
    AppInfo(
        "prefix_replay",
        "Prefix replay",
        "前缀命中与重放",
        "Send requests through the KDA-aware cache and step through the replay to the match.",
        "把请求送进 KDA 感知的缓存，逐 token 观察从检查点重放到匹配点。",
    ),
    AppInfo(
        "int8_checkpoint",
        "INT8 checkpoints",
        "INT8 检查点",
        "Park a real state as INT8 / fp8 / bf16, restore it, and watch the error and divergence.",
        "把真实状态以 INT8 / fp8 / bf16 停放再恢复，观察误差与后续输出的偏离。",
    ),
    AppInfo(
        "checkpoint_density",
        "Checkpoint density",
        "检查点密度",
        "Checkpoint every K tokens: state memory ~1/K against replay per hit, on a real trace.",
        "每 K 个 token 存一个检查点：状态显存 ~1/K 与每次命中的重放量，在真实 trace 上权衡。",
    ),
    AppInfo(
        "unified_memory",
        "Unified memory",
        "统一显存池",
        "One byte buffer, MLA KV from one end and state slots from the other, vs static splits.",
        "一块显存，MLA KV 从一端增长、状态槽从另一端增长，对比静态划分。",
    ),
    AppInfo(
        "chunk_scan",
        "Chunk scan",
        "分块扫描",
        "Chunked equals recurrent; segment maps compose in any grouping but not in any order.",
        "分块计算等于逐步递推；段映射可任意结合，但不可交换顺序。",
    ),
    AppInfo(
        "speculative_replay",
        "Speculative replay",
        "投机解码重放",
        "Verify D draft tokens, accept a prefix, commit exactly by replaying from the ring.",
        "验证 D 个草稿 token，接受前缀，从环形缓冲精确重放提交。",
    ),
    AppInfo(
        "memory_planner",
        "Memory planner",
        "显存规划",
        "Real configs: state per request, MLA KV per token, slots, and max running requests.",
        "真实模型配置：每请求状态、每 token MLA KV、槽位与最大并发请求数。",
    ),
    AppInfo(
        "state_transfer",
        "State transfer",
        "跨实例状态传输",
        "Model-state objects across instances: prefill to decode, refusals, splices, tiers.",
        "跨实例的模型状态对象：prefill 到 decode、拒绝不匹配、拼接漂移、存储层级。",
    ),
    AppInfo(
        "context_parallel",
        "Context parallel",
        "上下文并行",
        "Split one sequence over P ranks: a prefix scan of affine maps, not a KV broadcast.",
        "把一条序列切到 P 个 rank 上：扫描仿射映射，而不是广播 KV。",
    ),
    AppInfo(
        "fleet_routing",
        "Fleet routing",
        "多副本路由",
        "N replicas behind a router fed by KV events: what KV-only routers promise a hybrid.",
        "由 KV 事件驱动的路由器后面有 N 个副本：只看 KV 的路由器对混合模型多估了什么。",
    ),
)


def app_info(name: str) -> AppInfo:
    for a in APPS:
        if a.name == name:
            return a
    raise KeyError(f"unknown app {name!r}; known: {[a.name for a in APPS]}")


def load_app(name: str) -> ModuleType | None:
    """Import ``apps.<name>``; None (and a log line) when it does not exist or fails to import."""
    mod = f"apps.{name}"
    if importlib.util.find_spec(mod) is None:
        log.warning("app %s skipped: %s.py does not exist yet", name, mod.replace(".", "/"))
        return None
    try:
        m = importlib.import_module(mod)
    except Exception:  # the hub must survive one broken app
        log.exception("app %s skipped: import failed", name)
        return None
    if not callable(getattr(m, "build", None)):
        log.warning("app %s skipped: no build()", name)
        return None
    return m
