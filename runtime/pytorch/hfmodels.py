"""hfmodels — the Hugging Face model of a shardcast scenario.

The model's fields come from the simulator (validate passes the resolved
`struct model` as JSON), so a catalog entry (models/nn/*.ini) and an imported
config.json give the same transformers configuration: GPT-2 (learned
positions, LayerNorm, GELU), BERT (encoder, BertForPreTraining: MLM + NSP
heads), T5 (encoder-decoder, relative positions) and Llama (rotary, RMSNorm,
SwiGLU). Any other combination is an error the caller reports (exit 2).
"""
from __future__ import annotations

from typing import Any, Dict, Tuple

import torch


class Unsupported(Exception):
    """The scenario's model has no Hugging Face equivalent here."""


def kind(m: Dict[str, Any]) -> str:
    """gpt2 | bert | t5 | llama, from the architecture's fields."""
    fam, pos, norm, act = m["family"], m["positions"], m["norm"], m["activation"]
    if fam == "decoder" and pos == "learned" and norm == "layernorm" and act in ("gelu", "gelu_new"):
        return "gpt2"
    if fam == "encoder" and pos == "learned" and norm == "layernorm" and act in ("gelu", "gelu_new"):
        return "bert"
    if fam == "encoder_decoder" and pos == "relative" and norm == "rmsnorm":
        return "t5"
    if fam == "decoder" and pos == "rotary" and norm == "rmsnorm" and act == "swiglu":
        return "llama"
    raise Unsupported(f"no Hugging Face model for family {fam}, positions {pos}, norm {norm}, "
                      f"activation {act} (the reference runs GPT-2, BERT, T5 and Llama)")


