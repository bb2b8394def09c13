// The ops chorus.tensorflow calls (python/chorus/tensorflow/_ops.py): their
// inputs, attributes and shapes.
//
// Every op's call is matched with the other ranks' by the Context's
// Negotiator (adapters/negotiation/negotiator.h) before data moves:
// `match_by_name` false (eager execution and tf.function, where every
// rank issues the ops in program order) matches by position, checking
// that names agree; true (TensorFlow 1 graphs, whose independent ops run
// in any order) matches by `tensor_name`, which chorus.tensorflow makes
// unique in the graph (and checks in program order). Every op is stateful, so that inside a
// tf.function TensorFlow's automatic control dependencies keep them in
// program order, and no graph optimization merges two of them.
// `context` is the handle of the Context they run on (context_registry.h).
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// Every type chorus reduces. The ops that only move data move any of
// these, as bytes.
#define CHORUS_REDUCIBLE_TYPES "int8, uint8, int32, uint32, int64, uint64, half, bfloat16, float, double"
#define CHORUS_MOVABLE_TYPES CHORUS_REDUCIBLE_TYPES ", int16, uint16, complex64, complex128, bool"

// The input's shape with an unknown first dimension: how many rows arrive
// depends on the other ranks.
absl::Status rows_from_peers_of(InferenceContext* context, int input, int output) {
  ShapeHandle shape = context->input(input);
  if (!context->RankKnown(shape)) {
    context->set_output(output, context->UnknownShape());
    return absl::OkStatus();
  }
  TF_RETURN_IF_ERROR(context->WithRankAtLeast(shape, 1, &shape));
  TF_RETURN_IF_ERROR(context->ReplaceDim(shape, 0, context->UnknownDim(), &shape));
  context->set_output(output, shape);
  return absl::OkStatus();
}

absl::Status rows_from_peers(InferenceContext* context) { return rows_from_peers_of(context, 0, 0); }

absl::Status each_rows_from_peers(InferenceContext* context) {
  for (int index = 0; index < context->num_inputs(); ++index) {
    TF_RETURN_IF_ERROR(rows_from_peers_of(context, index, index));
  }
  return absl::OkStatus();
}

absl::Status each_unchanged(InferenceContext* context) {
  for (int index = 0; index < context->num_inputs(); ++index) context->set_output(index, context->input(index));
  return absl::OkStatus();
}

}  // namespace

#define CHORUS_MATCHING_ATTRS                    \
  Attr("tensor_name: string = ''")               \
      .Attr("match_by_name: bool = false")       \
      .Attr("context: int")

// An op that reduces with chorus's ReduceOp named by reduce_op ('avg' is
// Horovod's Average: a sum with the postscale divided by the ranks), with
// Horovod's prescale and postscale factors (scaling.h).
#define CHORUS_REDUCING_ATTRS                                                          \
  Attr("reduce_op: {'sum', 'prod', 'min', 'max', 'avg', 'band', 'bor', 'bxor'}")     \
      .Attr("prescale_factor: float = 1.0")                                            \
      .Attr("postscale_factor: float = 1.0")                                           \
      .CHORUS_MATCHING_ATTRS

REGISTER_OP("ChorusAllreduce")
    .Input("tensor: T")
    .Output("reduced: T")
    .Attr("T: {" CHORUS_REDUCIBLE_TYPES "}")
    .CHORUS_REDUCING_ATTRS
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

// N tensors of one type, each allreduced, as one collective.
REGISTER_OP("ChorusGroupedAllreduce")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .Attr("T: {" CHORUS_REDUCIBLE_TYPES "}")
    .Attr("N: int >= 1")
    .CHORUS_REDUCING_ATTRS
    .SetIsStateful()
    .SetShapeFn(each_unchanged);

REGISTER_OP("ChorusBroadcast")
    .Input("tensor: T")
    .Output("broadcast: T")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .Attr("root_rank: int")
    .CHORUS_MATCHING_ATTRS
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::UnchangedShape);

// Ranks may contribute different first dimensions; the others must match.
REGISTER_OP("ChorusAllgather")
    .Input("tensor: T")
    .Output("gathered: T")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .CHORUS_MATCHING_ATTRS
    .SetIsStateful()
    .SetShapeFn(rows_from_peers);

REGISTER_OP("ChorusGroupedAllgather")
    .Input("tensors: N * T")
    .Output("gathered: N * T")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .Attr("N: int >= 1")
    .CHORUS_MATCHING_ATTRS
    .SetIsStateful()
    .SetShapeFn(each_rows_from_peers);

// The first dimension is split as Horovod splits it: every rank gets
// rows / size, the first rows % size ranks one more.
REGISTER_OP("ChorusReducescatter")
    .Input("tensor: T")
    .Output("reduced: T")
    .Attr("T: {" CHORUS_REDUCIBLE_TYPES "}")
    .CHORUS_REDUCING_ATTRS
    .SetIsStateful()
    .SetShapeFn(rows_from_peers);

REGISTER_OP("ChorusGroupedReducescatter")
    .Input("tensors: N * T")
    .Output("reduced: N * T")
    .Attr("T: {" CHORUS_REDUCIBLE_TYPES "}")
    .Attr("N: int >= 1")
    .CHORUS_REDUCING_ATTRS
    .SetIsStateful()
    .SetShapeFn(each_rows_from_peers);

// splits[p] rows go to rank p; an empty splits sends rows / size to each.
// received_splits[p]: the rows that came from rank p.
REGISTER_OP("ChorusAlltoall")
    .Input("tensor: T")
    .Input("splits: int32")
    .Output("received: T")
    .Output("received_splits: int32")
    .Attr("T: {" CHORUS_MOVABLE_TYPES "}")
    .CHORUS_MATCHING_ATTRS
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* context) {
      TF_RETURN_IF_ERROR(rows_from_peers(context));
      context->set_output(1, context->Vector(context->UnknownDim()));
      return absl::OkStatus();
    });

// What a rank asks about the job, at run time (Horovod's rank_op and
// friends): `which` is 'rank', 'size', 'local_rank' or 'local_size'.
REGISTER_OP("ChorusJobValue")
    .Output("value: int32")
    .Attr("which: {'rank', 'size', 'local_rank', 'local_size'}")
    .Attr("context: int")
    .SetIsStateful()
    .SetShapeFn(::tensorflow::shape_inference::ScalarShape);
