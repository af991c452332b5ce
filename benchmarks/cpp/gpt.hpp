// The small GPT of volt's benchmarks: 6 pre-norm transformer blocks, d_model 384, 6 heads, context 256,
// vocabulary 8192, causal scaled_dot_product_attention, GELU MLP of width 4 * d_model, learned position
// embeddings, an untied output layer without bias; no dropout. benchmarks/python/four_way.py defines the same
// model (same modules, same order, same shapes) for the Python rows. With `fused` ("gpt-fused"), every LayerNorm is
// volt::nn::LayerNorm with autocast_output (each one feeds only a matmul), every residual add done inside the layer
// norm that reads its sum (LayerNorm::forward_add; the first block's ln1 reads the embeddings' sum), every Linear
// volt::nn::Linear (ATen's linear, as PyTorch's nn.Linear: the bias in the matmul's epilogue) and q, k, v from
// volt::nn::functional::split_qkv: the same parameters, initialised alike,
// and the same arithmetic.
#pragma once

#include <volt/core/compat.hpp>  // VOLT_TORCH_VERSION
#include <volt/nn/attention.hpp>
#include <volt/nn/layer_norm.hpp>
#include <volt/nn/linear.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace volt_bench {

struct GptConfig {
  std::int64_t vocabulary = 8192, context = 256, d_model = 384, heads = 6, layers = 6;
  bool fused = false;  // volt::nn::LayerNorm for every layer norm
};

/// A layer norm over d values: LibTorch's, or volt::nn's (with autocast_output) when `fused`; registered as `name`.
inline torch::nn::AnyModule layer_norm(torch::nn::Module& owner, const char* name, std::int64_t d, bool fused) {
  if (fused) {
    return torch::nn::AnyModule(
        owner.register_module(name, volt::nn::LayerNorm(torch::nn::LayerNormOptions({d}), /*autocast_output=*/true)));
  }
  return torch::nn::AnyModule(owner.register_module(name, torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}))));
}

/// A linear layer: LibTorch's, or volt::nn's when `fused`; registered as `name`.
inline torch::nn::AnyModule linear(torch::nn::Module& owner, const char* name, const torch::nn::LinearOptions& options,
                                   bool fused) {
  if (fused) return torch::nn::AnyModule(owner.register_module(name, volt::nn::Linear(options)));
  return torch::nn::AnyModule(owner.register_module(name, torch::nn::Linear(options)));
}

/// Causal attention of q, k, v shaped (batch, heads, sequence, head size).
inline torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v) {
#if VOLT_TORCH_VERSION >= 20000
  return torch::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, /*dropout_p=*/0.0, /*is_causal=*/true);
#else
  // LibTorch 1.13 has no scaled_dot_product_attention: its math, written out.
  const auto length = q.size(-2);
  auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  const auto future = torch::ones({length, length}, q.options().dtype(torch::kBool)).triu(1);
  scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  return torch::matmul(torch::softmax(scores, -1), v);
#endif
}

struct GptBlockImpl : torch::nn::Module {
  torch::nn::AnyModule ln1, qkv, proj, ln2, fc1, fc2;
  std::int64_t heads;
  bool fused;

