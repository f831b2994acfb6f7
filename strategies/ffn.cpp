// FfnModel: the full layout, the slicing into parts; FfnPass: forward and backward of a part with
// the tensor/sequence-parallel communication points.
#include "strategies/ffn.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"
#include "strategies/random.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

// One tensor of the full model, in drawing order.
struct FullTensor {
  std::string name;
  size_t rows, cols;
  enum { kWeight, kBias, kOnes } init;
};

std::vector<FullTensor> fullLayout(const FfnShape& s) {
  std::vector<FullTensor> t = {{"embed.weight", s.in, s.hidden, FullTensor::kWeight},
                               {"embed.bias", 1, s.hidden, FullTensor::kBias}};
  for (size_t b = 0; b < s.blocks; ++b) {
    const std::string p = "block" + std::to_string(b) + ".";
    t.push_back({p + "norm.gamma", 1, s.hidden, FullTensor::kOnes});
    t.push_back({p + "norm.beta", 1, s.hidden, FullTensor::kBias});
    t.push_back({p + "fc1.weight", s.hidden, s.ffn, FullTensor::kWeight});
    t.push_back({p + "fc1.bias", 1, s.ffn, FullTensor::kBias});
    t.push_back({p + "fc2.weight", s.ffn, s.hidden, FullTensor::kWeight});
    t.push_back({p + "fc2.bias", 1, s.hidden, FullTensor::kBias});
  }
  t.push_back({"head.weight", s.hidden, s.out, FullTensor::kWeight});
  t.push_back({"head.bias", 1, s.out, FullTensor::kBias});
  return t;
}

Tensor viewOf(float* base, const FfnSlot& s) { return Tensor::view(base + s.offset, s.rows, s.cols); }

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The tensor-parallel sum of partial outputs: all-reduce, or reduce-scatter by rows (sequence
// parallel). `t` holds all rows; returns the reduced tensor (this rank's rows when sequence parallel).
Result<Tensor> reducePartial(Tensor t, const TensorParallel* tp) {
  if (!tp || tp->comm->size() == 1) return t;
  Comm& c = *tp->comm;
  const int n = c.size();
  auto t0 = Clock::now();
  Tensor out;
  if (tp->sequence) {
    out = Tensor(t.rows() / static_cast<size_t>(n), t.cols());
    FERRY_TRY(c.reduceScatter(t.data(), out.data(), out.size(), DataType::kFloat32, RedOp::kSum));
    tp->stats->bytesSent += ringGatherBytesSent(out.size(), n);
    tp->stats->bytesReceived += ringGatherBytesSent(out.size(), n);
  } else {
    FERRY_TRY(c.allReduce(t.data(), t.data(), t.size(), DataType::kFloat32, RedOp::kSum));
    tp->stats->bytesSent += ringAllReduceBytesSent(t.size(), n, c.rank());
    tp->stats->bytesReceived += ringAllReduceBytesReceived(t.size(), n, c.rank());
    out = t;
  }
  tp->stats->commSeconds += secondsSince(t0);
  return out;
}

// Sequence parallel only: all-gather every rank's rows into the full tensor.
Result<Tensor> gatherRows(const Tensor& t, const TensorParallel* tp) {
  if (!tp || !tp->sequence || tp->comm->size() == 1) return t;
  Comm& c = *tp->comm;
  auto t0 = Clock::now();
  Tensor out(t.rows() * static_cast<size_t>(c.size()), t.cols());
  FERRY_TRY(c.allGather(t.data(), out.data(), t.size(), DataType::kFloat32));
  tp->stats->bytesSent += ringGatherBytesSent(t.size(), c.size());
  tp->stats->bytesReceived += ringGatherBytesSent(t.size(), c.size());
  tp->stats->commSeconds += secondsSince(t0);
  return out;
}

void addInto(Tensor& a, const Tensor& b) {
  for (size_t i = 0; i < a.size(); ++i) a.data()[i] += b.data()[i];
}

}  // namespace

FfnShape ffnShape(const TrainConfig& config) {
  FfnShape s;
  s.in = config.shape.in;
  s.hidden = config.shape.hidden;
  s.ffn = config.ffn ? config.ffn : 4 * config.shape.hidden;
  s.out = config.shape.out;
  s.blocks = config.shape.blocks;
  return s;
}

FfnModel::FfnModel(const FfnShape& shape, const FfnPart& part, uint64_t seed) : shape_(shape), part_(part) {
  part_.endBlock = std::min(part_.endBlock, shape_.blocks);
  const size_t T = static_cast<size_t>(part_.tpSize), t = static_cast<size_t>(part_.tpRank);
  const size_t f = shape_.ffn / T;
  // Draw the full model in layout order; keep this part's slices.
  std::vector<FullTensor> layout = fullLayout(shape_);
  std::vector<float> full;
  Rng rng(seed);
  for (const FullTensor& ft : layout) {
    const size_t at = full.size();
    full.resize(at + ft.rows * ft.cols, ft.init == FullTensor::kOnes ? 1.0f : 0.0f);
    if (ft.init == FullTensor::kWeight) {
      const double stddev = 1.0 / std::sqrt(static_cast<double>(ft.rows));
      for (size_t k = 0; k < ft.rows * ft.cols; ++k) full[at + k] = static_cast<float>(rng.normal() * stddev);
    }
    const size_t block = ft.name.rfind("block", 0) == 0 ? std::stoul(ft.name.substr(5)) : SIZE_MAX;
    bool keep = block == SIZE_MAX ? (ft.name.rfind("embed", 0) == 0 ? part_.embed : part_.head)
                                  : block >= part_.firstBlock && block < part_.endBlock;
    if (!keep) continue;
    FfnSlot s{ft.name, params_.size(), ft.rows, ft.cols, at, ft.cols, 0, 0, true};
    const bool fc1 = ft.name.find("fc1.") != std::string::npos;
    if (fc1) {  // column-parallel: columns [t·f, (t+1)·f)
      s.cols = f;
      s.col0 = t * f;
      s.replicated = false;
    } else if (ft.name.find("fc2.weight") != std::string::npos) {  // row-parallel: rows [t·f, (t+1)·f)
      s.rows = f;
      s.row0 = t * f;
      s.replicated = false;
    }
    slots_.push_back(s);
    params_.resize(params_.size() + s.rows * s.cols);
  }
  fullCount_ = full.size();
  params_ = extract(full);
  grads_.assign(params_.size(), 0.0f);
}

