"""Deferred state writes for steady decoding: a batch's KDA states as the states of some step
(the base) plus the rank-1 writes of the one-token steps since, written out every few steps.

Each one-token step of the delta rule is ``S_t = diag(alpha_t) S_{t-1} + k_t u_t^T``. Written
out every step, that is a pass over every state (read and write: [N, H, K, V] per layer, the
decode's largest memory traffic at 32 requests). Unrolled from a base B with the decay since
it, ``c_t = alpha_1 ... alpha_t`` (per key channel),

    S_t = diag(c_t) B + sum_{j <= t} diag(c_t / c_j) k_j u_j^T,

so a step only needs reads of S_{t-1}, and those come from B and the pending entries:
``S_{t-1}^T (alpha_t x) = B^T (c_t x) + sum_j u_j ((k_j / c_j) . (c_t x))`` (one read of B,
two small matmuls over the entries). Every ``R`` steps, or whenever someone will read a state
(the runner decides: a planned checkpoint, a finish, a change of batch), the states are
written out in one matmul per layer, ``S_t = [diag(c_t) | c_t (k_j / c_j) ... | k_t] @ [B;
u_1^T; ...; u_t^T]``: the [diag(alpha) | k] @ [S; u^T] write of ``model._decode`` with one
column and row per pending step. The u rows live in the base buffer's rows K.., below the
base states the slots' views show.

Exactness: the same quantities in another order (tests hold tokens and logits to each
request's own run at 1e-9, and this form against the step-by-step one). ``k_j / c_j``: c is a
product of at most R gates, each >= exp(gate_lower_bound), so R is capped (``window_steps``) to
keep c >= e^-300 and the quotients finite; a step that writes uses k_t itself (no division),
so R = 1 is exactly the eager form. This is the lab's numpy choice, not an engine's: SGLang's
and vLLM's decode kernels update the state in on-chip memory once per token; here the write is
a separate pass over memory that batching does not amortise.
"""

from __future__ import annotations

import numpy as np

from kda_core.model._rows import address

__all__ = ["DEFER_STEPS", "StateWindow", "window_steps"]

# Pending steps before a write (measured: one-token steps of the bench's 32 x 6 KDA layers,
# KDA core alone, deferred / eager 0.90 at R = 2, ~0.75 at 4, ~0.78 at 8, 0.80 at 16; whole
# batched serves, R = 4 and 16 against 8: 1.01x and 1.05x the CPU time; the entries' small
# matmuls grow with R while the write is amortised over it)
DEFER_STEPS = 8
_LOG_C_MIN = -300.0  # c = product of the window's gates stays >= e^-300: k / c stays finite


def window_steps(gate_lower_bound: float, cap: int | None = None) -> int:
    """Steps a window may hold: at most ``cap`` (None: ``DEFER_STEPS``; 1: write every step),
    and few enough that the product of its gates (each >= exp(gate_lower_bound)) stays >=
    e^-300."""
    assert gate_lower_bound < 0, "the model's gate lower bound is negative"
    cap = DEFER_STEPS if cap is None else cap
    return max(1, min(cap, int(_LOG_C_MIN / gate_lower_bound)))


