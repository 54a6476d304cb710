"""Public model configs (shipped as JSON beside this file) and the linear layers they imply."""

from __future__ import annotations

import dataclasses
import json
from importlib import resources

from profkit.errors import ProfkitError


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """The fields of a Hugging Face config that fix a decoder's GEMM shapes."""

    name: str
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    num_hidden_layers: int
    vocab_size: int
    dense_mlp: bool = True  # False for MoE models: their experts are not dense GEMMs
    tie_word_embeddings: bool = False
    source: str = ""
    num_local_experts: int = 0  # MoE: routed experts per layer
    num_experts_per_tok: int = 0  # MoE: top-k experts per token
    moe_intermediate_size: int = 0  # MoE: an expert's intermediate size where it differs from intermediate_size

    @property
    def expert_intermediate_size(self) -> int:
        """An expert's intermediate size (its gate and up projections are each this wide)."""
        return self.moe_intermediate_size or self.intermediate_size


@dataclasses.dataclass(frozen=True)
class Linear:
    """One linear layer as a GEMM: out[M, n] = x[M, k] @ W.T, with W of shape (n, k)."""

    model: str
    name: str
    n: int
    k: int

    @property
    def label(self) -> str:
        return f"{self.model}.{self.name}"


def available() -> list[str]:
    """Names of the shipped model configs."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir() if p.name.endswith(".json"))


def load_model(name: str) -> ModelConfig:
    """The shipped config ``name`` (see :func:`available`).

    Only the shipped names are read: a name from a data file (``/abs/x``, ``../x``) never makes
    this read a file outside the package.

    Raises:
        ProfkitError: for a name that is not a shipped config.
    """
    if not isinstance(name, str) or name not in available():
        raise ProfkitError(f"no model config {str(name)[:200]!r}; shipped configs: {', '.join(available())}")
    path = resources.files(__name__) / f"{name}.json"
    raw = json.loads(path.read_text())
    fields = {f.name for f in dataclasses.fields(ModelConfig)}
    return ModelConfig(**{k: v for k, v in raw.items() if k in fields})


def linear_layers(model: ModelConfig) -> list[Linear]:
    """The per-layer linear GEMMs: fused qkv, o, and for dense MLPs fused gate_up and down."""
    q = model.num_attention_heads * model.head_dim
    kv = model.num_key_value_heads * model.head_dim
    layers = [Linear(model.name, "qkv", q + 2 * kv, model.hidden_size), Linear(model.name, "o", model.hidden_size, q)]
    if model.dense_mlp:
        layers += [Linear(model.name, "gate_up", 2 * model.intermediate_size, model.hidden_size),
                   Linear(model.name, "down", model.hidden_size, model.intermediate_size)]
    return layers


def parameter_count(model: ModelConfig) -> int:
    """Parameters of a dense decoder: embeddings, per-layer linears and RMSNorms, final norm, head."""
    if not model.dense_mlp:
        raise ProfkitError(f"{model.name} is a mixture of experts; only dense decoders are counted")
    per_layer = sum(layer.n * layer.k for layer in linear_layers(model)) + 2 * model.hidden_size
    embeddings = model.vocab_size * model.hidden_size * (1 if model.tie_word_embeddings else 2)
    return embeddings + model.num_hidden_layers * per_layer + model.hidden_size
