// MoE: the parameters, a group's routing and combine, the experts, the uneven all-to-all exchange
// over ferry, and the single-process reference that routes in the same groups.
#include "strategies/moe.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "strategies/cost.hpp"
#include "strategies/data.hpp"
#include "strategies/layers.hpp"
#include "strategies/random.hpp"

namespace ferry::train {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

Tensor viewAt(std::vector<float>& buf, size_t& at, size_t rows, size_t cols) {
  Tensor t = Tensor::view(buf.data() + at, rows, cols);
  at += rows * cols;
  return t;
}

// Rows of `parts`, stacked.
Tensor concatRows(const std::vector<const Tensor*>& parts, size_t cols) {
  size_t rows = 0;
  for (const Tensor* p : parts) rows += p->rows();
  Tensor out(rows, cols);
  size_t at = 0;
  for (const Tensor* p : parts) {
    std::copy(p->data(), p->data() + p->size(), out.data() + at);
    at += p->size();
  }
  return out;
}

// One expert's FFN on the rows it was sent (possibly none).
struct ExpertNet {
  Linear fc1, fc2;
  Gelu act;
  Tensor dw1, db1, dw2, db2;
  size_t rows = 0;

  ExpertNet(MoeModel& m, size_t local) {
    const size_t h = m.hidden(), f = m.ffn();
    size_t at = local * m.expertSize(), ag = at;
    Tensor w1 = viewAt(m.expertParams(), at, h, f), b1 = viewAt(m.expertParams(), at, 1, f);
    Tensor w2 = viewAt(m.expertParams(), at, f, h), b2 = viewAt(m.expertParams(), at, 1, h);
    dw1 = viewAt(m.expertGrads(), ag, h, f);
    db1 = viewAt(m.expertGrads(), ag, 1, f);
    dw2 = viewAt(m.expertGrads(), ag, f, h);
    db2 = viewAt(m.expertGrads(), ag, 1, h);
    fc1 = Linear(w1, b1, dw1, db1);
    fc2 = Linear(w2, b2, dw2, db2);
  }
  Tensor forward(const Tensor& x) {
    rows = x.rows();
    if (rows == 0) return Tensor(0, db2.cols());
    return fc2.forward(act.forward(fc1.forward(x)));
  }
  Tensor backward(const Tensor& dy) {
    if (rows == 0) {  // no tokens: a zero gradient (BLAS is not asked for empty products)
      for (Tensor* t : {&dw1, &db1, &dw2, &db2}) t->fill(0.0f);
      return Tensor(0, dw1.rows());
    }
    return fc1.backward(act.backward(fc2.backward(dy)));
  }
};

// Runs local experts on blocks[g·El + j] (rows of group g for local expert j, g < groups) and
// returns the outputs in the same blocks: each expert sees all groups' rows at once, in group order.
std::vector<Tensor> runExperts(std::vector<ExpertNet>& nets, const std::vector<Tensor>& blocks, size_t groups,
                               size_t cols, bool backward) {
  const size_t El = nets.size();
  std::vector<Tensor> out(blocks.size());
  for (size_t j = 0; j < El; ++j) {
    std::vector<const Tensor*> parts;
    for (size_t g = 0; g < groups; ++g) parts.push_back(&blocks[g * El + j]);
    Tensor y = backward ? nets[j].backward(concatRows(parts, cols)) : nets[j].forward(concatRows(parts, cols));
    size_t at = 0;
    for (size_t g = 0; g < groups; ++g) {
      out[g * El + j] = Tensor(blocks[g * El + j].rows(), cols);
      std::copy(y.data() + at, y.data() + at + out[g * El + j].size(), out[g * El + j].data());
      at += out[g * El + j].size();
    }
  }
  return out;
}

// One group's side of the layer: embedding, gate and routing, combine, head, and their backward.
class Group {
 public:
  Group(MoeModel& m, std::vector<float>& grads, const TrainConfig& cfg) : cfg_(cfg), E_(m.experts()), h_(m.hidden()) {
    size_t at = 0, ag = 0;
    auto pair = [&](size_t r, size_t c, bool bias) {
      Tensor w = viewAt(m.shared(), at, r, c), dw = viewAt(grads, ag, r, c);
      Tensor b = bias ? viewAt(m.shared(), at, 1, c) : Tensor(), db = bias ? viewAt(grads, ag, 1, c) : Tensor();
      return Linear(w, b, dw, db);
    };
    embed_ = pair(m.in(), h_, true);
    gate_ = pair(h_, E_, false);
    head_ = pair(h_, m.out(), true);
  }