class StateWindow:
    """One batch's KDA states: base states and the pending entries of up to R steps.

    ``buf`` [L, N, H, K+R, V]: rows :K the base states (what the slots' views show), row K+j
    entry j's u; ``kq`` [L, N, H, K, R]: entry j's k_j / c_j; ``cum`` [L, N, H, K]: the decay
    since the base through the last entry; ``r``: entries pending."""

    def __init__(self, buf: np.ndarray, R: int) -> None:
        L, N, H, KR, V = buf.shape
        K = KR - R
        self.buf, self.R, self.K, self.r = buf, R, K, 0
        self.kq = np.empty((L, N, H, K, R)) if R > 1 else None
        self.cum = np.ones((L, N, H, K))

    @classmethod
    def of(cls, S: np.ndarray, R: int) -> StateWindow:
        """A window with base S [L, N, H, K, V]: S's own buffer when S is rows :K of a window
        buffer of R (a previous write's output: no copy), else a new one holding a copy."""
        L, N, H, K, V = S.shape
        base = S.base
        if (
            isinstance(base, np.ndarray)
            and base.shape == (L, N, H, K + R, V)
            and base.dtype == S.dtype
            and base.flags.c_contiguous
            and S.strides == base.strides
            and address(S) == address(base)
        ):
            return cls(base, R)
        buf = np.empty((L, N, H, K + R, V), dtype=S.dtype)
        buf[:, :, :, :K] = S
        return cls(buf, R)

    @property
    def base(self) -> np.ndarray:
        return self.buf[:, :, :, : self.K]

    def new_buffer(self) -> np.ndarray:
        return np.empty_like(self.buf)

    def step(self, j, qk, v, alpha, beta, M, out) -> np.ndarray:
        """Layer j's delta-rule step for this window's next entry: qk [N, 2, H, K] (q and k,
        normalised), alpha [N, H, K], v [N, H, V], beta [N, H]. Records u; with ``out`` (rows
        :K of layer j of a new buffer, [N, H, K, V]) also writes S_t there (M: the zeroed [N,
        H, K, K+R] write matrix, only its diagonal and columns K.. written). Returns the
        read-out after the write, ``S_t^T q`` [N, H, V]."""
        K, r = self.K, self.r
        c = self.cum[j]
        c *= alpha  # the decay since the base, through this step
        q, k = qk[:, 0], qk[:, 1]
        x = np.multiply(qk.transpose(0, 2, 1, 3), c[:, :, None])  # [N, H, 2, K]: c q, c k
        Sa = self.buf[j]
        read = np.matmul(x, Sa[:, :, :K])  # [N, H, 2, V]: B^T (c q), B^T (c k)
        if r:  # the pending entries: sum_j u_j ((k_j / c_j) . (c x))
            assert self.kq is not None, "a window of R > 1 keeps its entries' keys"
            read += np.matmul(np.matmul(x, self.kq[j, :, :, :, :r]), Sa[:, :, K : K + r])
        u = v - read[:, :, 1]
        u *= beta[..., None]
        Sa[:, :, K + r] = u
        o = np.einsum("nhk,nhk->nh", q, k)[..., None] * u
        o += read[:, :, 0]
        if out is None:
            assert self.kq is not None and r + 1 < self.R, "a full window writes"
            np.divide(k, c, out=self.kq[j, :, :, :, r])
        else:
            self._write(j, k, M, out, r + 1)
        return o

    def _write(self, j: int, k_last, M, out, n: int) -> None:
        """Layer j's S after n entries into out: [diag(c) | c (k_i / c_i) ... | k_last] @
        [B; u_1^T ...]; k_last None: the last entry's column from its stored k / c too."""
        K = self.K
        c = self.cum[j]
        diag = M.reshape(M.shape[0], M.shape[1], -1)[:, :, : K * M.shape[3] : M.shape[3] + 1]
        diag[...] = c  # (i, i), i < K
        stored = n - 1 if k_last is not None else n
        if stored:
            assert self.kq is not None
            np.multiply(self.kq[j, :, :, :, :stored], c[..., None], out=M[..., K : K + stored])
        if k_last is not None:
            M[..., K + n - 1] = k_last
        np.matmul(M[..., : K + n], self.buf[j][:, :, : K + n], out=out)

    def advanced(self, new: np.ndarray | None) -> StateWindow:
        """After every layer's step: the window with this entry pending, or (the step wrote
        into ``new``) a fresh window on the new states."""
        if new is None:
            self.r += 1
            return self
        return StateWindow(new, self.R)

    def write_pending(self, M: np.ndarray) -> np.ndarray:
        """Every layer's S after the pending entries, into a new buffer (its rows :K, [L, N, H,
        K, V], returned): the batch changed or its states will be read. No entries: the base."""
        if not self.r:
            return self.base
        new = self.new_buffer()
        for j in range(self.buf.shape[0]):
            self._write(j, None, M, new[j, :, :, : self.K], self.r)
        return new[:, :, :, : self.K]
