// The small GPT of volt's benchmarks: 6 pre-norm transformer blocks, d_model 384, 6 heads, context 256,
// vocabulary 8192, causal scaled_dot_product_attention, GELU MLP of width 4 * d_model, learned position
// embeddings, an untied output layer without bias; no dropout. benchmarks/python/four_way.py defines the same
// model (same modules, same order, same shapes) for the Python rows.
#pragma once

#include <volt/core/compat.hpp>  // VOLT_TORCH_VERSION

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace volt_bench {

struct GptConfig {
  std::int64_t vocabulary = 8192, context = 256, d_model = 384, heads = 6, layers = 6;
};

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
  torch::nn::LayerNorm ln1{nullptr}, ln2{nullptr};
  torch::nn::Linear qkv{nullptr}, proj{nullptr}, fc1{nullptr}, fc2{nullptr};
  std::int64_t heads;

  GptBlockImpl(std::int64_t d, std::int64_t heads_) : heads(heads_) {
    namespace nn = torch::nn;
    ln1 = register_module("ln1", nn::LayerNorm(nn::LayerNormOptions({d})));
    qkv = register_module("qkv", nn::Linear(d, 3 * d));
    proj = register_module("proj", nn::Linear(d, d));
    ln2 = register_module("ln2", nn::LayerNorm(nn::LayerNormOptions({d})));
    fc1 = register_module("fc1", nn::Linear(d, 4 * d));
    fc2 = register_module("fc2", nn::Linear(4 * d, d));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const auto batch = x.size(0), length = x.size(1), d = x.size(2);
    // (batch, length, 3 d) -> (3, batch, heads, length, head size)
    const auto qkv_ = qkv->forward(ln1->forward(x)).view({batch, length, 3, heads, d / heads}).permute({2, 0, 3, 1, 4});
    auto y = causal_attention(qkv_[0], qkv_[1], qkv_[2]).transpose(1, 2).reshape({batch, length, d});
    auto h = x + proj->forward(y);
    return h + fc2->forward(torch::gelu(fc1->forward(ln2->forward(h))));
  }
};
TORCH_MODULE(GptBlock);

/// Token ids (batch, sequence) -> logits (batch, sequence, vocabulary).
struct GptImpl : torch::nn::Module {
  torch::nn::Embedding tokens{nullptr}, positions{nullptr};
  torch::nn::Sequential blocks{nullptr};
  torch::nn::LayerNorm ln_f{nullptr};
  torch::nn::Linear head{nullptr};

  explicit GptImpl(const GptConfig& config = {}) {
    namespace nn = torch::nn;
    tokens = register_module("tokens", nn::Embedding(config.vocabulary, config.d_model));
    positions = register_module("positions", nn::Embedding(config.context, config.d_model));
    nn::Sequential body;
    for (std::int64_t i = 0; i < config.layers; ++i) body->push_back(GptBlock(config.d_model, config.heads));
    blocks = register_module("blocks", body);
    ln_f = register_module("ln_f", nn::LayerNorm(nn::LayerNormOptions({config.d_model})));
    head = register_module("head", nn::Linear(nn::LinearOptions(config.d_model, config.vocabulary).bias(false)));
  }
  torch::Tensor forward(const torch::Tensor& ids) {
    const auto where = torch::arange(ids.size(1), ids.options());
    auto x = tokens->forward(ids) + positions->forward(where);
    return head->forward(ln_f->forward(blocks->forward(x)));
  }
};
TORCH_MODULE(Gpt);

}  // namespace volt_bench
