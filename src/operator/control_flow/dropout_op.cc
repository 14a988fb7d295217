// gluon_dyn_dropout: MXNet 1.9.1's Dropout while it drops (training), the same
// numbers from the same random states, for float32 on the CPU. MXNet's kernel
// calls the Mersenne twister out of line, through the PLT, for every element and
// keeps a bit mask it reads back and writes one bit at a time: about 6 ns an
// element, 0.2 ms of a (128, 256) array. Here the twister is inlined, an element
// is kept by comparing its 32-bit number with a threshold (the uniform draw grows
// with it) and the mask is a byte an element: a third of the time. The twister's
// state update is written out: libstdc++'s, compiled here, branches on each
// word's low bit, a jump mispredicted half the time (4 ns a word, 1.2 ms for the
// 512 states a (128, 256) array draws from, each renewed after 624 numbers).
//
// The numbers are MXNet's: its LaunchRNG splits the N elements into
// min(ceil(N / 64), 1024) runs of equal length, run k drawing from random state k,
// each element's number a std::uniform_real_distribution<float> draw; an element
// is kept when the number is at most 1 - p, and becomes x * keep / (1 - p).
// Attributes: p, in plain decimal notation ("0.3"), read as MXNet's parameter
// parser (dmlc::ParseFloat) reads it. Outputs: the result and the mask (uint8).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common.h"

namespace gluon_dyn {
namespace {

using mxnet::ext::MXReturnValue;
using mxnet::ext::MXTensor;
using mxnet::ext::MX_FAIL;
using mxnet::ext::MX_SUCCESS;

constexpr char kOpName[] = "gluon_dyn_dropout";
constexpr int64_t kNumbersPerState = 64;   // MXNet's RandGenerator<cpu>::kMinNumRandomPerThread

// std::mt19937 as libstdc++ lays it out (lib_api's mx_cpu_rand_t, MXNet's states):
// its 624 words of 32 bits in 64-bit slots, then the index of the next word to use.
struct Twister {
  uint64_t word[624];
  size_t next;
};
static_assert(sizeof(Twister) == sizeof(std::mt19937), "std::mt19937 is not libstdc++'s");

// mersenne_twister_engine::_M_gen_rand, the low bit's constant taken by a mask.
void Twist(Twister* state) {
  constexpr uint64_t kUpper = ~uint64_t{0} << 31, kLower = ~kUpper, kMatrix = 0x9908b0dfULL;
  uint64_t* word = state->word;
  auto renew = [word](size_t k, size_t after, size_t far) {
    const uint64_t y = (word[k] & kUpper) | (word[after] & kLower);
    word[k] = word[far] ^ (y >> 1) ^ ((uint64_t{0} - (y & 1)) & kMatrix);
  };
  for (size_t k = 0; k < 624 - 397; ++k) renew(k, k + 1, k + 397);
  for (size_t k = 624 - 397; k < 623; ++k) renew(k, k + 1, k + 397 - 624);
  renew(623, 0, 396);
  state->next = 0;
}

// A word tempered as mersenne_twister_engine::operator() returns it.
inline uint64_t Tempered(uint64_t z) {
  z ^= (z >> 11) & 0xffffffffULL;
  z ^= (z << 7) & 0x9d2c5680ULL;
  z ^= (z << 15) & 0xefc60000ULL;
  return z ^ (z >> 18);
}

// std::uniform_real_distribution<float>()(engine) as libstdc++ computes it from
// the engine's number: generate_canonical<float, 24> of one 32-bit number, below 1.
float Uniform(uint64_t number) {
  const float value = static_cast<float>(static_cast<int64_t>(number)) / 4294967296.0f;
  return value >= 1.0f ? std::nextafter(1.0f, 0.0f) : value;
}

// The largest number whose uniform draw is at most `keep`: Uniform never
// decreases as the number grows, so an element is kept exactly when its number is
// at most this (compared as integers, the loop below needs no float conversion).
int64_t LargestKept(float keep) {
  int64_t kept = -1, dropped = int64_t{1} << 32;   // Uniform(kept) <= keep < Uniform(dropped)
  while (dropped - kept > 1) {
    const int64_t middle = kept + (dropped - kept) / 2;
    (Uniform(middle) <= keep ? kept : dropped) = middle;
  }
  return kept;
}

// `count` elements of one run, drawn from `state`: mask and result. With AVX2 where
// the CPU has it (a third faster: the tempering is 64-bit integer work).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx2", "default")))
#endif
void DropRun(Twister* state, int64_t count, uint64_t largest_kept, float scale,
             const float* in, float* out, uint8_t* mask) {
  while (count > 0) {
    if (state->next >= 624) Twist(state);
    const int64_t ready = std::min<int64_t>(count, 624 - state->next);
    const uint64_t* word = state->word + state->next;
    for (int64_t i = 0; i < ready; ++i) {
      const bool kept = Tempered(word[i]) <= largest_kept;
      mask[i] = kept;
      out[i] = kept * in[i] * scale;
    }
    state->next += ready;
    count -= ready;
    in += ready;
    out += ready;
    mask += ready;
  }
}

// dmlc::ParseFloat<float> of "[digits][.digits]": the integer part accumulated in
// float, the fraction as a double quotient rounded once (at most 19 digits read).
bool ParseProbability(const Attrs& attrs, float* p) {
  auto it = attrs.find("p");
  const std::string text = it == attrs.end() ? "0.5" : it->second;
  float value = 0;
  size_t at = 0;
  for (; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at) {
    value = value * 10.0f + (text[at] - '0');
  }
  if (at < text.size() && text[at] == '.') {
    uint64_t fraction = 0, scale = 1;
    int digits = 0;
    for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++digits) {
      if (digits < 19) {
        fraction = fraction * 10 + (text[at] - '0');
        scale *= 10;
      }
    }
    value += static_cast<float>(static_cast<double>(fraction) / static_cast<double>(scale));
  }
  if (text.empty() || at != text.size() || !(value > 0) || value > 1) {
    GLUON_DYN_ERROR << kOpName << ": p must be a decimal in (0, 1], got '" << text << "'";
    return false;
  }
  *p = value;
  return true;
}

MXReturnValue ParseAttrs(const Attrs& attrs, int* num_in, int* num_out) {
  float p = 0;
  if (!ParseProbability(attrs, &p)) return MX_FAIL;
  *num_in = 1;
  *num_out = 2;
  return MX_SUCCESS;
}

MXReturnValue InferType(const Attrs&, std::vector<int>* in_types, std::vector<int>* out_types) {
  if ((*in_types)[0] != mxnet::ext::kFloat32 && (*in_types)[0] >= 0) {
    GLUON_DYN_ERROR << kOpName << ": float32 input only, got dtype code " << (*in_types)[0];
    return MX_FAIL;
  }
  (*out_types)[0] = mxnet::ext::kFloat32;
  (*out_types)[1] = mxnet::ext::kUint8;
  return MX_SUCCESS;
}

MXReturnValue InferShape(const Attrs&, std::vector<std::vector<unsigned int>>* in_shapes,
                         std::vector<std::vector<unsigned int>>* out_shapes) {
  (*out_shapes)[0] = (*in_shapes)[0];
  (*out_shapes)[1] = (*in_shapes)[0];
  return MX_SUCCESS;
}

MXReturnValue Forward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                      std::vector<MXTensor>* outputs, const mxnet::ext::OpResource& resource) {
  float p = 0;
  if (!ParseProbability(attrs, &p)) return MX_FAIL;
  const MXTensor& data = (*inputs)[0];
  const int64_t count = data.size();
  if (count <= 0) return MX_SUCCESS;
  if (!HasStorage((*outputs)[0]) || !HasStorage((*outputs)[1])) {
    GLUON_DYN_ERROR << kOpName << ": the result and the mask need storage";
    return MX_FAIL;
  }
  const float keep = 1.0f - p;
  const float scale = 1.0f / keep;
  const int64_t largest_kept = LargestKept(keep);
  const float* in = static_cast<const float*>(data.data_ptr);
  float* out = (*outputs)[0].data<float>();
  uint8_t* mask = (*outputs)[1].data<uint8_t>();
  Twister* states = reinterpret_cast<Twister*>(resource.get_cpu_rand_states());
  const int64_t runs = std::min<int64_t>((count + kNumbersPerState - 1) / kNumbersPerState,
                                         MX_NUM_CPU_RANDOM_STATES);
  const int64_t length = (count + runs - 1) / runs;
  for (int64_t run = 0; run * length < count; ++run) {
    const int64_t start = run * length;
    DropRun(&states[run], std::min(length, count - start), largest_kept, scale, in + start,
            out + start, mask + start);
  }
  return MX_SUCCESS;
}

