// The float64 reference twins of the op table (native/ops/ops.h): every `template <class T> void
// run(const ops::X<T>&)` overload, one header per op family. An op without one here runs in
// float32 only (a Float64Array argument is then an invalid argument).
#pragma once

#include "activation.h"
#include "attention.h"
#include "elementwise.h"
#include "embedding.h"
#include "feedforward.h"
#include "finite.h"
#include "layernorm.h"
#include "linear.h"
#include "logits.h"
#include "loss.h"
#include "optim.h"
#include "packed.h"
#include "patch_embed.h"