std::vector<float> FfnModel::extract(const std::vector<float>& full) const {
  std::vector<float> out(params_.size());
  for (const FfnSlot& s : slots_)
    for (size_t r = 0; r < s.rows; ++r)
      for (size_t c = 0; c < s.cols; ++c)
        out[s.offset + r * s.cols + c] = full[s.fullOffset + (s.row0 + r) * s.fullCols + s.col0 + c];
  return out;
}

FfnPass::FfnPass(FfnModel& model, float* grads) {
  const std::vector<FfnSlot>& sl = model.slots();
  float* p = model.paramData();
  size_t i = 0;
  auto linear = [&](bool bias) {
    Linear l(viewOf(p, sl[i]), bias ? viewOf(p, sl[i + 1]) : Tensor(), viewOf(grads, sl[i]),
             bias ? viewOf(grads, sl[i + 1]) : Tensor());
    i += bias ? 2 : 1;
    return l;
  };
  if (model.part().embed) {
    embedOn_ = true;
    embed_ = linear(true);
  }
  for (size_t b = model.part().firstBlock; b < model.part().endBlock; ++b) {
    Block blk;
    blk.norm = LayerNorm(viewOf(p, sl[i]), viewOf(p, sl[i + 1]), viewOf(grads, sl[i]), viewOf(grads, sl[i + 1]));
    i += 2;
    blk.fc1 = linear(true);
    blk.fc2 = linear(false);  // its bias is added once, after the partial outputs are summed
    blk.b2 = viewOf(p, sl[i]);
    blk.db2 = viewOf(grads, sl[i]);
    ++i;
    blocks_.push_back(blk);
  }
  if (model.part().head) {
    headOn_ = true;
    head_ = linear(true);
  }
}

Result<Tensor> FfnPass::forward(const Tensor& x, const TensorParallel* tp) {
  Tensor h = embedOn_ ? embed_.forward(x) : x;
  for (Block& b : blocks_) {
    auto a = gatherRows(b.norm.forward(h), tp);
    FERRY_TRY(a);
    auto z = reducePartial(b.fc2.forward(b.act.forward(b.fc1.forward(*a))), tp);
    FERRY_TRY(z);
    Tensor next(h.rows(), h.cols());
    for (size_t r = 0; r < h.rows(); ++r)
      for (size_t c = 0; c < h.cols(); ++c) next.at(r, c) = h.at(r, c) + z->at(r, c) + b.b2.data()[c];
    h = next;
  }
  return headOn_ ? head_.forward(h) : h;
}

Result<Tensor> FfnPass::backward(const Tensor& dy, const TensorParallel* tp) {
  Tensor d = headOn_ ? head_.backward(dy) : dy;
  for (size_t k = blocks_.size(); k-- > 0;) {
    Block& b = blocks_[k];
    columnSums(d, b.db2);
    auto dz = gatherRows(d, tp);
    FERRY_TRY(dz);
    auto da = reducePartial(b.fc1.backward(b.act.backward(b.fc2.backward(*dz))), tp);
    FERRY_TRY(da);
    Tensor dx = b.norm.backward(*da);
    addInto(dx, d);  // the residual path
    d = dx;
  }
  if (embedOn_) {
    embed_.backward(d, false);
    return Tensor();
  }
  return d;
}

size_t FfnPass::savedBytes() const {
  size_t bytes = (embedOn_ ? embed_.savedBytes() : 0) + (headOn_ ? head_.savedBytes() : 0);
  for (const Block& b : blocks_)
    bytes += b.norm.savedBytes() + b.fc1.savedBytes() + b.act.savedBytes() + b.fc2.savedBytes();
  return bytes;
}

std::vector<float> trainFfnSingle(const TrainConfig& config, std::vector<float>* losses) {
  const FfnShape shape = ffnShape(config);
  FfnModel model(shape, FfnPart{}, config.seed);
  SyntheticTask task(shape.in, shape.out, config.seed);
  auto opt = configOptimizer(config);
  for (int s = 0; s < config.steps; ++s) {
    Batch b = task.batch(static_cast<uint64_t>(s), config.globalBatch);
    FfnPass pass(model, model.gradData());
    Tensor y = *pass.forward(b.x);
    LossResult r = batchLoss(y, b, config.loss);
    if (losses) losses->push_back(r.loss);
    (void)pass.backward(r.grad);
    opt->step(model.paramData(), model.gradData(), model.paramCount());
  }
  return {model.paramData(), model.paramData() + model.paramCount()};
}

}  // namespace ferry::train