  // Embedding, gate, routing: the rows for every expert (E tensors).
  std::vector<Tensor> dispatch(const Tensor& x) {
    h_act_ = embed_.forward(x);
    const size_t T = x.rows(), k = cfg_.topK;
    Tensor logits = gate_.forward(h_act_);
    probs_ = Tensor(T, E_);
    choice_.assign(T * k, 0);
    for (size_t t = 0; t < T; ++t) {
      const float* z = logits.row(t);
      const float zmax = *std::max_element(z, z + E_);
      double sum = 0;
      for (size_t e = 0; e < E_; ++e) sum += std::exp(static_cast<double>(z[e] - zmax));
      for (size_t e = 0; e < E_; ++e)
        probs_.at(t, e) = static_cast<float>(std::exp(static_cast<double>(z[e] - zmax)) / sum);
      std::vector<size_t> order(E_);
      for (size_t e = 0; e < E_; ++e) order[e] = e;
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return probs_.at(t, a) > probs_.at(t, b); });
      for (size_t j = 0; j < k; ++j) choice_[t * k + j] = order[j];
    }
    // Capacity per expert for this group; first choices are served before second ones.
    const size_t capacity = static_cast<size_t>(std::ceil(cfg_.capacityFactor * static_cast<double>(T * k) / E_));
    tokens_.assign(E_, {});
    dropped_ = 0;
    for (size_t j = 0; j < k; ++j)
      for (size_t t = 0; t < T; ++t) {
        const size_t e = choice_[t * k + j];
        if (tokens_[e].size() < capacity) tokens_[e].push_back(t);
        else ++dropped_;
      }
    // Load-balancing statistics: f_e (first choices) and P_e (mean probability).
    first_.assign(E_, 0.0);
    meanProb_.assign(E_, 0.0);
    for (size_t t = 0; t < T; ++t) {
      first_[choice_[t * k]] += 1.0 / static_cast<double>(T);
      for (size_t e = 0; e < E_; ++e) meanProb_[e] += probs_.at(t, e) / static_cast<double>(T);
    }
    std::vector<Tensor> rows(E_);
    for (size_t e = 0; e < E_; ++e) {
      rows[e] = Tensor(tokens_[e].size(), h_);
      for (size_t i = 0; i < tokens_[e].size(); ++i)
        std::copy(h_act_.row(tokens_[e][i]), h_act_.row(tokens_[e][i]) + h_, rows[e].row(i));
    }
    return rows;
  }

  // z = h + Σ p·FFN_e(h), then the head.
  Tensor combine(std::vector<Tensor> outputs) {
    outputs_ = std::move(outputs);
    Tensor z = h_act_.clone();
    for (size_t e = 0; e < E_; ++e)
      for (size_t i = 0; i < tokens_[e].size(); ++i) {
        const size_t t = tokens_[e][i];
        const float w = probs_.at(t, e);
        for (size_t c = 0; c < h_; ++c) z.at(t, c) += w * outputs_[e].at(i, c);
      }
    return head_.forward(z);
  }

  float auxLoss() const {
    double s = 0;
    for (size_t e = 0; e < E_; ++e) s += first_[e] * meanProb_[e];
    return static_cast<float>(cfg_.auxWeight * static_cast<double>(E_) * s);
  }
  uint64_t dropped() const { return dropped_; }
  const std::vector<std::vector<size_t>>& tokens() const { return tokens_; }

  // From dy (already scaled): the gradient of every expert's output rows (E tensors).
  std::vector<Tensor> backwardToExperts(const Tensor& dy, float scale) {
    dz_ = head_.backward(dy);
    const size_t T = dz_.rows();
    dprobs_ = Tensor(T, E_);
    std::vector<Tensor> dOut(E_);
    for (size_t e = 0; e < E_; ++e) {
      dOut[e] = Tensor(tokens_[e].size(), h_);
      for (size_t i = 0; i < tokens_[e].size(); ++i) {
        const size_t t = tokens_[e][i];
        const float w = probs_.at(t, e);
        double dot = 0;
        for (size_t c = 0; c < h_; ++c) {
          dot += static_cast<double>(dz_.at(t, c)) * outputs_[e].at(i, c);
          dOut[e].at(i, c) = w * dz_.at(t, c);
        }
        dprobs_.at(t, e) = static_cast<float>(dot);
      }
    }
    // d aux / d p[t][e] = α·E·f_e / T, scaled like the rest of the loss.
    for (size_t t = 0; t < T; ++t)
      for (size_t e = 0; e < E_; ++e)
        dprobs_.at(t, e) +=
            static_cast<float>(scale * cfg_.auxWeight * static_cast<double>(E_) * first_[e] / static_cast<double>(T));
    return dOut;
  }

  // With the gradient of every expert's input rows: the gate's and the embedding's backward.
  void finish(const std::vector<Tensor>& dIn) {
    Tensor dh = dz_.clone();
    for (size_t e = 0; e < E_; ++e)
      for (size_t i = 0; i < tokens_[e].size(); ++i)
        for (size_t c = 0; c < h_; ++c) dh.at(tokens_[e][i], c) += dIn[e].at(i, c);
    const size_t T = dh.rows();
    Tensor dlogits(T, E_);
    for (size_t t = 0; t < T; ++t) {
      double s = 0;
      for (size_t e = 0; e < E_; ++e) s += static_cast<double>(probs_.at(t, e)) * dprobs_.at(t, e);
      for (size_t e = 0; e < E_; ++e) dlogits.at(t, e) = static_cast<float>(probs_.at(t, e) * (dprobs_.at(t, e) - s));
    }
    Tensor dGate = gate_.backward(dlogits);
    for (size_t i = 0; i < dh.size(); ++i) dh.data()[i] += dGate.data()[i];
    embed_.backward(dh, false);
  }

 private:
  const TrainConfig& cfg_;
  size_t E_, h_;
  Linear embed_, gate_, head_;
  Tensor h_act_, probs_, dz_, dprobs_;
  std::vector<size_t> choice_;
  std::vector<std::vector<size_t>> tokens_;
  std::vector<double> first_, meanProb_;
  std::vector<Tensor> outputs_;
  uint64_t dropped_ = 0;
};

