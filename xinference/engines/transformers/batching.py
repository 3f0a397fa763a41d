"""Continuous batching for Transformers causal LMs: sequences join and leave a running batch between decode steps.

One thread (the *scheduler*) owns the model. Each turn of its loop it

1. admits waiting sequences while fewer than ``max_num_seqs`` run. The text prompts waiting together are prefilled
   together: one left-padded batch (its own KV cache), at most ``prefill_tokens`` padded tokens per forward pass
   (the launch option ``prefill_step_size``). A longer group is prefilled a chunk per turn, so a long prompt
   delays the running sequences' next token by one chunk at most. Once the whole group is in, each sequence
   samples its first token and the group is merged into the running batch. A prompt with images (or any prompt of
   a model with multimodal rotary positions, or with cache layers other than plain full attention) is prefilled
   alone, whole, as before;
2. drops the sequences whose client went away or that finished;
3. runs one decode step for every running sequence at once.

The batch's KV cache is left-padded: row ``i`` holds sequence ``i``'s keys and values right-aligned, and an
attention mask marks the padding. Merging new sequences pads whichever side is shorter on the left; removing one
selects the remaining rows and trims columns that became padding for every row. Position ids are passed per row,
so padding never shifts a sequence's positions. A long generation therefore never blocks the others: they all
advance one token per step, and a finished or aborted one leaves at the next step.

A batched prefill that fails (out of memory, a bad token in one prompt) is retried one prompt at a time, so only
the prompt at fault fails. The thread, the queue of waiting sequences, detokenization, stop strings and the counters
are :class:`~xinference.engines.continuous.loop.DecodeLoop`'s (shared with the MLX engine); this module brings the
torch batch. Sequences talk to their requester through a :class:`Sink` (called on the scheduler thread; it must not
block).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import Any, Callable, ContextManager

from xinference.engines.continuous.loop import DecodeLoop, Sink
from xinference.engines.continuous.loop import Sequence as BaseSequence
from xinference.engines.continuous.requests import SamplingParams
from xinference.errors import EngineError, XinferenceError

__all__ = ["PREFILL_TOKENS", "SamplingParams", "Scheduler", "Sequence", "Sink"]

logger = logging.getLogger(__name__)

#: Padded prompt tokens (rows x columns) one prefill forward pass takes at most by default; a group of prompts
#: needing more is prefilled over several turns, a decode step of the running sequences between two chunks.
PREFILL_TOKENS = 512


@dataclass(eq=False)
class Sequence(BaseSequence):
    """One request's choice with its torch sampling state (set by the scheduler)."""

    generator: Any = None
    counts: Any = None
    seen: Any = None
    #: a :class:`xinference.engines.grammar.GrammarMatcher` when the output is constrained
    grammar: Any = None
    #: prefill this sequence alone (its batched prefill failed once: find out whether it is the one at fault)
    alone: bool = False


@dataclass(eq=False)
class _Prefill:
    """Prompts being prefilled together, left-padded to one width, a chunk of columns per turn."""

    seqs: list[Sequence]
    ids: Any  # [rows, width] the prompts, right-aligned
    mask: Any  # [rows, width] 1 over each prompt's tokens
    positions: Any  # [rows, width] each token's position in its own prompt
    cache: Any
    done: int = 0  # columns already through the model