// Backward inputs: [the result's gradient, the mask's, the input, the result, the
// mask]; output: the input's gradient, as MXNet's: mask * gradient / (1 - p).
MXReturnValue Backward(const Attrs& attrs, std::vector<MXTensor>* inputs,
                       std::vector<MXTensor>* outputs, const mxnet::ext::OpResource&) {
  float p = 0;
  if (!ParseProbability(attrs, &p)) return MX_FAIL;
  if (inputs->size() != 5 || outputs->size() != 1) {
    GLUON_DYN_ERROR << kOpName << ": backward got " << inputs->size() << " inputs and "
                    << outputs->size() << " outputs";
    return MX_FAIL;
  }
  MXTensor* gradient = &(*outputs)[0];
  if (!HasStorage(*gradient)) return MX_SUCCESS;
  if (!HasStorage((*inputs)[0])) {   // no gradient reached the result
    ZeroTensor(gradient);
    return MX_SUCCESS;
  }
  const float scale = 1.0f / (1.0f - p);
  const float* incoming = (*inputs)[0].data<float>();
  const uint8_t* mask = (*inputs)[4].data<uint8_t>();
  float* result = gradient->data<float>();
  const int64_t count = gradient->size();
  for (int64_t i = 0; i < count; ++i) {
    result[i] = static_cast<bool>(mask[i]) * incoming[i] * scale;
  }
  return MX_SUCCESS;
}

}  // namespace
}  // namespace gluon_dyn

REGISTER_OP(gluon_dyn_dropout)
.setParseAttrs(gluon_dyn::ParseAttrs)
.setInferType(gluon_dyn::InferType)
.setInferShape(gluon_dyn::InferShape)
.setForward(gluon_dyn::Forward, "cpu")
.setBackward(gluon_dyn::Backward, "cpu");
