/// \file
/// Definitions of the functions declared in volt/distributed/reducer.hpp: compiled in every translation unit
/// (header-only), or once with VOLT_IMPLEMENTATION (see volt/core/linkage.hpp).
#pragma once

#ifdef VOLT_DETAIL_HAS_C10D

namespace volt::detail {

VOLT_INLINE GradientReducer::GradientReducer(ProcessGroup& group, std::vector<torch::Tensor> parameters,
                                             std::int64_t bucket_bytes)
    : core_(std::make_shared<Core>(group)) {
  auto& core = *core_;
  for (auto& parameter : parameters) {
    if (parameter.requires_grad()) core.parameters.push_back(parameter);
  }
  // Buckets in reverse order, split by size, dtype and device.
  const auto count = static_cast<std::int64_t>(core.parameters.size());
  core.slot_of.assign(static_cast<std::size_t>(count), {});
  for (std::int64_t i = count - 1; i >= 0; --i) {
    const auto& parameter = core.parameters[static_cast<std::size_t>(i)];
    const std::int64_t bytes = parameter.numel() * static_cast<std::int64_t>(parameter.element_size());
    const bool start_new = core.buckets.empty() ||
                           core.buckets.back().bytes + bytes > bucket_bytes ||
                           core.buckets.back().dtype != parameter.scalar_type() ||
                           core.buckets.back().device != parameter.device();
    if (start_new) {
      Bucket bucket;
      bucket.dtype = parameter.scalar_type();
      bucket.device = parameter.device();
      core.buckets.push_back(std::move(bucket));
    }
    auto& bucket = core.buckets.back();
    core.slot_of[static_cast<std::size_t>(i)] = {static_cast<std::int64_t>(core.buckets.size()) - 1,
                                                  static_cast<std::int64_t>(bucket.members.size()), bucket.numel};
    bucket.members.push_back(i);
    bucket.numel += parameter.numel();
    bucket.bytes += bytes;
  }
  // The flat buffers and their views are made once: a step then only fills, reduces and copies back.
  for (auto& bucket : core.buckets) {
    bucket.flat = torch::zeros({bucket.numel}, torch::TensorOptions().dtype(bucket.dtype).device(bucket.device));
    bucket.collective = {bucket.flat};
    bucket.arrived.assign(bucket.members.size(), torch::Tensor());
    for (auto member : bucket.members) {
      const auto i = static_cast<std::size_t>(member);
      const auto& parameter = core.parameters[i];
      bucket.averaged.push_back(
          bucket.flat.narrow(0, core.slot_of[i].offset, parameter.numel()).view(parameter.sizes()));
    }
  }
  // Hooks on the gradient accumulators; the accumulators are kept alive so the hooks stay attached.
  for (std::int64_t i = 0; i < count; ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(core.parameters[static_cast<std::size_t>(i)]);
    accumulator->add_post_hook(std::make_unique<Hook>(core_, i));
    accumulators_.push_back(std::move(accumulator));
  }
}

VOLT_INLINE void GradientReducer::prepare_for_backward(bool sync) {
  auto& core = *core_;
  std::lock_guard lock(core.mutex);
  core.sync = sync;
  for (auto& bucket : core.buckets) {
    bucket.pending = static_cast<std::int64_t>(bucket.members.size());
    bucket.launched = false;
    bucket.work.reset();
  }
  core.ready.assign(core.parameters.size(), false);
  core.next_launch = 0;
}

VOLT_INLINE void GradientReducer::finish() {
  auto& core = *core_;
  std::unique_lock lock(core.mutex);
  if (!core.sync) return;
  for (std::size_t b = core.next_launch; b < core.buckets.size(); ++b) {
    if (!core.buckets[b].launched) core.launch_missing(b);
  }
  core.next_launch = core.buckets.size();
  for (auto& bucket : core.buckets) {
    if (bucket.work) core.group->wait(*bucket.work);
  }
  auto& destinations = core.copy_destinations;
  auto& sources = core.copy_sources;
  for (auto& bucket : core.buckets) {
    destinations.clear();
    sources.clear();
    for (std::size_t m = 0; m < bucket.members.size(); ++m) {
      auto& parameter = core.parameters[static_cast<std::size_t>(bucket.members[m])];
      if (parameter.grad().defined()) {
        destinations.push_back(parameter.mutable_grad());
        sources.push_back(bucket.averaged[m]);
      } else {
        parameter.mutable_grad() = bucket.averaged[m].clone();
      }
    }
    compat::foreach_copy_(destinations, sources);
    bucket.work.reset();
  }
  destinations.clear();  // no reference to the gradients past this step
  sources.clear();
  core.sync = false;
}

VOLT_INLINE std::vector<std::vector<std::int64_t>> GradientReducer::bucket_members() const {
  std::vector<std::vector<std::int64_t>> result;
  for (const auto& bucket : core_->buckets) result.push_back(bucket.members);
  return result;
}

VOLT_INLINE void GradientReducer::Core::note_gradient(std::size_t i) {
  const auto& slot = slot_of[i];
  const auto& grad = parameters[i].grad();
  // reshape is a view for a contiguous gradient (no kernel); a strided one is copied.
  buckets[static_cast<std::size_t>(slot.bucket)].arrived[static_cast<std::size_t>(slot.index)] =
      grad.defined() ? grad.reshape({-1}) : torch::Tensor();
  ready[i] = true;
}

/// Fills the bucket from the gradients noted, averages it and starts its all-reduce.
VOLT_INLINE void GradientReducer::Core::launch(std::size_t b) {
  auto& bucket = buckets[b];
  bool complete = true;
  for (const auto& gradient : bucket.arrived) complete = complete && gradient.defined();
  if (complete) {
    at::cat_out(bucket.flat, bucket.arrived);  // one kernel for the whole bucket
  } else {
    for (std::size_t m = 0; m < bucket.members.size(); ++m) {
      auto slice = bucket.averaged[m].view({-1});
      if (bucket.arrived[m].defined()) {
        slice.copy_(bucket.arrived[m]);
      } else {
        slice.zero_();
      }
    }
  }
  for (auto& gradient : bucket.arrived) gradient = torch::Tensor();  // no reference past this step
  if (group->averages_in_collective()) {
    bucket.work = group->all_reduce_async(bucket.collective, ReduceOp::mean);
  } else {
    bucket.flat.div_(group->size());
    bucket.work = group->all_reduce_async(bucket.collective);
  }
  bucket.launched = true;
}

VOLT_INLINE void GradientReducer::Core::launch_missing(std::size_t b) {
  for (auto member : buckets[b].members) {
    const auto i = static_cast<std::size_t>(member);
    if (!ready[i]) note_gradient(i);
  }
  launch(b);
}

VOLT_INLINE void GradientReducer::Core::on_gradient(std::int64_t index) {
  std::lock_guard lock(mutex);
  if (!sync) return;
  const auto i = static_cast<std::size_t>(index);
  if (ready[i]) return;
  note_gradient(i);
  --buckets[static_cast<std::size_t>(slot_of[i].bucket)].pending;
  // Buckets start in index order on every rank, so the ranks' collectives pair up.
  while (next_launch < buckets.size() && buckets[next_launch].pending == 0) {
    if (!buckets[next_launch].launched) launch(next_launch);
    ++next_launch;
  }
}

VOLT_INLINE torch::autograd::variable_list GradientReducer::Hook::operator()(
    const torch::autograd::variable_list& outputs, const torch::autograd::variable_list& /*inputs*/) {
  if (auto core = core_.lock(); core && core->alive.load()) core->on_gradient(index_);
  return outputs;
}

}  // namespace volt::detail

#endif