// Sends send[d·El + j] to rank d and receives recv[g·El + j] (sized by recvRows) from rank g, in one
// sendRecv batch of one packed message per peer (this rank's own share is a local copy).
Status exchangeRows(Comm& comm, const std::vector<Tensor>& send, const std::vector<uint64_t>& recvRows, size_t El,
                    size_t cols, std::vector<Tensor>& recv, StepStats& st) {
  const int n = comm.size();
  std::vector<std::vector<float>> out(n), in(n);
  std::vector<P2pOp> ops;
  for (int d = 0; d < n; ++d) {
    std::vector<const Tensor*> parts;
    for (size_t j = 0; j < El; ++j) parts.push_back(&send[static_cast<size_t>(d) * El + j]);
    Tensor packed = concatRows(parts, cols);
    out[d].assign(packed.data(), packed.data() + packed.size());
    size_t rows = 0;
    for (size_t j = 0; j < El; ++j) rows += recvRows[static_cast<size_t>(d) * El + j];
    in[d].assign(rows * cols, 0.0f);
    ops.push_back(P2pOp::send(out[d].data(), out[d].size(), DataType::kFloat32, d));
    ops.push_back(P2pOp::recv(in[d].data(), in[d].size(), DataType::kFloat32, d));
    if (d != comm.rank()) {
      st.bytesSent += out[d].size() * sizeof(float);
      st.bytesReceived += in[d].size() * sizeof(float);
    }
  }
  auto t0 = Clock::now();
  FERRY_TRY(comm.sendRecv(ops));
  st.commSeconds += secondsSince(t0);
  recv.assign(static_cast<size_t>(n) * El, Tensor());
  for (int g = 0; g < n; ++g) {
    size_t at = 0;
    for (size_t j = 0; j < El; ++j) {
      Tensor& t = recv[static_cast<size_t>(g) * El + j];
      t = Tensor(recvRows[static_cast<size_t>(g) * El + j], cols);
      std::copy(in[g].data() + at, in[g].data() + at + t.size(), t.data());
      at += t.size();
    }
  }
  return Status();
}

}  // namespace