class Scheduler(DecodeLoop):
    """Owns the model on one thread and runs the continuous batch. ``start()`` once, ``stop()`` at unload."""

    engine_label = "Transformers"

    def __init__(
        self,
        loader: Callable[[], tuple[Any, Any]],
        *,
        max_num_seqs: int,
        device: str,
        name: str = "transformers",
        prefill_tokens: int = PREFILL_TOKENS,
    ) -> None:
        super().__init__(loader, max_num_seqs=max_num_seqs, name=name)
        self.device = device
        self.prefill_tokens = prefill_tokens
        #: prefill forward passes run (a batch of prompts, or one chunk of it, counts once)
        self.prefills = 0
        self._running: list[Sequence] = []
        self._filling: _Prefill | None = None
        self._cache: Any = None
        self._mask: Any = None  # [rows, columns] 1 where the cache holds a real token
        self._positions: Any = None  # [rows] position id of each row's next token
        self._cache_kwarg = "past_key_values"
        self._plain_cache = True  # every cache layer plain full attention (see _check_cache_layout)

    # -- the backend (scheduler thread) ------------------------------------------------------------------------
    def _on_loaded(self) -> None:
        self._check_cache_layout()
        parameters = inspect.signature(self.model.forward).parameters
        # Transformers renamed ``past_key_values`` to ``cache`` (the old name is deprecated since 5.x).
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"

    def _loop_context(self) -> ContextManager[Any]:
        import torch

        return torch.inference_mode()

    def _live(self) -> list[BaseSequence]:
        filling = self._filling.seqs if self._filling is not None else []
        return [*self._running, *filling]

    def _reset_batch(self) -> None:
        self._running, self._cache, self._mask, self._positions = [], None, None, None
        self._filling = None

    def stats(self) -> dict[str, Any]:
        return {**super().stats(), "prefill_passes": self.prefills}

    def _turn(self) -> None:
        self._admit()
        self._retire()
        if self._running:
            self._decode_step()
            self._retire()

    def _check_cache_layout(self) -> None:
        """Row surgery on the KV cache needs plain full-attention layers; anything else decodes one at a time."""
        from transformers import DynamicCache
        from transformers.cache_utils import DynamicLayer

        probe = DynamicCache(config=self.model.config)
        self._plain_cache = all(type(layer) is DynamicLayer for layer in probe.layers)
        if self.max_num_seqs > 1 and not self._plain_cache:
            logger.warning(
                "%s: this model's cache layers are not plain full attention; decoding one sequence at a time",
                self._name,
            )
            self.max_num_seqs = 1

    def _admit(self) -> None:
        """Go on with the prompts being prefilled, or start on the ones waiting now (see the module docstring)."""
        if self._filling is None:
            group = self._take_group()
            if not group:
                return
            if len(group) == 1 and self._alone(group[0]):
                self._admit_alone(group[0])
                return
            self._start_group(group)
        self._fill_chunk()

    def _alone(self, seq: Sequence) -> bool:
        """Whether ``seq`` is prefilled by itself and whole: it carries images, its model shifts multimodal
        positions per prompt or keeps other than plain full-attention caches (sliding windows: never chunked here),
        or its batched prefill failed."""
        return seq.alone or bool(seq.media) or not self._plain_cache or self._rope_delta_holder() is not None

    def _take_group(self) -> list[Sequence]:
        """The waiting sequences to prefill together: text prompts in their order while there is room in the batch
        and padding does not more than double the work (short prompts always go together), or one sequence that
        goes alone."""
        group: list[Sequence] = []
        tokens = width = 0
        while len(self._running) + len(group) < self.max_num_seqs:
            seq = self._next_waiting()
            if seq is None:
                break
            assert isinstance(seq, Sequence)
            size = len(seq.prompt_ids)
            padded = max(width, size) * (len(group) + 1)
            if group and (self._alone(seq) or padded > max(2 * (tokens + size), self.prefill_tokens)):
                self._put_back([seq])  # its turn comes once this group is in
                break
            if self._alone(seq):
                return [seq]
            group.append(seq)
            tokens, width = tokens + size, max(width, size)
        return group

    def _admit_alone(self, seq: Sequence) -> None:
        try:
            self._prefill(seq)
        except Exception as exc:  # noqa: BLE001 - out of memory on a long prompt, a bad token: its own error
            self._prefill_failed(seq, exc)
            if seq in self._running:
                raise  # it failed while joining the batch: the batch cache may be half changed

    def _prefill_failed(self, seq: Sequence, exc: Exception) -> None:
        error = (
            exc
            if isinstance(exc, XinferenceError)
            else EngineError(f"Transformers failed on this prompt: {type(exc).__name__}: {exc}")
        )
        if not isinstance(exc, XinferenceError):
            logger.warning("prefill of a %d-token prompt failed: %s", len(seq.prompt_ids), error.message)
        seq.finish_reason = "error"
        seq.sink.on_error(seq, error)  # the request hears at once instead of waiting forever

    def _start_group(self, group: list[Sequence]) -> None:
        import torch
        from transformers import DynamicCache

        width = max(len(seq.prompt_ids) for seq in group)
        ids = torch.zeros((len(group), width), dtype=torch.long)
        mask = torch.zeros((len(group), width), dtype=torch.long)
        for row, seq in enumerate(group):
            self._prepare(seq)
            size = len(seq.prompt_ids)
            ids[row, width - size :] = torch.tensor(seq.prompt_ids, dtype=torch.long)
            mask[row, width - size :] = 1
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        self._filling = _Prefill(
            group,
            ids.to(self.device),
            mask.to(self.device),
            positions.to(self.device),
            DynamicCache(config=self.model.config),
        )

    def _fill_chunk(self) -> None:
        """One forward pass over the next columns of the group being prefilled; the last one samples each
        sequence's first token and merges the group into the running batch."""
        filling = self._filling
        assert filling is not None
        rows, width = filling.ids.shape
        end = min(width, filling.done + max(1, self.prefill_tokens // rows))
        try:
            out = self.model(
                input_ids=filling.ids[:, filling.done : end],
                attention_mask=filling.mask[:, :end],
                position_ids=filling.positions[:, filling.done : end],
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_kwarg: filling.cache},
            )
        except Exception as exc:  # noqa: BLE001 - which prompt is at fault is found by prefilling each alone
            self._filling = None
            if rows == 1:
                self._prefill_failed(filling.seqs[0], exc)
                return
            logger.warning("a batched prefill of %d prompts failed (%s); prefilling them one at a time", rows, exc)
            for seq in filling.seqs:
                seq.alone = True
            self._put_back(list(filling.seqs))
            return
        self.prefills += 1
        filling.done = end
        if end < width:
            return
        self._filling = None
        logits = out.logits[:, -1]
        for row, seq in enumerate(filling.seqs):
            if not seq.sink.cancelled:
                self._accept(seq, self._sample(seq, logits[row]))
        positions = filling.mask.sum(dim=1)
        self._merge(filling.seqs, filling.cache, filling.mask, positions)

    def _prefill(self, seq: Sequence) -> None:
        import torch
        from transformers import DynamicCache

        self._prepare(seq)
        ids = torch.tensor([seq.prompt_ids], dtype=torch.long, device=self.device)
        cache = DynamicCache(config=self.model.config)
        media = self._media_inputs(seq)
        holder = self._rope_delta_holder()
        if holder is not None:
            holder.rope_deltas = None  # computed afresh from this prompt's images (or none)
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **media, **{self._cache_kwarg: cache})
        delta = _rope_delta(holder)
        token = self._sample(seq, out.logits[0, -1])
        self._accept(seq, token)
        if seq.done:
            return
        mask = torch.ones((1, len(seq.prompt_ids)), dtype=torch.long, device=self.device)
        position = torch.tensor([len(seq.prompt_ids) + delta], dtype=torch.long, device=self.device)
        self._merge([seq], cache, mask, position)  # the forward pass filled ``cache`` in place

    def _media_inputs(self, seq: Sequence) -> dict[str, Any]:
        """The prompt's image inputs (a processor's ``pixel_values``, ``image_grid_thw``, ...) on the model's
        device, floating ones in the model's dtype; taken off the sequence, which no longer needs them."""
        import torch

        media, seq.media = seq.media, None
        if not media:
            return {}
        dtype = self.model.dtype
        moved: dict[str, Any] = {}
        for key, value in media.items():
            if isinstance(value, torch.Tensor):
                value = value.to(self.device, dtype=dtype) if value.is_floating_point() else value.to(self.device)
            moved[key] = value
        return moved

    def _rope_delta_holder(self) -> Any:
        """The module that keeps multimodal rotary positions' offset (``rope_deltas``: Qwen2-VL and its kin),
        or None. Such a model places a prompt's text after an image at positions shifted from the token count;
        the decode step passes every row's position itself, so each row carries its own shift."""
        for module in (self.model, getattr(self.model, "model", None)):
            if module is not None and hasattr(module, "rope_deltas"):
                return module
        return None

    def _prepare(self, seq: Sequence) -> None:
        import torch

        params = seq.params
        if params.temperature > 0:
            seq.generator = torch.Generator(device=self.device)
            if params.seed is not None:
                seq.generator.manual_seed(params.seed)
            else:
                seq.generator.seed()
        vocab = self.model.config.get_text_config().vocab_size
        if params.presence_penalty or params.frequency_penalty:
            seq.counts = torch.zeros(vocab, dtype=torch.float32, device=self.device)
        if params.repetition_penalty != 1.0:
            seq.seen = torch.zeros(vocab, dtype=torch.bool, device=self.device)
            seq.seen[torch.tensor([t for t in seq.prompt_ids if t < vocab], dtype=torch.long, device=self.device)] = (
                True
            )

    def _merge(self, seqs: list[Sequence], cache: Any, mask: Any, position: Any) -> None:
        """Add prefilled sequences' cache (one row each, left-padded) as new rows of the batch cache."""
        import torch

        self._running.extend(seqs)
        self.max_batch_seen = max(self.max_batch_seen, len(self._running))
        if self._cache is None:
            self._cache, self._mask, self._positions = cache, mask, position
            return
        width, new_width = self._mask.shape[1], mask.shape[1]
        target = max(width, new_width)
        for old_layer, new_layer in zip(self._cache.layers, cache.layers, strict=True):
            old_layer.keys = torch.cat([_left_pad(old_layer.keys, target), _left_pad(new_layer.keys, target)])
            old_layer.values = torch.cat([_left_pad(old_layer.values, target), _left_pad(new_layer.values, target)])
        self._mask = torch.cat([_left_pad(self._mask, target, dim=1), _left_pad(mask, target, dim=1)])
        self._positions = torch.cat([self._positions, position])

    def _retire(self) -> None:
        """Remove finished and abandoned sequences from the batch (and columns nobody needs any more)."""
        import torch

        keep = [i for i, seq in enumerate(self._running) if not seq.done]
        if len(keep) == len(self._running):
            return
        for seq in self._running:
            if seq.done:
                self._left_batch(seq)
        self._running = [self._running[i] for i in keep]
        if not keep:
            self._cache, self._mask, self._positions = None, None, None
            return
        rows = torch.tensor(keep, dtype=torch.long, device=self.device)
        self._mask = self._mask.index_select(0, rows)
        used = torch.nonzero(self._mask.any(dim=0)).flatten()
        start = int(used[0]) if used.numel() else 0
        self._mask = self._mask[:, start:]
        self._positions = self._positions.index_select(0, rows)
        for layer in self._cache.layers:
            layer.keys = layer.keys.index_select(0, rows)[:, :, start:]
            layer.values = layer.values.index_select(0, rows)[:, :, start:]

    def _decode_step(self) -> None:
        import torch

        last = torch.tensor([[seq.generated[-1]] for seq in self._running], dtype=torch.long, device=self.device)
        ones = torch.ones((len(self._running), 1), dtype=self._mask.dtype, device=self.device)
        self._mask = torch.cat([self._mask, ones], dim=1)
        out = self.model(
            input_ids=last,
            attention_mask=self._mask,
            position_ids=self._positions.unsqueeze(1),
            use_cache=True,
            **{self._cache_kwarg: self._cache},
        )
        self._positions = self._positions + 1
        self.steps += 1
        logits = out.logits[:, -1, :]
        for row, seq in enumerate(self._running):
            if not seq.sink.cancelled:
                self._accept(seq, self._sample(seq, logits[row]))

    # -- sampling and output ---------------------------------------------------------------------------------
    def _sample(self, seq: Sequence, logits: Any) -> int:
        return self._pick(seq, self._processed(seq, logits))

    def _processed(self, seq: Sequence, logits: Any) -> Any:
        """The logits after logit_bias, penalties and the grammar's mask (what greedy decoding takes the max of)."""
        import torch

        params = seq.params
        logits = logits.float()
        if params.logit_bias:
            ids = torch.tensor([t for t, _ in params.logit_bias], dtype=torch.long, device=logits.device)
            bias = torch.tensor([b for _, b in params.logit_bias], dtype=logits.dtype, device=logits.device)
            logits = logits.index_add(0, ids, bias)
        if seq.seen is not None:
            picked = logits[seq.seen]
            logits[seq.seen] = torch.where(
                picked > 0, picked / params.repetition_penalty, picked * params.repetition_penalty
            )
        if seq.counts is not None:
            logits = logits - params.frequency_penalty * seq.counts - params.presence_penalty * (seq.counts > 0)
        if seq.grammar is not None:
            from xinference.engines.grammar import allocate_bitmask, apply_bitmask_torch

            row = allocate_bitmask(1, logits.shape[-1])[0]
            seq.grammar.fill_bitmask(row)
            logits = apply_bitmask_torch(logits, row)
        return logits

    def _pick(self, seq: Sequence, logits: Any) -> int:
        import torch

        params = seq.params
        if params.temperature <= 0:
            token = int(torch.argmax(logits))
            self._record_logprobs(seq, logits, token)
            return token
        if params.logprobs:
            original = logits
        logits = logits / params.temperature
        if 0 < params.top_k < logits.shape[-1]:
            threshold = torch.topk(logits, params.top_k).values[-1]
            logits = logits.masked_fill(logits < threshold, float("-inf"))
        if params.top_p < 1.0:
            ordered, order = torch.sort(logits, descending=True)
            cumulative = torch.softmax(ordered, dim=-1).cumsum(dim=-1)
            drop = cumulative - torch.softmax(ordered, dim=-1) > params.top_p  # keep the token that crosses top_p
            logits = logits.masked_fill(torch.zeros_like(drop).scatter(0, order, drop), float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if params.min_p > 0:
            probs = probs.masked_fill(probs < params.min_p * probs.max(), 0.0)
        token = int(torch.multinomial(probs, 1, generator=seq.generator))
        if params.logprobs:
            self._record_logprobs(seq, original, token)
        return token

    @staticmethod
    def _record_logprobs(seq: Sequence, logits: Any, token: int) -> None:
        """Log-probabilities of the processed distribution (before temperature): greedy picks its top entry."""
        import torch

        params = seq.params
        if not params.logprobs:
            return
        logprobs = torch.log_softmax(logits, dim=-1)
        top: list[tuple[int, float]] = []
        if params.top_logprobs > 0:
            values, ids = torch.topk(logprobs, params.top_logprobs)
            top = [(int(i), float(v)) for i, v in zip(ids, values, strict=True)]
        seq.token_logprobs.append((token, float(logprobs[token]), top))

    def _accept(self, seq: Sequence, token: int) -> None:
        """Record a sampled token, emit the text that is now safe to send, and decide whether the sequence ends."""
        params = seq.params
        if token in params.stop_token_ids:
            if params.logprobs and seq.token_logprobs:
                seq.token_logprobs.pop()  # the end of the sequence is not part of the output
            self._stop_token(seq)
            return
        self._append(seq, token)
        grammar_done = False
        if seq.grammar is not None:
            if not seq.grammar.accept(token):
                self._fail(seq, EngineError(f"the grammar refused a token it allowed: {seq.grammar.error}"))
                return
            grammar_done = seq.grammar.done
        if seq.counts is not None:
            seq.counts[token] += 1
        if seq.seen is not None:
            seq.seen[token] = True
        self._after_token(seq, grammar_done=grammar_done)


def _rope_delta(holder: Any) -> int:
    """The shift a prefill left in ``holder.rope_deltas`` (one row), 0 when there is none."""
    deltas = getattr(holder, "rope_deltas", None) if holder is not None else None
    if deltas is None:
        return 0
    return int(deltas.reshape(-1)[0])


def _left_pad(tensor: Any, width: int, dim: int = 2) -> Any:
    """Zero-pad ``tensor`` on the left of ``dim`` up to ``width``."""
    import torch

    missing = width - tensor.shape[dim]
    if missing <= 0:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=tensor.dtype, device=tensor.device), tensor], dim=dim)
