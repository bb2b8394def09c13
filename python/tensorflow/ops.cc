// The ops chorus.tensorflow calls (python/chorus/tensorflow/_ops.py): their
// inputs, attributes and shapes. Every op is stateful, so that inside a
// tf.function TensorFlow's automatic control dependencies keep them in
// program order: chorus needs every rank to issue its collectives in the
// same order, and an unordered graph could run two of them either way round.
// `context` is the handle of the Context they run on (context_registry.h).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Every type chorus reduces; the ops that only move bytes add bool.
#define CHORUS_REDUCIBLE_TYPES "int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double"
#define CHORUS_MOVABLE_TYPES CHORUS_REDUCIBLE_TYPES ", bool"

// The input's shape with an unknown first dimension: how many rows arrive
// depends on the other ranks.
absl::Status rows_from_peers(InferenceContext* context) {
  ShapeHandle input = context->input(0);
  if (!context->RankKnown(input)) {
    context->set_output(0, context->UnknownShape());
    return absl::OkStatus();
  }
  ShapeHandle shape;
  TF_RETURN_IF_ERROR(context->WithRankAtLeast(input, 1, &shape));
  TF_RETURN_IF_ERROR(context->ReplaceDim(shape, 0, context->UnknownDim(), &shape));
  context->set_output(0, shape);
  return absl::OkStatus();
}

}  // namespace

// An op that reduces with chorus's ReduceOp named by reduce_op.
#define CHORUS_REDUCING_OP(name, shape_function)                            \
  REGISTER_OP(name)                                                         \
      .Input("tensor: T")                                                   \
      .Output("reduced: T")                                                 \
      .Attr("T: {" CHORUS_REDUCIBLE_TYPES "}")                              \
      .Attr("reduce_op: {'sum', 'prod', 'min', 'max', 'avg', 'band', 'bor', 'bxor'}") \
      .Attr("context: int")                                                 \
      .SetIsStateful()                                                      \
      .SetShapeFn(shape_function)

CHORUS_REDUCING_OP("ChorusAllreduce", ::tensorflow::shape_inference::UnchangedShape);

REGISTER_OP("ChorusBroadcast")
    .Input("tensor: T")
    .Output("broadcast: T")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .Attr("root_rank: int")
    .Attr("context: int")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

// Ranks may contribute different first dimensions; the others must match.
REGISTER_OP("ChorusAllgather")
    .Input("tensor: T")
    .Output("gathered: T")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .Attr("context: int")
    .SetIsStateful()
    .SetShapeFn(rows_from_peers);

// The first dimension is split as Horovod splits it: every rank gets
// rows / size, the first rows % size ranks one more.
CHORUS_REDUCING_OP("ChorusReducescatter", rows_from_peers);

// splits[p] rows go to rank p; an empty splits sends rows / size to each.
// received_splits[p]: the rows that came from rank p.
REGISTER_OP("ChorusAlltoall")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("received: T")
    .Output("received_splits: int32")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .Attr("context: int")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* context) {
      TF_RETURN_IF_ERROR(rows_from_peers(context));
      context->set_output(1, context->Vector(context->UnknownDim()));
      return absl::OkStatus();
    });
