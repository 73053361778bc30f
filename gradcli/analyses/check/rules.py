"""``gradcli check``: compare analytic derivatives with finite differences.

Each (input, output) pair is checked on its own, so errors that cancel when
outputs are summed (what ``tf.gradients`` does by default) still show.

Modes:

* ``full``: the whole Jacobian block, element by element: numeric columns from
  ``FiniteDifferences.along_axes``, analytic blocks from ``autodiff.jacobians``.
* ``fast``: ``probes`` random projections v^T J u per pair: reverse mode
  <u, J^T v> against finite differences along u, and forward mode <v, J u>
  along the joint tangent of all inputs (``FastCheck.forward_failures``). Its
  cost does not grow with the number of elements. A pair failing in reverse
  mode is then checked in full so the report can name elements. TensorFlow's
  forward mode usually differentiates the forward ops of a
  ``tf.custom_gradient`` rather than calling its gradient function, so the modes
  can disagree when a gradient function is not the derivative of its ops; each
  is weighed against the numbers.
* ``auto``: ``full`` when its predicted time fits ``CheckOptions.budget``
  seconds, else ``fast``. The prediction times chunks of first-pass
  differences along the largest input (``FiniteDifferences.predict_axes_seconds``) and
  assumes every element settles in the first pass (a wrong element costs two
  more evaluations); inputs small enough that the whole first pass is one chunk
  per group run full without timing. The report says which mode ran and why.
"""

from gradcli.results import MISMATCH, PASS, ZERO