MoeModel::MoeModel(const TrainConfig& config, int rank, int ranks)
    : in_(config.shape.in), hidden_(config.shape.hidden), ffn_(config.ffn ? config.ffn : 4 * config.shape.hidden),
      out_(config.shape.out), experts_(config.experts) {
  local_ = experts_ / static_cast<size_t>(ranks);
  first_ = static_cast<size_t>(rank) * local_;
  Rng rng(config.seed);
  auto weights = [&](std::vector<float>& buf, size_t rows, size_t cols, bool keep) {
    const double stddev = 1.0 / std::sqrt(static_cast<double>(rows));
    for (size_t k = 0; k < rows * cols; ++k) {
      const float v = static_cast<float>(rng.normal() * stddev);
      if (keep) buf.push_back(v);
    }
  };
  auto zeros = [](std::vector<float>& buf, size_t count, bool keep) {
    if (keep) buf.insert(buf.end(), count, 0.0f);
  };
  weights(shared_, in_, hidden_, true);
  zeros(shared_, hidden_, true);
  weights(shared_, hidden_, experts_, true);
  weights(shared_, hidden_, out_, true);
  zeros(shared_, out_, true);
  for (size_t e = 0; e < experts_; ++e) {
    const bool keep = e >= first_ && e < first_ + local_;
    weights(expertParams_, hidden_, ffn_, keep);
    zeros(expertParams_, ffn_, keep);
    weights(expertParams_, ffn_, hidden_, keep);
    zeros(expertParams_, hidden_, keep);
  }
  sharedGrad_.assign(shared_.size(), 0.0f);
  expertGrads_.assign(expertParams_.size(), 0.0f);
}

std::vector<float> MoeModel::flat() const {
  std::vector<float> f(shared_);
  f.insert(f.end(), expertParams_.begin(), expertParams_.end());
  return f;
}

std::vector<float> MoeModel::extract(const std::vector<float>& fullFlat) const {
  std::vector<float> f(fullFlat.begin(), fullFlat.begin() + static_cast<long>(shared_.size()));
  const size_t at = shared_.size() + first_ * expertSize();
  f.insert(f.end(), fullFlat.begin() + static_cast<long>(at),
           fullFlat.begin() + static_cast<long>(at + local_ * expertSize()));
  return f;
}

uint64_t moeBytes(const std::vector<uint64_t>& counts, size_t experts, size_t hidden, size_t sharedCount, int n,
                  int rank, bool received) {
  if (n <= 1) return 0;
  const size_t El = experts / static_cast<size_t>(n), r = static_cast<size_t>(rank);
  uint64_t out = 0, in = 0;  // rows to other ranks' experts, rows from other groups
  for (size_t g = 0; g < static_cast<size_t>(n); ++g)
    for (size_t e = 0; e < experts; ++e) {
      const size_t owner = e / El;
      if (g == r && owner != r) out += counts[g * experts + e];
      if (g != r && owner == r) in += counts[g * experts + e];
    }
  const uint64_t countBytes = static_cast<uint64_t>(n - 1) * El * sizeof(uint64_t);
  const uint64_t allReduce =
      received ? ringAllReduceBytesReceived(sharedCount, n, rank) : ringAllReduceBytesSent(sharedCount, n, rank);
  return countBytes + 2 * (out + in) * hidden * sizeof(float) + allReduce;
}

