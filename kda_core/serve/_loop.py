"""``Engine.serve``'s loop (nano-vllm's ``LLMEngine.step``): reject what can never fit, then each
step schedule -> run -> post-process (``Lifecycle.advanced``, ``finish``, ``end_step``),
jumping over idle steps to the next arrival; one ``StepRow`` per step that ran (who ran,
tokens, admissions, retractions, finishes, phases, the pool by kind).
"""

from __future__ import annotations

import time
from collections import Counter

from kda_core import sizing
from kda_core.serve._args import Parts
from kda_core.serve._blocks import BlockLifecycle
from kda_core.serve._lifecycle import Lifecycle
from kda_core.serve._runner import Runner
from kda_core.serve._scheduler import Batch, Scheduler
from kda_core.serve._state import RequestState
from kda_core.serve.report import GenerateReport, ServeReport, StepRow


def reject_message(r: RequestState, kv_tokens: int) -> str:
    """SGLang's wording (``tokenizer_manager.py`` ``_validate_one_request``) for a request
    whose KV can never fit: here the limit is the KV token pool, and a request needs its
    prompt plus every output but the last (the lab's parenthesis says how many)."""
    return (
        f"Requested token count exceeds the KV cache capacity of {kv_tokens} tokens. You "
        f"requested a total of {r.P + r.n_new} tokens: {r.P} tokens from the input messages "
        f"and {r.n_new} tokens for the completion (its KV needs {r.total} of them: every "
        f"token but the last). Please "
        f"reduce the number of tokens in the input messages or the completion to fit within "
        f"the limit."
    )


def concurrency(parts: Parts, requested: int | None) -> tuple[int, str | None]:
    """Max running requests and SGLang's capping message for the state pool."""
    c, n = parts.config, parts.pools.state_slots
    if c.blocks:  # the block table holds the states: a request needs one working slot
        return (n if requested is None else min(n, requested)), None
    graph_max = None if c.graph_bs is None else c.graph_bs[-1]  # cuda_graph_max_bs
    cap = sizing.max_running_requests(n, c.strategy, c.overlap, cuda_graph_max_bs=graph_max)
    msg = sizing.capping_message(n, c.strategy, c.overlap, requested=requested)
    return (cap if requested is None else min(cap, requested)), msg


def _admissible(
    parts: Parts, states: list[RequestState], kv_tokens: int | None
) -> tuple[list[RequestState], dict[int, str]]:
    """The requests that can ever run, and SGLang's message for each one that cannot: more
    KV than the KV pool (or, in one byte buffer, than it holds beside the request's slots)."""
    u = parts.pools.unified
    kv_max = kv_tokens if u is None else u.kv_capacity_alone(parts.pools.pingpong.up_front)
    rejected: dict[int, str] = {}
    live = []
    for r in states:
        if kv_max is not None and r.total > kv_max:
            r.phase = "rejected"
            rejected[r.idx] = reject_message(r, kv_max)
        else:
            live.append(r)
    return live, rejected


class Loop:
    """The engine's serving parts, made once (nano-vllm's ``LLMEngine``: one scheduler, one
    runner): the request lifecycle over the cache and pools (the radix tree's, or vLLM's block
    table's), the scheduler, the runner."""

    def __init__(self, parts: Parts) -> None:
        self.parts = parts
        self.life = BlockLifecycle(parts) if parts.config.blocks else Lifecycle(parts)
        self.scheduler = Scheduler(self.life)
        self.runner = Runner(parts.model, parts.pools.active, graph_bs=parts.config.graph_bs)
        self.totals: Counter = Counter()  # over the finished requests (``EngineStats``)

    def serve(
        self,
        states: list[RequestState],
        max_batch_tokens: int,
        max_running_requests: int | None,
        kv_tokens: int | None,
    ) -> ServeReport:
        """Serve the checked ``states`` (see the module docstring)."""
        t0 = time.process_time()
        parts = self.parts
        cap, msg = concurrency(parts, max_running_requests)
        live, rejected = _admissible(parts, states, kv_tokens)
        sched, runner, life = self.scheduler, self.runner, self.life
        life.start()
        sched.start(live, max_running=cap, max_batch_tokens=max_batch_tokens, kv_tokens=kv_tokens)
        runner.start()
        reports: list[GenerateReport | None] = [None] * len(states)
        rows: list[StepRow] = []
        step = 0
        try:
            while sched.running or sched.waiting or life.deferred:
                b = sched.schedule(step)
                if not (b.decode or b.verify or b.prefill):  # nothing to run this step
                    jump = sched.next_arrival(step)
                    if jump is not None:  # nothing runs, nothing has arrived: jump to it
                        step = jump
                        continue
                    if sched.running or sched.waiting:
                        raise RuntimeError("serve: no request can run and none is coming (a bug)")
                    life.end_step()  # the last step's deferred post-processing
                    continue
                finished = []
                for r, n, logits in runner.run(b):
                    if life.advanced(r, n, logits):
                        reports[r.idx] = rep = life.finish(r)
                        self.totals.update(_totals(rep))  # a request that raised: not counted
                        sched.running.remove(r)
                        finished.append(r.idx)
                life.end_step()  # overlap: the previous step's post-processing, after the forward
                rows.append(self._row(step, b, finished, states))
                step += 1
        except BaseException:
            life.drop_deferred()
            for r in sched.running:
                life.release(r)
            sched.running.clear()
            sched.waiting.clear()
            raise
        return ServeReport(
            reports=reports,
            steps=rows,
            rejected=rejected,
            max_running=cap,
            capping_message=msg,
            peak_running=sched.peak_running,
            retractions=sum(r.retractions for r in states),
            seconds=time.process_time() - t0,
            scheduler_seconds=sched.seconds,
            runner_seconds=runner.seconds,
            block_steps=tuple(life.rows),
        )

    def _row(self, step: int, b: Batch, finished: list[int], states: list[RequestState]) -> StepRow:
        parts = self.parts
        held, cached, free, ck_free = parts.pools.by_kind(parts.cache.n_states)
        ran = tuple(r.idx for r in b.decode) + tuple(r.idx for r, _ in b.verify + b.prefill)
        retracted = tuple(sorted(r.idx for r in b.retracted))
        phases = [r.phase for r in states]
        for i in retracted:  # ``idx`` is the request's place in ``states``
            phases[i] = "retracted"
        return StepRow(
            step=step,
            running=ran,
            prefill_tokens=sum(n for _, n in b.prefill),
            decode_tokens=len(b.decode) + sum(n for _, n in b.verify),
            admitted=tuple(r.idx for r in b.admitted),
            retracted=retracted,
            finished=tuple(finished),
            phases=tuple(phases),
            slots_running=held,
            slots_cached=cached,
            slots_free=free,
            checkpoint_free=ck_free,
            graph=self.runner.graph,
            border=None if parts.pools.unified is None else parts.pools.unified.border(),
            held_for_memory=b.held_for_memory,
        )


def _totals(r: GenerateReport) -> dict[str, int]:
    """What a finished request adds to its engine's totals (``EngineStats``)."""
    return {
        "requests": 1,
        "state_hits": r.restore_at > 0,
        "token_hits": r.token_match > 0,
        "prompt_tokens": len(r.prompt),
        "restored_tokens": r.restore_at,
        "replayed_tokens": r.replayed,
        "prefilled_tokens": r.prefilled,
        "decoded_tokens": r.decoded,
        "evicted_states": r.evicted_states,
        "evicted_kv_tokens": r.evicted_kv_tokens,
        "checkpoints_skipped": r.checkpoints_skipped,
    }
