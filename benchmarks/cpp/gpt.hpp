// The small GPT of volt's benchmarks: 6 pre-norm transformer blocks, d_model 384, 6 heads, context 256,
// vocabulary 8192, causal scaled_dot_product_attention, GELU MLP of width 4 * d_model, learned position
// embeddings, an untied output layer without bias; no dropout. benchmarks/python/four_way.py defines the same
// model (same modules, same order, same shapes) for the Python rows. With `fused` ("gpt-fused"), every LayerNorm is
// volt::nn::LayerNorm with autocast_output (each one feeds only a matmul) and every Linear volt::nn::Linear (ATen's
// linear, as PyTorch's nn.Linear: the bias in the matmul's epilogue): the same parameters, initialised alike.
#pragma once

#include <volt/core/compat.hpp>  // VOLT_TORCH_VERSION
#include <volt/nn/layer_norm.hpp>
#include <volt/nn/linear.hpp>

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>

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

  GptBlockImpl(std::int64_t d, std::int64_t heads_, bool fused = false) : heads(heads_) {
    namespace nn = torch::nn;
    ln1 = layer_norm(*this, "ln1", d, fused);
    qkv = linear(*this, "qkv", nn::LinearOptions(d, 3 * d), fused);
    proj = linear(*this, "proj", nn::LinearOptions(d, d), fused);
    ln2 = layer_norm(*this, "ln2", d, fused);
    fc1 = linear(*this, "fc1", nn::LinearOptions(d, 4 * d), fused);
    fc2 = linear(*this, "fc2", nn::LinearOptions(4 * d, d), fused);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto batch = x.size(0), length = x.size(1), d = x.size(2);
    // (batch, length, 3 d) -> (3, batch, heads, length, head size) -> q, k, v. unbind, as Python's
    // `q, k, v = tensor` does: its backward stacks the three gradients in one kernel, where three selects would
    // each fill a zero tensor of the full size, copy into it and add the three up.
    const auto parts =
        qkv.forward(ln1.forward(x)).view({batch, length, 3, heads, d / heads}).permute({2, 0, 3, 1, 4}).unbind(0);
    auto y = causal_attention(parts[0], parts[1], parts[2]).transpose(1, 2).reshape({batch, length, d});
    auto h = x + proj.forward(y);
    return h + fc2.forward(torch::gelu(fc1.forward(ln2.forward(h))));
  }
};
TORCH_MODULE(GptBlock);

/// Token ids (batch, sequence) -> logits (batch, sequence, vocabulary).
struct GptImpl : torch::nn::Module {
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::Sequential blocks{nullptr};
  torch::nn::AnyModule ln_f, head;

  explicit GptImpl(const GptConfig& config = {}) {
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
    return head.forward(ln_f.forward(blocks->forward(x)));
  }
};
TORCH_MODULE(Gpt);

}  // namespace volt_bench