Result<std::vector<StepStats>> trainMoe(Comm& comm, const TrainConfig& config, MoeModel& model,
                                        const StepCallback& onStep, MoeRouting* routing) {
  const int n = comm.size(), rank = comm.rank();
  const size_t E = model.experts(), El = model.localExperts(), h = model.hidden();
  if (E % static_cast<size_t>(n) != 0 || config.globalBatch % static_cast<size_t>(n) != 0 ||
      (config.topK != 1 && config.topK != 2) || config.topK > E)
    return makeError(ErrorCode::kInvalidArgument,
                     "MoE needs experts (%zu) and the global batch (%zu) divisible by the %d ranks, top-k 1 or 2", E,
                     config.globalBatch, n);
  const size_t rows = config.globalBatch / static_cast<size_t>(n);
  SyntheticTask task(model.in(), model.out(), config.seed);
  auto sharedOpt = configOptimizer(config), expertOpt = configOptimizer(config);
  const float scale = 1.0f / static_cast<float>(n);
  std::vector<StepStats> all;
  for (int step = 0; step < config.steps; ++step) {
    StepStats st;
    st.step = step;
    auto t0 = Clock::now();
    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    Batch mine = global.slice(rows * static_cast<size_t>(rank), rows);
    Group group(model, model.sharedGrad(), config);
    std::vector<ExpertNet> nets;
    for (size_t j = 0; j < El; ++j) nets.emplace_back(model, j);

    std::vector<Tensor> toExperts = group.dispatch(mine.x);
    // The uneven split: how many rows this rank gets from every group for each of its experts.
    std::vector<uint64_t> sendCounts(E), recvCounts(E);
    for (size_t e = 0; e < E; ++e) sendCounts[e] = toExperts[e].rows();
    auto tc = Clock::now();
    FERRY_TRY(comm.allToAll(sendCounts.data(), recvCounts.data(), El, DataType::kUint64));
    st.commSeconds += secondsSince(tc);
    st.bytesSent += static_cast<uint64_t>(n - 1) * El * sizeof(uint64_t);
    st.bytesReceived += static_cast<uint64_t>(n - 1) * El * sizeof(uint64_t);

    std::vector<Tensor> expertIn, back;
    FERRY_TRY(exchangeRows(comm, toExperts, recvCounts, El, h, expertIn, st));
    std::vector<Tensor> expertOut = runExperts(nets, expertIn, static_cast<size_t>(n), h, false);
    FERRY_TRY(exchangeRows(comm, expertOut, sendCounts, El, h, back, st));
    Tensor y = group.combine(std::move(back));
    LossResult loss = batchLoss(y, mine, config.loss);
    st.loss = loss.loss + group.auxLoss();
    for (size_t i = 0; i < loss.grad.size(); ++i) loss.grad.data()[i] *= scale;

    std::vector<Tensor> dOut = group.backwardToExperts(loss.grad, scale), dExpertOut, dBack;
    FERRY_TRY(exchangeRows(comm, dOut, recvCounts, El, h, dExpertOut, st));
    std::vector<Tensor> dExpertIn = runExperts(nets, dExpertOut, static_cast<size_t>(n), h, true);
    FERRY_TRY(exchangeRows(comm, dExpertIn, sendCounts, El, h, dBack, st));
    group.finish(dBack);

    // Replicated parameters saw only this group's rows: sum their gradients over the ranks.
    std::vector<float>& sg = model.sharedGrad();
    tc = Clock::now();
    FERRY_TRY(comm.allReduce(sg.data(), sg.data(), sg.size(), DataType::kFloat32, RedOp::kSum));
    st.commSeconds += secondsSince(tc);
    st.bytesSent += ringAllReduceBytesSent(sg.size(), n, rank);
    st.bytesReceived += ringAllReduceBytesReceived(sg.size(), n, rank);
    uint64_t dropped = group.dropped();
    FERRY_TRY(comm.allReduce(&dropped, &dropped, 1, DataType::kUint64, RedOp::kSum));  // a statistic, not counted
    st.droppedTokens = dropped;
    if (routing) {
      routing->counts = sendCounts;
      routing->dropped = dropped;
    }
    sharedOpt->step(model.shared().data(), sg.data(), sg.size());
    expertOpt->step(model.expertParams().data(), model.expertGrads().data(), model.expertParams().size());
    st.exposedSeconds = st.commSeconds;
    st.stateBytes = st.peakStateBytes =
        (sg.size() + model.expertParams().size()) * (2 * sizeof(float) + sharedOpt->stateBytesPerParam());
    st.stepSeconds = secondsSince(t0);
    if (onStep) onStep(st);
    all.push_back(st);
  }
  return all;
}

