#pragma once
// The one oneDNN engine and stream of the process, made on first use, shared by the
// convolution (dnnl_conv.cpp) and matmul (dnnl_matmul.cpp) primitives. Include only where
// MIRRORED_WITH_ONEDNN is defined.
#include <dnnl.hpp>

namespace mirrored::kernels::cpu {

struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

inline DnnlContext& dnnl_context() {
  static DnnlContext context;
  return context;
}

}  // namespace mirrored::kernels::cpu