def config(m: Dict[str, Any], dropout: float, attention: str) -> Any:
    """The transformers config of model fields m."""
    import transformers as tf

    k = kind(m)
    if k == "gpt2":
        c = tf.GPT2Config(vocab_size=m["vocab"], n_positions=m["max_positions"], n_embd=m["hidden"],
                          n_layer=m["layers"], n_head=m["heads"], n_inner=m["ffn"],
                          activation_function=m["activation"], resid_pdrop=dropout, embd_pdrop=dropout,
                          attn_pdrop=dropout, tie_word_embeddings=bool(m["tied_embeddings"]))
    elif k == "bert":
        c = tf.BertConfig(vocab_size=m["vocab"], hidden_size=m["hidden"], num_hidden_layers=m["layers"],
                          num_attention_heads=m["heads"], intermediate_size=m["ffn"],
                          max_position_embeddings=m["max_positions"], type_vocab_size=m["type_vocab"],
                          hidden_act=m["activation"],
                          hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    elif k == "t5":
        proj = {"relu": "relu", "gelu": "gelu", "gated_gelu": "gated-gelu", "swiglu": "gated-silu"}
        c = tf.T5Config(vocab_size=m["vocab"], d_model=m["hidden"], d_kv=m["head_dim"], d_ff=m["ffn"],
                        num_layers=m["encoder_layers"], num_decoder_layers=m["layers"],
                        num_heads=m["heads"], relative_attention_num_buckets=m["relative_buckets"],
                        dropout_rate=dropout, feed_forward_proj=proj[m["activation"]],
                        tie_word_embeddings=bool(m["tied_embeddings"]),
                        # the published T5 configs: pad 0 starts the decoder, eos 1
                        pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    else:
        c = tf.LlamaConfig(vocab_size=m["vocab"], hidden_size=m["hidden"], intermediate_size=m["ffn"],
                           num_hidden_layers=m["layers"], num_attention_heads=m["heads"],
                           num_key_value_heads=m["kv_heads"], max_position_embeddings=m["max_positions"],
                           attention_dropout=dropout, tie_word_embeddings=bool(m["tied_embeddings"]),
                           attention_bias=bool(m["qkv_bias"]))
        if hasattr(c, "head_dim"):
            c.head_dim = m["head_dim"]
    c._attn_implementation = attention  # eager | sdpa, as attn_implementation= does
    return c


def build(m: Dict[str, Any], dropout: float, attention: str, device: str) -> Tuple[torch.nn.Module, str]:
    """The model (training mode, fp32 parameters on device) and its kind."""
    import transformers as tf

    k = kind(m)
    name = {"gpt2": "GPT2LMHeadModel", "bert": "BertForPreTraining",
            "t5": "T5ForConditionalGeneration", "llama": "LlamaForCausalLM"}[k]
    cls = getattr(tf, name, None)
    if cls is None or (k == "llama" and not hasattr(tf, "LlamaConfig")):
        raise Unsupported(f"transformers {tf.__version__} has no {name} (Llama arrived in 4.28)")
    c = config(m, dropout, attention)
    if device == "cpu":
        model = cls(c)
    elif hasattr(torch.device, "__enter__"):  # torch >= 2.0: factories default to device
        with torch.device(device):
            model = cls(c)
    else:  # torch 1.13: parameters and buffers moved as they are registered
        model = _on_device(cls, c, device)
    model.train()
    return model, k


def _on_device(cls: Any, c: Any, device: str) -> torch.nn.Module:
    reg_p, reg_b = torch.nn.Module.register_parameter, torch.nn.Module.register_buffer

    def param(self: torch.nn.Module, name: str, p: Any) -> None:
        if p is not None and p.device.type != device:  # a tied weight is registered as is
            p = torch.nn.Parameter(p.to(device), requires_grad=p.requires_grad)
        reg_p(self, name, p)

    def buf(self: torch.nn.Module, name: str, t: Any, persistent: bool = True) -> None:
        reg_b(self, name, t.to(device) if t is not None else t, persistent=persistent)

    torch.nn.Module.register_parameter, torch.nn.Module.register_buffer = param, buf  # type: ignore
    try:
        return cls(c)
    finally:
        torch.nn.Module.register_parameter, torch.nn.Module.register_buffer = reg_p, reg_b  # type: ignore


def batch(k: str, m: Dict[str, Any], b: int, seq: int, target: int, device: str) -> Dict[str, torch.Tensor]:
    """One micro-batch of token ids and labels (int64, as a data loader gives)."""
    v = m["vocab"]

    def ids(n: int) -> torch.Tensor:
        if device == "meta":
            return torch.empty(b, n, dtype=torch.long, device=device)
        return torch.randint(0, v, (b, n), dtype=torch.long, device=device)

    if k == "t5":
        return {"input_ids": ids(seq), "labels": ids(target)}
    if k == "bert":
        nsp = torch.zeros(b, dtype=torch.long, device=device)
        return {"input_ids": ids(seq), "labels": ids(seq), "next_sentence_label": nsp}
    x = ids(seq)
    return {"input_ids": x, "labels": x}


def check_selective(m: Dict[str, Any]) -> None:
    """Raises Unsupported when selective checkpointing cannot wrap the
    attention core of this model on this stack."""
    import transformers as tf

    k = kind(m)
    if _eager_module(k) is None and not (k == "gpt2" and hasattr(tf.models.gpt2.modeling_gpt2.GPT2Attention, "_attn")):
        raise Unsupported(f"activation_checkpointing = selective: transformers {tf.__version__}'s {k} computes "
                          "attention inline (no attention function to checkpoint); the stack's GPT-2 can")


def _eager_module(k: str) -> Any:
    """The transformers module whose eager_attention_forward the model calls
    (transformers >= 4.48), or None."""
    import importlib

    name = {"gpt2": "gpt2", "bert": "bert", "t5": "t5", "llama": "llama"}[k]
    try:
        mod = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    except ImportError:
        return None
    return mod if hasattr(mod, "eager_attention_forward") else None


class selective:
    """activation_checkpointing = selective (Korthikanti et al. 2022, §5):
    the attention core — scores, softmax, dropout, the product with v — runs
    under torch.utils.checkpoint, so only its inputs are kept and it is
    recomputed in backward. transformers has no switch for it; this wraps the
    model's attention function (eager_attention_forward, or GPT-2's
    GPT2Attention._attn on transformers 4.x) with the checkpoint flavour the
    stack's gradient_checkpointing_enable uses (non-reentrant on transformers
    5, reentrant on 4.26)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.k = type(model).__name__
        self.model = model
        self.undo: Any = None

    def __enter__(self) -> "selective":
        import torch.utils.checkpoint as C
        import transformers as tf

        k = {"GPT2LMHeadModel": "gpt2", "BertForPreTraining": "bert", "T5ForConditionalGeneration": "t5",
             "LlamaForCausalLM": "llama"}[self.k]
        mod = _eager_module(k)
        reentrant = int(tf.__version__.split(".")[0]) < 5
        if mod is not None:
            core = mod.eager_attention_forward

            def ckpt(module: Any, *args: Any, **kw: Any) -> Any:
                return C.checkpoint(lambda *a: core(module, *a, **kw), *args, use_reentrant=reentrant)

            mod.eager_attention_forward = ckpt
            self.undo = lambda: setattr(mod, "eager_attention_forward", core)
            return self
        cls = tf.models.gpt2.modeling_gpt2.GPT2Attention
        attn = cls._attn

        def ckpt_attn(self_: Any, *args: Any) -> Any:
            return C.checkpoint(lambda *a: attn(self_, *a), *args, use_reentrant=reentrant)

        cls._attn = ckpt_attn
        self.undo = lambda: setattr(cls, "_attn", attn)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.undo is not None:
            self.undo()