float moeGradients(const TrainConfig& config, MoeModel& model, Batch& global, int groups, MoeRouting* routing) {
  const size_t E = model.experts(), h = model.hidden(), G = static_cast<size_t>(groups);
  const size_t rows = global.rows() / G;
  const float scale = 1.0f / static_cast<float>(groups);
  std::vector<std::vector<float>> groupGrads(G, std::vector<float>(model.shared().size()));
  std::vector<Batch> parts;
  std::vector<std::unique_ptr<Group>> gs;
  std::vector<ExpertNet> nets;
  for (size_t e = 0; e < E; ++e) nets.emplace_back(model, e);
  std::vector<Tensor> blocks(G * E);
  for (size_t g = 0; g < G; ++g) {
    parts.push_back(global.slice(g * rows, rows));
    gs.push_back(std::make_unique<Group>(model, groupGrads[g], config));
    std::vector<Tensor> r = gs[g]->dispatch(parts[g].x);
    for (size_t e = 0; e < E; ++e) blocks[g * E + e] = r[e];
  }
  std::vector<Tensor> outs = runExperts(nets, blocks, G, h, false), dOuts(G * E);
  double lossSum = 0;
  uint64_t dropped = 0;
  if (routing) routing->counts.assign(G * E, 0);
  for (size_t g = 0; g < G; ++g) {
    Tensor y = gs[g]->combine(
        std::vector<Tensor>(outs.begin() + static_cast<long>(g * E), outs.begin() + static_cast<long>((g + 1) * E)));
    LossResult loss = batchLoss(y, parts[g], config.loss);
    lossSum += loss.loss + gs[g]->auxLoss();
    for (size_t i = 0; i < loss.grad.size(); ++i) loss.grad.data()[i] *= scale;
    std::vector<Tensor> d = gs[g]->backwardToExperts(loss.grad, scale);
    for (size_t e = 0; e < E; ++e) {
      dOuts[g * E + e] = d[e];
      if (routing) routing->counts[g * E + e] = gs[g]->tokens()[e].size();
    }
    dropped += gs[g]->dropped();
  }
  std::vector<Tensor> dIns = runExperts(nets, dOuts, G, h, true);
  std::fill(model.sharedGrad().begin(), model.sharedGrad().end(), 0.0f);
  for (size_t g = 0; g < G; ++g) {
    gs[g]->finish(
        std::vector<Tensor>(dIns.begin() + static_cast<long>(g * E), dIns.begin() + static_cast<long>((g + 1) * E)));
    for (size_t i = 0; i < groupGrads[g].size(); ++i) model.sharedGrad()[i] += groupGrads[g][i];
  }
  if (routing) routing->dropped = dropped;
  return static_cast<float>(lossSum / static_cast<double>(G));
}

std::vector<float> trainMoeSingle(const TrainConfig& config, int groups, MoeRouting* routing,
                                  std::vector<float>* losses) {
  MoeModel model(config, 0, 1);
  SyntheticTask task(model.in(), model.out(), config.seed);
  auto sharedOpt = configOptimizer(config), expertOpt = configOptimizer(config);
  for (int step = 0; step < config.steps; ++step) {
    Batch global = task.batch(static_cast<uint64_t>(step), config.globalBatch);
    const float loss = moeGradients(config, model, global, groups, routing);
    if (losses) losses->push_back(loss);
    sharedOpt->step(model.shared().data(), model.sharedGrad().data(), model.shared().size());
    expertOpt->step(model.expertParams().data(), model.expertGrads().data(), model.expertParams().size());
  }
  return model.flat();
}

}  // namespace ferry::train