#: ``keep_blocks``: a failing pair keeps at most this many rows and columns of
#: its blocks, around its worst element: enough to see a pattern in a heat map,
#: small enough for the JSON document.
WINDOW = 64
#: Up to this many differentiated elements (and always in fast mode) one traced
#: batch function perturbs every input at once: tracing costs more than the
#: larger batched copies. Beyond it each input is differenced on its own.
JOINT_LIMIT = 2048
#: auto's lower bound (``choose_mode``): a traced evaluation inside the
#: differences' loop is taken as this many times faster than one eager call of
#: the model, and the bound decides only when over ``CLEARLY_OVER`` budgets, so
#: it chooses fast wrongly only for a model whose real speed-up passes 2,000.
#: Measured (eager call against the timed chunks' rate): keras-hub 2-layer
#: GPT-2 207-350, BERT 249-298, Llama 505-671, past 1,200 once the loop
#: compiles; a 1M-weight Transformer about 40. At 50 (the value before), a
#: 2-layer Llama whose eager call was slow (125 ms rather than 71 ms) ran fast
#: untimed, its full check 6 s. Kept low enough that models of millions of
#: weights still choose fast untimed: the 1M-weight Transformer's bound is
#: 1,200 s at 200, and timing it costs 11 s (a trace and three chunks of 512
#: directions at 6 ms each).
TRACE_SPEEDUP = 200.0
#: ... and a bound this many times over the budget needs no timing.
CLEARLY_OVER = 10.0
#: Random (tangent, cotangent) pairs that check forward mode in a full check: a
#: forward-mode bug lives in a JVP rule, which acts on every direction, so a
#: few probes see it; FD and reverse mode are already at hand, so each probe
#: costs one JVP and no evaluation.
FORWARD_PROBES = 3
#: The eager JVPs of forward mode are taken along the first probe's tangent
#: alone when they equal there, to this many units of round-off (the dtype's
#: eps times their largest element), the JVPs of a linear map the check holds
#: anyway: the full check's reverse-mode Jacobian blocks (J t is their product
#: with t), or the traced JVP where forward mode is also taken inside a trace
#: (a ``tf.custom_gradient`` the user wrote). That map's JVPs along the other
#: tangents then stand for the eager ones (``FullCheck.eager_shown``). Both
#: are linear maps: a difference between them shows along a random tangent
#: with probability 1, where a wrong rule is off by a relative 2^-3 or more
#: (the rule's eager-only tangent of a stop-gradiented op: a whole term), and
#: two ways' round-off (Grappler's rewrites of the trace; reverse mode's sums
#: taken in another order) by a few units. The eager JVPs of a warm check of
#: tanh(x) x with the user's tanh gradient (6 elements) were 28% of its time,
#: and of TensorFlow Probability's bessel_ive (4 elements) 48%.
JVP_SHOWN_EQUAL_ULPS = 2.0**10
#: ... and only where that bound is this many times below the check's rtol.
#: A difference of the two maps that hides along the first tangent (at most
#: the bound) and moves a verdict along another (past rtol) needs their
#: projections' ratio past the margin: for a difference of rank one, a ratio
#: of two standard normals, past 2^20 with probability 6e-7. float64 at its
#: default rtol 1e-6 has the margin (the bound is 2.3e-13); float32 (1.2e-4
#: against 1e-3) and an rtol set below 2.4e-7 do not, and take every eager JVP.
JVP_SHOWN_MARGIN = 2.0**20
#: Forward-mode probes of the joint whole-model check (``JointCheck``): each is
#: a forward pass through the whole network (3 s on a ResNet-50), and the layer
#: pass probes every layer's forward mode 3 times; what is left to the whole
#: model is the ops between layers, and one random direction sees a wrong JVP
#: rule with probability 1 (down to the tolerance, as its power says).
JOINT_FORWARD_PROBES = 1
#: Bytes of joint directions (every input's, per probe) the joint check holds
#: at once (``joint.JointDraws``): each probe of a 109M-weight BERT-base is
#: 0.87 GB in float64, and every probe at once, with the points and gradients
#: taken along them, held 22.7 GB. Under this many bytes a chunk is every
#: probe (one batch of differences for them all, as for any small model).
JOINT_CHUNK_BYTES = 256 * 2**20
#: The joint check's memory guard (``mode.require_joint_memory``), in copies
#: of the model's elements (blocks): per probe of a chunk, its tangents (one
#: block, laid out as the finite differences move the inputs, so never copied
#: for them) and its gradient; and, whatever the chunk, the one point
#: evaluated at a time (its tensor and the call's fresh copy of it) and one
#: more for the moved copies and casts on the way. Measured on keras-hub's
#: GPT2Backbone at GPT-2 small's shapes (124.4M weights in float64, one probe
#: a chunk), run after the layer pass: the joint check's peak was 2.5-2.9 GB
#: over the pass's end, against 5 blocks x 0.995 GB = 5.0 GB predicted.
#: (While the tangents were copied into a block of their own, and again for
#: the second Richardson level, and every point was made before the first
#: was evaluated, the count was 3 per probe and 4 more, and BERT-base's joint
#: check measured 5.95 GB; before the probes were streamed, holding all three
#: took 22.7 GB and grew.)
JOINT_BLOCKS_PER_PROBE = 2
JOINT_BLOCKS_FIXED = 3
#: Chunks of joint directions the round-off retry holds between its step
#: scales (``JointDraws.holding``): its passes take no VJPs, so the block a
#: chunk's gradients took in the first pass (``JOINT_BLOCKS_PER_PROBE``) holds
#: another chunk's directions. Each pass then starts with the chunks held and
#: draws the rest: a wrong GELU inside BERT-base (3 probes of 0.87 GB, a chunk
#: each, inconclusive at every scale) draws 5 chunks in its 3 passes, not 9.
RETRY_HELD_CHUNKS = 2
#: The round-off retry (``FullCheck.retry_larger_step``): an inconclusive pair
#: (every element within tolerance, but an error estimate over a tenth of the
#: derivatives: round-off swamps them) is differenced again at these many
#: times the step, in turn, until it passes; in fast mode its projections, in
#: full mode its elements. Where round-off dominates (an output far larger than
#: its change along the probe: a weight whose gradient is tiny, the expand
#: kernel of an EfficientNet's squeeze-excite block, derivatives of 1e-8
#: against |f| = 0.5), each rung cuts it 16-fold and the Richardson estimate
#: still bounds the truncation it adds. The later rungs are for a derivative
#: that is exactly 0 by an invariance (an attention key's bias, which the
#: softmax ignores) in a function of large outputs, where f does not change
#: along the step at all: tests/models/by_layer_attention_key_bias.py's key
#: bias passes at 256 times the step by projections and at 4096 times element
#: by element (each element's noise is not averaged over others). Only a pass
#: is taken from a rung, and a pass needs differences at two steps that agree
#: (the Richardson estimate small against the derivative), so a wrong
#: derivative never passes here; a mismatch at a step the rule did not choose
#: is not trusted.
ROUNDOFF_RETRY = (16.0, 256.0, 4096.0)
#: A failing fast pair whose element-wise re-check would not fit its input's
#: share of the budget (``RecheckBudget``) is re-checked on a random sample of
#: its elements, at least this many (``FastCheck.sample_within_budget``).
MIN_SAMPLED = 256
#: A sample the floor (``MIN_SAMPLED``) raised above what the input's share of
#: the budget buys is checked in two parts: first the elements the share buys,
#: at least this many; the rest only when those show no element outside
#: tolerance (``FastCheck.sampled_pairs``). The floor is there so that each
#: failing input names elements: once some are named, the share stands. A
#: wrong GELU inside a BERT-base transformer layer fails 9 of its inputs, and
#: at a share of 1.1 s each the floor's 256 elements cost about 7 s an input
#: (two evaluations of the layer, 7 ms each, per element, the failing ones'
#: second pass, and their ladders). An error that touches a twentieth of an
#: input's elements is shown by 64 of them with probability 1 - 0.95**64 =
#: 0.96; one rarer still goes on to the whole sample, whose first pass takes
#: the first part's as it is (not evaluated twice).
SHOWN_FIRST = 64
#: A sample that shows no element outside tolerance leaves the failing
#: projections unexplained (a max pool's few hundred kinks at ties among 41k
#: inputs, which a sample of a tenth can miss): then every element is
#: re-checked when that is predicted within this many times the input's share
#: of the budget (the whole budget when one input fails). The sample's cut
#: is a prediction from timings, which a loaded machine doubles; a verdict
#: must not hang on it where the whole re-check costs a few budgets at most.
UNEXPLAINED_BUDGETS = 4.0
#: The progress stage shown while the joint check (run beside the layer pass)
#: still runs after the pass has ended.
JOINT_STAGE = "whole model along joint directions"
#: Reverse-mode verdicts whose pairs also check forward mode (``forward_failures``).
FORWARD_CHECKED = (PASS, MISMATCH, ZERO)

#: The cotangent rule's seeds, as multiples of the proof's standard normal draw
#: c (``FullCheck.check_cotangent``): c itself (its product is the proof's),
#: and -2c, another scale of the other sign.
COTANGENT_SCALES = (1.0, -2.0)