  GptBlockImpl(std::int64_t d, std::int64_t heads_, bool fused_ = false) : heads(heads_), fused(fused_) {
    namespace nn = torch::nn;
    ln1 = layer_norm(*this, "ln1", d, fused);
    qkv = linear(*this, "qkv", nn::LinearOptions(d, 3 * d), fused);
    proj = linear(*this, "proj", nn::LinearOptions(d, d), fused);
    ln2 = layer_norm(*this, "ln2", d, fused);
    fc1 = linear(*this, "fc1", nn::LinearOptions(d, 4 * d), fused);
    fc2 = linear(*this, "fc2", nn::LinearOptions(4 * d, d), fused);
  }
  /// Attention's output projection for the normalized input `n`.
  torch::Tensor attention(const torch::Tensor& n) {
    const auto batch = n.size(0), length = n.size(1), d = n.size(2);
    // (batch, length, 3 d) -> (3, batch, heads, length, head size) -> q, k, v. unbind, as Python's
    // `q, k, v = tensor` does: its backward stacks the three gradients in one kernel, where three selects would
    // each fill a zero tensor of the full size, copy into it and add the three up. The fused model takes the same
    // views from volt::nn::functional::split_qkv, whose backward copies each part's gradient straight into qkv's.
    std::vector<torch::Tensor> parts;
    if (fused) {
      const auto split = volt::nn::functional::split_qkv(qkv.forward(n), heads);
      parts.assign(split.begin(), split.end());
    } else {
      parts = qkv.forward(n).view({batch, length, 3, heads, d / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
    }
    auto y = causal_attention(parts[0], parts[1], parts[2]).transpose(1, 2).reshape({batch, length, d});
    return proj.forward(y);
  }
  /// fc2(gelu(fc1(n))); the fused model takes fc1's GELU and bias gradients from one kernel (Linear::forward_gelu).
  torch::Tensor mlp(const torch::Tensor& n) {
    if (fused) return fc2.forward(fc1.get<volt::nn::Linear>()->forward_gelu(n));
    return fc2.forward(torch::gelu(fc1.forward(n)));
  }

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = x + attention(ln1.forward(x));
    return h + mlp(ln2.forward(h));
  }

  /// The fused model's block: the residual stream arrives as `stream` + `delta` (the previous block's MLP output;
  /// undefined for the first block) and leaves as the returned pair, whose sum is forward()'s output. Each add
  /// happens inside the layer norm that reads its sum (volt::nn::LayerNorm::forward_add): the same arithmetic.
  std::pair<torch::Tensor, torch::Tensor> forward_fused(const torch::Tensor& stream, const torch::Tensor& delta) {
    auto norm1 = ln1.get<volt::nn::LayerNorm>();
    auto norm2 = ln2.get<volt::nn::LayerNorm>();
    torch::Tensor x = stream, n1;
    if (delta.defined()) {
      std::tie(x, n1) = norm1->forward_add(stream, delta);
    } else {
      n1 = norm1->forward(stream);
    }
    auto [h, n2] = norm2->forward_add(x, attention(n1));
    return {h, mlp(n2)};
  }
};
TORCH_MODULE(GptBlock);

/// Token ids (batch, sequence) -> logits (batch, sequence, vocabulary).
struct GptImpl : torch::nn::Module {
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::Sequential blocks{nullptr};
  torch::nn::AnyModule ln_f, head;
  bool fused = false;

  explicit GptImpl(const GptConfig& config = {}) : fused(config.fused) {
    namespace nn = torch::nn;
    tokens = register_module("tokens", nn::Embedding(config.vocabulary, config.d_model));
    positions = register_module("positions", nn::Embedding(config.context, config.d_model));
    nn::Sequential body;
    for (std::int64_t i = 0; i < config.layers; ++i) {
      body->push_back(GptBlock(config.d_model, config.heads, config.fused));
    }
    blocks = register_module("blocks", body);
    ln_f = layer_norm(*this, "ln_f", config.d_model, config.fused);
    head = linear(*this, "head", nn::LinearOptions(config.d_model, config.vocabulary).bias(false), config.fused);
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    const auto where = torch::arange(ids.size(1), ids.options());
    auto x = tokens->forward(ids) + positions->forward(where);
    if (!fused) return head.forward(ln_f.forward(blocks->forward(x)));
    torch::Tensor delta;
    for (auto& block : *blocks) std::tie(x, delta) = block.get<GptBlock>()->forward_fused(x, delta);
    return head.forward(ln_f.get<volt::nn::LayerNorm>()->forward_add(x, delta).second);
  }
};
TORCH_MODULE(Gpt);

}  // namespace volt_bench
