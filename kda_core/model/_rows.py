"""Append-only row buffers for steady decoding: every request's MLA latents and conv windows.

A one-token step adds one row per request (its new latent; the token's conv input), and the
rest of each request's history is unchanged. Laying that history out again every step copied
it all (latents: the whole past, once per step; conv: W-1 rows per layer). These buffers keep
it in place and append: a step whose inputs are the views this buffer handed out last (same
requests, same order) writes only the new rows. Rows a handed-out view covers are never
written again, so every view stays valid after later steps; when a buffer is full its live
rows move to a new one (one copy) and the old views keep the old buffer.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ConvRows", "LatentRows"]


def address(a: np.ndarray) -> int:
    """The address of an array's first element (views of one buffer compare by it)."""
    return a.__array_interface__["data"][0]


class LatentRows:
    """Every request's MLA latents as rows ``:n[i]`` of one zero-padded buffer [N, cap, n_mla,
    C] that the one-token pass appends to in place: a step whose pasts are this buffer's
    views from the previous step (same requests, same order) writes only the new rows, where
    laying the pasts out again copied every request's whole history once per step.

    The views handed out (``views``) are read-only and cover rows ``:n[i]``; a row is written
    only past every view handed out for its request (its high-water mark), so no view ever
    sees a change. Rows past ``n[i]`` stay zero (finite: attention masks them with exact 0
    weights, and 0 times a finite value is 0). The capacity doubles when full (one copy)."""

    def __init__(self, pasts: Sequence[np.ndarray]) -> None:
        n = np.array([p.shape[0] for p in pasts])
        cap = max(16, 2 * (int(n.max()) + 1))
        self.buf = np.zeros((len(pasts), cap) + pasts[0].shape[1:])
        for i, p in enumerate(pasts):
            self.buf[i, : n[i]] = p
        self.n = n  # rows filled per request = its high-water mark

    def extends(self, pasts: Sequence[np.ndarray]) -> bool:
        """Whether pasts[i] is exactly rows ``:n[i]`` of this buffer for every i."""
        b = self.buf
        if len(pasts) != b.shape[0]:
            return False
        ptr, step = address(b), b.strides[0]
        for i, p in enumerate(pasts):
            if p.shape[0] != self.n[i] or p.strides != b.strides[1:]:
                return False
            if address(p) != ptr + i * step:
                return False
        return True

    def grow(self) -> tuple[np.ndarray, np.ndarray]:
        """One more row per request: -> (rows ``:max n`` of the buffer, the new n)."""
        n = self.n + 1
        L = int(n.max())
        if self.buf.shape[1] < L:
            buf = np.zeros((self.buf.shape[0], 2 * L) + self.buf.shape[2:])
            buf[:, : self.buf.shape[1]] = self.buf
            self.buf = buf
        self.n = n
        return self.buf[:, :L], n

    def views(self) -> list[np.ndarray]:
        out = []
        for i, m in enumerate(self.n):
            v = self.buf[i, :m]
            v.flags.writeable = False
            out.append(v)
        return out


class ConvRows:
    """Every request's conv windows as rows ``p : p+W-1`` of one buffer [L, N, W-1+spare, D]:
    a step writes the token's row at ``p+W-1`` (``begin``: the W rows a conv step reads, the
    window then the token), and the new window is rows ``p+1 : p+W`` (``advance``, a view).
    Only rows past every window handed out are written."""

    def __init__(self, conv: np.ndarray, spare: int = 16) -> None:
        L, N, w, D = conv.shape
        self.w, self.spare = w, spare
        self.buf = np.empty((L, N, w + spare, D))
        self.buf[:, :, :w] = conv
        self.p = 0

    def extends(self, conv: np.ndarray) -> bool:
        """Whether conv [L, N, W-1, D] is exactly the window this buffer handed out last."""
        b = self.buf
        if conv.shape != b.shape[:2] + (self.w, b.shape[3]):
            return False
        if not self.w:  # conv_size 1: no window to keep (an empty view's address is arbitrary)
            return True
        return conv.strides == b.strides and address(conv) == address(b) + self.p * b.strides[2]

    def begin(self) -> np.ndarray:
        """The rows this step reads, [L, N, W, D]: the windows, then the row the step writes
        its tokens' inputs into (moved to a new buffer first when full)."""
        if self.p + self.w + 1 > self.buf.shape[2]:
            buf = np.empty_like(self.buf)
            buf[:, :, : self.w] = self.buf[:, :, self.p : self.p + self.w]
            self.buf, self.p = buf, 0
        return self.buf[:, :, self.p : self.p + self.w + 1]

    def advance(self) -> np.ndarray:
        """After the step: the new windows [L, N, W-1, D] (a view; the next step's input)."""
        self.p += 1
        return self.buf[:, :, self.p : self.p + self.w]
