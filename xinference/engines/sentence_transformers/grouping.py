"""Splitting one forward pass's inputs into sub-batches of similar length, so little compute goes to padding.

A batch is padded to its longest input: 16 sentences of 8 to 70 tokens padded to 70 cost about 1.7 times the
tokens they hold. Sorting the inputs by token length and cutting the sorted list where the padding saved is worth
more than one more pass costs keeps that waste small. The cut points come from a small dynamic programme over
the sorted lengths (at most ``max_batch_size`` inputs, so at most a few thousand steps).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DEFAULT_PASS_COST_TOKENS", "plan_groups"]

#: What starting one more forward pass costs, in padded tokens' worth of compute (python dispatch, per-layer
#: kernel launches). For a small bi-encoder on CPU one pass costs about as much as a few dozen tokens.
DEFAULT_PASS_COST_TOKENS = 24


def plan_groups(lengths: Sequence[int], pass_cost: int = DEFAULT_PASS_COST_TOKENS) -> list[list[int]]:
    """Indices of ``lengths`` grouped into sub-batches, each sorted by length, minimising the padded tokens plus
    ``pass_cost`` per sub-batch.

    Every index appears exactly once; groups come shortest first. With ``pass_cost`` very large this is one
    group (plain batching); with 0, one group per distinct length.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    if len(order) <= 1:
        return [order] if order else []
    sizes = [lengths[i] for i in order]
    count = len(sizes)
    # best[j]: the least cost of the first j sorted inputs; cut[j]: where the last group of that plan starts
    best = [0] + [0] * count
    cut = [0] * (count + 1)
    for end in range(1, count + 1):
        longest = sizes[end - 1]  # sorted: the group's last input is its longest
        best[end] = -1
        for start in range(end):
            cost = best[start] + pass_cost + (end - start) * longest
            if best[end] < 0 or cost < best[end]:
                best[end], cut[end] = cost, start
    groups: list[list[int]] = []
    end = count
    while end > 0:
        start = cut[end]
        groups.append(order[start:end])
        end = start
    groups.reverse()
    return groups
