// Mlp: flat parameter layout, initialization from a seed, forward and backward.
#include "strategies/model.hpp"

#include <cmath>

#include "strategies/random.hpp"

namespace ferry::train {

size_t Mlp::addSlot(const std::string& name, size_t rows, size_t cols) {
  const size_t offset = slots_.empty() ? 0 : slots_.back().offset + slots_.back().count;
  slots_.push_back({name, offset, rows * cols});
  dims_.emplace_back(rows, cols);
  return slots_.size() - 1;
}

Tensor Mlp::view(std::vector<float>& buf, size_t index) const {
  return Tensor::view(buf.data() + slots_[index].offset, dims_[index].first, dims_[index].second);
}

Mlp::Mlp(const MlpShape& shape, uint64_t seed) : shape_(shape) {
  if (shape_.blocks == 0) shape_.blocks = 1;
  const size_t nb = shape_.blocks;
  // Layout in the order backward finishes gradients: the head, then the blocks from the last.
  const size_t headW = addSlot("head.weight", shape_.hidden, shape_.out);
  const size_t headB = addSlot("head.bias", 1, shape_.out);
  blocks_.resize(nb);
  for (size_t i = nb; i-- > 0;) {
    const std::string p = "block" + std::to_string(i) + ".";
    blocks_[i].firstParam = addSlot(p + "norm.gamma", 1, shape_.hidden);
    addSlot(p + "norm.beta", 1, shape_.hidden);
    addSlot(p + "fc.weight", i == 0 ? shape_.in : shape_.hidden, shape_.hidden);
    addSlot(p + "fc.bias", 1, shape_.hidden);
  }
  params_.assign(slots_.back().offset + slots_.back().count, 0.0f);
  grads_.assign(params_.size(), 0.0f);

  Rng rng(seed);
  auto initWeight = [&](size_t index) {
    const double stddev = 1.0 / std::sqrt(static_cast<double>(dims_[index].first));
    float* w = params_.data() + slots_[index].offset;
    for (size_t k = 0; k < slots_[index].count; ++k) w[k] = static_cast<float>(rng.normal() * stddev);
  };
  for (size_t i = 0; i < nb; ++i) {
    const size_t g = blocks_[i].firstParam;
    initWeight(g + 2);
    float* gamma = params_.data() + slots_[g].offset;
    for (size_t k = 0; k < slots_[g].count; ++k) gamma[k] = 1.0f;
    blocks_[i].norm = LayerNorm(view(params_, g), view(params_, g + 1), view(grads_, g), view(grads_, g + 1));
    blocks_[i].fc = Linear(view(params_, g + 2), view(params_, g + 3), view(grads_, g + 2), view(grads_, g + 3));
  }
  initWeight(headW);
  head_ = Linear(view(params_, headW), view(params_, headB), view(grads_, headW), view(grads_, headB));
}

Tensor Mlp::forward(const Tensor& x) {
  Tensor h = x;
  for (Block& b : blocks_) h = b.norm.forward(b.act.forward(b.fc.forward(h)));
  return head_.forward(h);
}

void Mlp::backward(const Tensor& dOut, const GradReady& ready) {
  auto done = [&](size_t first, size_t count) {
    if (ready)
      for (size_t p = first; p < first + count; ++p) ready(p);
  };
  Tensor d = head_.backward(dOut);
  done(0, 2);
  for (size_t i = blocks_.size(); i-- > 0;) {
    Block& b = blocks_[i];
    d = b.norm.backward(d);
    done(b.firstParam, 2);
    d = b.act.backward(d);
    // The first block's input is the data: its gradient is never needed.
    d = b.fc.backward(d, i > 0);
    done(b.firstParam + 2, 2);
  }
}

}  // namespace ferry::train
