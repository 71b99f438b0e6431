"""Reference optimizers for the oracle, written from the published formulas (not the engine).

LAMB as apex FusedLAMB (csrc/multi_tensor_lamb.cu, decoupled-decay mode) is used by NVIDIA
DeepLearningExamples BERT; AdamW with torch.optim.AdamW semantics; the learning rate of DLE's
PolyWarmUpScheduler; and the gradient averaging the engine applies before clipping. Tensors
are updated in place under torch.no_grad(), in whatever dtype they are (the tests use float64).
"""
import math

import torch


def no_decay(name):
    """DLE's exclusion: biases and LayerNorm parameters get no weight decay."""
    return name.endswith("bias") or "LayerNorm" in name


def poly_warmup_lr(base_lr, step, total_steps, warmup_proportion, degree=0.5):
    """Learning rate of optimizer step `step` (1, 2, ...) under PolyWarmUpScheduler."""
    progress = step / total_steps
    if progress < warmup_proportion:
        return base_lr * progress / warmup_proportion
    return base_lr * max(0.0, 1.0 - progress) ** degree


def average_grads(grad_sums, accumulation_steps, world_size=1):
    """The engine's averaging: sum of micro-batch mean-loss gradients / (accumulation * world)."""
    scale = 1.0 / (accumulation_steps * world_size)
    return {name: g * scale for name, g in grad_sums.items()}


def global_norm(grads):
    return math.sqrt(sum(float(torch.sum(g.double() * g.double())) for g in grads.values()))


def clip_factor(grad_norm, max_grad_norm):
    """apex's divisor: norm / max_grad_norm when the norm exceeds it, else 1 (0 disables)."""
    if max_grad_norm > 0 and grad_norm > max_grad_norm:
        return grad_norm / max_grad_norm
    return 1.0


class _AdamMoments:
    """Per-parameter first/second moments and the shared step counter."""

    def __init__(self, named_params, betas, eps, weight_decay, max_grad_norm):
        self.params = dict(named_params)
        self.beta1, self.beta2 = betas
        self.eps = eps
        self.weight_decay = weight_decay
        self.max_grad_norm = max_grad_norm
        self.step_count = 0
        self.exp_avg = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.exp_avg_sq = {n: torch.zeros_like(p) for n, p in self.params.items()}

    def decay_of(self, name):
        return 0.0 if no_decay(name) else self.weight_decay

    def _moments(self, name, grad):
        """Updates the moments with `grad`; returns (m_hat, v_hat) with bias correction."""
        m, v = self.exp_avg[name], self.exp_avg_sq[name]
        m.mul_(self.beta1).add_(grad, alpha=1.0 - self.beta1)
        v.mul_(self.beta2).addcmul_(grad, grad, value=1.0 - self.beta2)
        bc1 = 1.0 - self.beta1 ** self.step_count
        bc2 = 1.0 - self.beta2 ** self.step_count
        return m / bc1, v / bc2


class Lamb(_AdamMoments):
    """apex FusedLAMB (adam_w_mode, grad_averaging, bias_correction) with global-norm clipping.

    update = m_hat / (sqrt(v_hat) + eps) + wd * p; ratio = ||p|| / ||update|| (1 if either is 0)
    where wd != 0 (every tensor with nvlamb); p -= lr * ratio * update."""

    def __init__(self, named_params, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 max_grad_norm=1.0, nvlamb=False):
        super().__init__(named_params, betas, eps, weight_decay, max_grad_norm)
        self.nvlamb = nvlamb

    @torch.no_grad()
    def step(self, grads, lr):
        """grads: name -> averaged gradient. Returns the global grad norm before clipping."""
        grad_norm = global_norm(grads)
        clip = clip_factor(grad_norm, self.max_grad_norm)
        self.step_count += 1
        for name, p in self.params.items():
            wd = self.decay_of(name)
            m_hat, v_hat = self._moments(name, grads[name] / clip)
            update = m_hat / (torch.sqrt(v_hat) + self.eps) + wd * p
            ratio = 1.0
            if wd != 0.0 or self.nvlamb:
                p_norm, u_norm = float(torch.linalg.norm(p)), float(torch.linalg.norm(update))
                if p_norm != 0.0 and u_norm != 0.0:
                    ratio = p_norm / u_norm
            p.sub_(update, alpha=lr * ratio)
        return grad_norm


class AdamW(_AdamMoments):
    """torch.optim.AdamW semantics (p *= 1 - lr*wd, then the Adam step), the same decay groups
    as LAMB, and optional global-norm clipping first (max_grad_norm 0 disables it)."""

    def __init__(self, named_params, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 max_grad_norm=1.0):
        super().__init__(named_params, betas, eps, weight_decay, max_grad_norm)

    @torch.no_grad()
    def step(self, grads, lr):
        grad_norm = global_norm(grads)
        clip = clip_factor(grad_norm, self.max_grad_norm)
        self.step_count += 1
        for name, p in self.params.items():
            p.mul_(1.0 - lr * self.decay_of(name))
            m_hat, v_hat = self._moments(name, grads[name] / clip)
            p.sub_(m_hat / (torch.sqrt(v_hat) + self.eps), alpha=lr)
        return grad_norm


class Sgd:
    """torch.optim.SGD itself (momentum, L2 weight decay added to the gradient, no dampening or
    Nesterov) with the same decay groups as LAMB, after the same global-norm clipping."""

    def __init__(self, named_params, momentum=0.9, weight_decay=0.01, max_grad_norm=1.0):
        self.params = dict(named_params)
        self.max_grad_norm = max_grad_norm
        groups = [{"params": [p for n, p in self.params.items() if not no_decay(n)], "weight_decay": weight_decay},
                  {"params": [p for n, p in self.params.items() if no_decay(n)], "weight_decay": 0.0}]
        self.torch_sgd = torch.optim.SGD(groups, lr=0.0, momentum=momentum)

    def momentum_buffer(self, name):
        return self.torch_sgd.state[self.params[name]]["momentum_buffer"]

    @torch.no_grad()
    def step(self, grads, lr):
        grad_norm = global_norm(grads)
        clip = clip_factor(grad_norm, self.max_grad_norm)
        for name, p in self.params.items():
            p.grad = (grads[name] / clip).to(p.dtype)
        for group in self.torch_sgd.param_groups:
            group["lr"] = lr
        self.torch_sgd.step()
        return grad_norm
