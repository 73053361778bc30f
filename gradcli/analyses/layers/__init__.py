"""Check a Keras model (or a network of tf.Modules) layer by layer: where in a
large network a gradient is wrong.

A full check costs one finite difference per weight and a fast check gives one
verdict for the whole model. This pass runs the model once, captures what
reaches each layer, and checks every layer *locally*: its output as a function
of its floating inputs and its trainable weights, at the captured activations,
by the rules of ``analyses.check`` (both autodiff modes, the same step rule,
verdict rules and power). A layer that fails is named with its class, its path
in the model and the line of its ``call``; its pairs name the weight or input
element and the op (or ``tf.custom_gradient``) at fault.

Which layers (``layer_units``): the model tree is walked from the root through
every ``keras.Model`` (functional, Sequential, subclassed, nested models); every
layer that is not a model is one unit and is checked whole, its sublayers with
it (``MultiHeadAttention`` with its projections, a user's residual block with
its ops). Ops a model applies between its layers (a functional ``x + y``, a
subclassed model's own arithmetic) belong to no unit: the whole-model check
covers them. A network of ``tf.Module`` objects (a model function of the model file's
module-level tf.Modules, or one of them as the model: ``ModuleTree``) has no
model/layer distinction, so every module under a module-level one is a unit,
a container (a residual block) as well as the modules inside it, each checked
whole: a wrong custom gradient fails its own module and every container
holding it, the innermost listed first, and a container's own arithmetic
between its modules is checked in the container's row. A module-level
tf.Module that holds no other is a unit itself, unless it is the model. A
layer called more than once (a shared layer) is checked at
*every* call site, since each call sees other activations (a gradient wrong on
part of the input range may be hit at one site only); the rows say which call.

How activations are captured (``capture``): ``keras.layers.Layer.__call__`` is
wrapped for the duration of one forward pass of ``Model.function`` (the float64
clone the check runs) and, to pair each unit with the user's own layer, one of
``Model.own_call`` (the user's model in its own dtypes). The wrapper records
the arguments of every unit's call (outermost only), the values its variables
hold in that call, and its outputs. In a float64 check every floating tensor
of a record is then cast to float64 (``capture.in_dtype``): a unit is checked
in one dtype, whatever reached it (what a layer receives is recorded before
``Layer.__call__`` casts it, and its local function calls ``call`` itself).

A tf.Module unit is recorded by wrapping its class's ``__call__`` (every call
of a unit, containers' and the modules' inside them); its local function runs
the Python body of that ``__call__`` (a ``tf.function`` one too) with the
unit's weights substituted as the whole model's are (``model.variables``:
the variables' attributes replaced by the checked tensors), its own call is
the module object called as the user calls it, on its own variables, and it
has no trace shared with other units (no stateless call): each goes to
``check_model``.

The local function and the proof that it is the layer's own: the unit's
float64 clone is called with ``stateless_call(weights, frozen, *args,
**kwargs)``: the captured arguments with the floating tensors replaced by the
checked values (a mask, a ``training`` flag stay as captured; a mask
``Layer.__call__`` fills in from its input's Keras mask is captured with
them, ``capture.with_input_masks``, and the Keras mask each argument carried
is set on the checked value again, ``traces.with_masks``: Keras'
MultiHeadAttention reads the query's there). Its output is
contracted with a fixed random cotangent c (a standard normal draw scaled to
unit norm, seeded by the check's seed and the call's position): the checked
function is the scalar
<c, layer(x, w)>, whose gradient is J^T c, exactly what backpropagation
through the layer computes for an upstream gradient c. An element of J that
is wrong moves J^T c unless c is orthogonal to its error (probability zero);
a scalar keeps each full check to 2 n evaluations with no dense output
block, and puts exact zeros (a key bias inside attention, to which softmax is
invariant) in the same position as in the loss of the whole model. Unit norm
makes <c, y> the size of one output element, as a loss averaged over its
elements is, so the check's absolute tolerance means what it means for a loss
rather than shrinking against a sum that grows with the layer's width
(round-off in the numeric derivative of an exact zero grows with |<c, y>|).
An output element beyond 1024 times the median magnitude of the unit's
outputs (a mask folded in as -1e9) has its entry of c scaled down to that
size before the normalisation (``local.outlier_weights``): its round-off
would set the scalar's alone. A Keras mask the unit emits (``Masking``, a
``compute_mask`` that reads the input) is one of its outputs, read by the
layers after it: it enters the scalar as its 0/1 values with entries of c of
its own (``traces.contracted``), so a step that flips it is a jump of the
unit, as of the whole model.
The user's own
call for ``verdicts.same_function`` is the original layer object called with
the same arguments (``layer(*args, **kwargs)``), with a tape on its variables:
a local function that is not the layer's own call fails the layer.

Cost: one trace per signature, one call per unit. Tracing, not arithmetic,
is what a layer's check costs at these sizes (0.5-2 s per layer through
``check_model``, which traces its own functions for every layer). A unit's
*signature* (``signature``) is its layer's class and configuration (the name
aside), the structure of its call's arguments with their shapes and dtypes
(the values of those that are not floating tensors), and the shapes and dtypes
of its weights and outputs; for a layer without weights (an activation, an
add, a pooling) the ranks of its tensors instead of their shapes, its trace
leaving the other dimensions open after the second shape
(``reduce_retracing``). Calls of one signature compute the same function of
(inputs, weights, frozen weights, cotangents), so they share one ``Traced``:
the float64 clone of the first such layer, called by ``stateless_call`` with
every one of these as an argument of a ``tf.function``. The repeated blocks of
a ResNet-50 (176 layer calls) come to about 40 signatures, the blocks of a
Transformer stack to one each of attention, norm, dense and add.

The quick check (``quick_check``) of a unit checked by projections runs
``check.FastCheck``'s draws, its ``project`` rule (``compare_projections``,
``detectable_error``) and its forward-mode rule (``forward_wrong``), with every
product of the unit taken in two calls of its signature's traces
(``Traced.probe``): one of the
finite-difference points of all its inputs and probes (``numerics.finite_diff``
plans them, step rule and Richardson unchanged, ``BatchedDifferences``; one
point an iteration, or, for a signature whose points one by one are predicted
to take over ``plan.BATCHED_MIN_SECONDS``, one input's points at a time in
batches, ``traces.batched_points``, where what the moved input does not reach
is computed once a batch), and one of the P
VJPs (one forward pass, P backward passes) and the P JVPs along the joint
tangents (forward mode traced op by op, as eagerly). The points' program
is made once and serves every plan (``Traced.points``). Every unit draws from
the check's seed, so units of one shape draw the same numbers: the pass keeps
the last unit's draws and their tensors for the next (``Draws``). Then
``verdicts.same_function.prove`` compares that traced function with the
user's own layer object, called eagerly: a shared trace that computed another
function (state the configuration does not show) is caught there. The quick
check settles a unit only when every pair passes (or is a confirmed ``zero``,
reported without the graph site that cuts it) and the proof finds no other
function. A pair ``inconclusive`` at the default step (finite differences too
noisy to judge: an attention key's bias, whose derivative is exactly 0, in a
unit of large outputs) gets ``FastCheck.run``'s round-off retry, each larger
step's points taken in one call of the points alone (``Traced.points``). A
unit whose pairs all pass (or are confirmed zeros) but some still
inconclusive keeps those verdicts, and ``check_model`` checks only the inconclusive inputs, on the
unit's own eager call (the round-off retry, then element by element), proved
over every input (alone, an input whose gradient is round-off gives the proof
no scale). Everything else goes to ``check_model`` on the unit's own eager
call, which traces it for itself: a failing pair (named elements, the culprit
and Taylor test), a proof that differs, a layer whose function cannot be
traced in a loop (a ``tf.custom_gradient`` taking a Python flag), and a
signature whose forward path holds a floating tensor coarser than the point
(``Traced.computes_below``: then the precision rule of ``check_model`` sets
the tolerances). A pass is therefore never weaker than ``check_model``'s, and
a failure is reported by ``check_model`` itself.

The tie rule (``at_broken_ties``): the captured activations of a real
network hold exact ties (the zeros a relu makes, met again in a max-pool
window), and a max over tied elements is non-smooth in several elements at
once. ``diagnose.refine``'s kink test bounds the analytic value by the
one-sided slopes along one element, which is a subgradient's bound only when
that element is non-smooth on its own: at a tie of several, a valid subgradient
(the gradient of one active piece: the first maximum of each window) can lie
outside it. A unit whose only failures are such kinks, each at an input
element whose value another element of that input holds exactly, is checked again with its
floating inputs x moved off the ties by ``TIE_BREAK`` max(1, |x|) times a
standard normal draw (weights unchanged), where it is
differentiable: through its signature's trace when it is checked by
projections (``quick_check``), by ``check_model`` when it is checked in full
or the projections do not settle it. It passes there: the kink is earned (a gap between the slopes,
a non-smooth op on the path, a right gradient at the nearby points where the
layer is smooth) and the row is ``kink``, not a failure, with a note. It fails
there: the row shows that check's failure.

Mode of a unit (``unit_mode``): ``full`` (every element of the gradient) when
it has at most ``FULL_ELEMENTS`` differentiated elements (about the cost of one
traced batch of differences); else ``fast``: ``CheckOptions.probes`` random
projections, whose power (the smallest single-element error seen with 95%
probability, ``compare.detectable_error``) is reported per layer.

Memory (``require_layer_memory``): before any activation is held, a first forward
pass records only shapes; the predicted peak is the captured activations
(inputs and outputs of every unit, float64) plus the largest unit's working
set (its gradient blocks and the evaluated outputs in full mode, each counted
``gradcli.memory.COPIES`` times; ``FAST_COPIES`` copies of its inputs and
outputs per probe in fast mode, a count of copies measured as such).
Beyond the limit the pass stops with a usage error naming the cheaper routes.

Progress and the estimate: ``gradcli.progress.report("layers", done, total,
label)`` after each unit; before the first, the pass is estimated
(``plan``) from the shape pass at ``SECONDS_PER_SIGNATURE`` per signature
of the fast units, ``SECONDS_PER_UNIT`` per fast unit, ``SECONDS_PER_FULL_UNIT``
per full unit, plus ``FORWARD_MULTIPLE`` forward passes of the model (the
evaluations and products of the local checks sum to a few forward passes),
timed in the shape pass; a unit whose own cost is larger counts that instead:
its quick check's evaluations at its own eager call's seconds in the shape
pass (a transformer layer at BERT-base's width), or its elements (an
embedding table), and a signature's traces at ``TRACE_CALLS`` of its calls
(a batched signature's points and traces by ``plan.BATCHED_POINT_SHARE`` and
``BATCHED_TRACE_CALLS``).
The result's note gives the estimate, the number of traced local functions
and the time taken. The constants come from ``bench/layer_speed.py`` and
keras-hub's BERT-base.

The package: ``units`` (what a unit is, its mode), ``capture`` (recording the
calls), ``plan`` (whether the pass runs, the shape pass, the memory guard and
the estimate), ``traces`` (signatures and their shared traces), ``local``
(a unit's local function as a ``Model``), ``batched`` (the quick check's
batched finite differences), ``quick`` (the quick check), ``moves`` and
``ties`` (the tie rule; its verdict is ``verdicts.ties``'), ``run`` (the pass,
``check_layers``). The pass does not import ``analyses.check``'s orchestration:
the ``check_model`` a unit goes to is passed in by the caller.
"""
