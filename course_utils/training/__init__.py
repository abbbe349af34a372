"""The training loop and what makes it fast, one concept per module.

- :mod:`.loop`: :func:`train` (AdamW, warm-up + cosine learning rate, periodic evaluation,
  checkpoints with exact resume, PyTorch DDP under ``torchrun``) and :func:`training_step`.
- :mod:`.schedule`: the optimizer and the learning-rate schedule.
- :mod:`.batches`: :class:`DeviceBatches`, windows sampled where the token stream lives.
- :mod:`.evaluation`: :func:`estimate_loss`.
- :mod:`.checkpoint`: atomic :func:`save_checkpoint`, safe :func:`load_checkpoint`.
- :mod:`.precision`: autocast and TF32; :mod:`.distributed`: process groups and DDP;
  :mod:`.progress`: the progress bar; :mod:`.history`: :class:`History`.

The fast path: the token stream lives on the device and batches are sampled there; the loop
never waits for the device except at evaluation (per-step losses stay on the device until
then); fused AdamW; TF32, bf16 autocast and optional ``torch.compile`` on CUDA. Measuring its
speed is :mod:`course_utils.measure.benchmark`'s job.
"""

from course_utils.training.batches import DeviceBatches
from course_utils.training.checkpoint import load_checkpoint, model_from_checkpoint, save_checkpoint
from course_utils.training.distributed import (
    close_distributed,
    distributed_rank_and_size,
    init_distributed,
    unwrap_model,
    wrap_for_ddp,
)
from course_utils.training.evaluation import estimate_loss
from course_utils.training.history import History
from course_utils.training.loop import set_explicit_layer_norm, train, training_step
from course_utils.training.precision import autocast_context, enable_tf32
from course_utils.training.schedule import learning_rate_at, make_optimizer

__all__ = [
    "DeviceBatches",
    "History",
    "autocast_context",
    "close_distributed",
    "distributed_rank_and_size",
    "enable_tf32",
    "estimate_loss",
    "init_distributed",
    "learning_rate_at",
    "load_checkpoint",
    "make_optimizer",
    "model_from_checkpoint",
    "save_checkpoint",
    "set_explicit_layer_norm",
    "train",
    "training_step",
    "unwrap_model",
    "wrap_for_ddp",
]
