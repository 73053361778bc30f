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
  seconds, else ``fast``. The prediction times one chunk of first-pass
  differences per input group (``FiniteDifferences.predict_axes_seconds``) and
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
#: differences' loop is at most this many times faster than one eager call of
#: the model (eager overhead is about a millisecond per call; the smallest
#: models evaluate in tens of microseconds traced)...
TRACE_SPEEDUP = 50.0
#: ... and a bound this many times over the budget needs no timing.
CLEARLY_OVER = 10.0
#: Random (tangent, cotangent) pairs that check forward mode in a full check: a
#: forward-mode bug lives in a JVP rule, which acts on every direction, so a
#: few probes see it; FD and reverse mode are already at hand, so each probe
#: costs one JVP and no evaluation.
FORWARD_PROBES = 3
#: Forward-mode probes of the joint whole-model check (``JointCheck``): each is
#: a forward pass through the whole network (3 s on a ResNet-50), and the layer
#: pass probes every layer's forward mode 3 times; what is left to the whole
#: model is the ops between layers, and one random direction sees a wrong JVP
#: rule with probability 1 (down to the tolerance, as its power says).
JOINT_FORWARD_PROBES = 1
#: Fast mode's round-off retry (``FastCheck.retry_larger_step``): an
#: inconclusive projection (error estimate over a tenth of the derivatives) is
#: differenced again at this many times the step. Where round-off dominates
#: (an output far larger than its change along the probe: a weight whose
#: gradient is tiny, the expand kernel of an EfficientNet's squeeze-excite
#: block, derivatives of 1e-8 against |f| = 0.5), the retry cuts it 16-fold and
#: the Richardson estimate still bounds the truncation it adds.
ROUNDOFF_RETRY = 16.0
#: A failing fast pair whose element-wise re-check would not fit the budget is
#: re-checked on a random sample of its elements, at least this many
#: (``FastCheck.sample_within_budget``).
MIN_SAMPLED = 256
#: A sample that shows no element outside tolerance leaves the failing
#: projections unexplained (a max pool's few hundred kinks at ties among 41k
#: inputs, which a sample of a tenth can miss): then every element is
#: re-checked when that is predicted within this many budgets. The sample's cut
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
