"""A model's scalar function of its differentiated inputs, flattened together.

f(theta) = sum over chosen outputs o of <c_o, output_o>, where theta is the
``wrt`` inputs flattened and concatenated in order (``blocks`` says which slice
is which input) and the other inputs stay at the model's point. For a scalar
output and the default cotangent 1 this is the output itself.

Every derivative is compiled once per objective with a fixed input signature
(``tf.function``); a model that cannot be traced runs eagerly and ``eager`` is
set so the report can say so.
"""

from __future__ import annotations


import numpy as np

from gradcli.errors import error_line
from gradcli.numerics import autodiff
from gradcli.results.hessian import Block
from gradcli.errors import GradcliError, ModelError, UsageError
from gradcli.model.loading import Model, differentiable, where_raised
from gradcli.tf_import import import_tensorflow

tf = import_tensorflow()


def choose_cotangents(
    model: Model, given: dict[str, np.ndarray], rng: np.random.Generator | None = None
) -> tuple[dict[str, np.ndarray], str]:
    """Cotangents defining the scalar, and a sentence saying how they were chosen.

    Rule: ``given`` (the ``cotangents`` option, OUTPUT=VALUE) names the outputs; otherwise
    the model's single floating output with cotangent ones (with ``rng``: a
    seeded standard normal for a non-scalar output, so a check cannot be fooled
    by errors that cancel in a plain sum). Several floating outputs and no
    choice is a usage error: summing unrelated outputs is rarely meant.
    """
    floating = [o for o, v in model.outputs.items() if differentiable(v)]
    if given:
        result = {}
        for name, value in given.items():
            if name not in model.outputs:
                raise UsageError(
                    f"{{@cotangents}}: unknown output {name!r} (known: {', '.join(model.outputs)})"
                )
            if name not in floating:
                raise UsageError(f"{{@cotangents}}: output {name!r} is not floating-point or has no elements")
            from gradcli.model.values import fit_value

            like = np.zeros(model.outputs[name].shape, model.dtype)
            result[name] = fit_value(value, like, f"{{@cotangents}} {name}")
        return result, "f = " + " + ".join(f"<c_{o}, {o}> (c from {{@cotangents}})" for o in result)
    if not floating:
        raise ModelError(f"{model.name}: no floating-point output with elements to differentiate")
    if len(floating) > 1:
        raise UsageError(
            f"{model.name} has several outputs ({', '.join(floating)}); pick one with "
            "{@cotangents} OUTPUT=VALUE (e.g. OUTPUT=1 for its sum)"
        )
    name = floating[0]
    shape = model.outputs[name].shape
    if not shape:
        return {name: np.ones((), model.dtype)}, f"f = {name} (a scalar output)"
    if rng is None:
        return (
            {name: np.ones(shape, model.dtype)},
            f"f = sum({name}): output {name} has shape {list(shape)}, default cotangent ones",
        )
    return (
        {name: rng.standard_normal(shape).astype(model.dtype)},
        f"f = <c, {name}> with c a seeded standard normal of shape {list(shape)}",
    )


class Objective:
    """The scalar f(theta) of a model; see the module docstring."""

    def __init__(self, model: Model, cotangents: dict[str, np.ndarray], wrt: list[str] | None = None):
        self.model = model
        self.cotangents = cotangents
        self.wrt = list(wrt or model.wrt)
        self.dtype = np.dtype(model.dtype)
        self.blocks: list[Block] = []
        offset = 0
        for name in self.wrt:
            shape = tuple(model.point[name].shape)
            size = int(np.prod(shape, dtype=np.int64))
            self.blocks.append(Block(name, shape, offset, size))
            offset += size
        self.n = offset
        self.theta0 = self.flatten(model.point)
        self.eager = False
        self._compiled: dict = {}
        self._constants = {n: tf.constant(v) for n, v in model.point.items() if n not in self.wrt}

    # -- numpy <-> named values -----------------------------------------------

    def flatten(self, values: dict) -> np.ndarray:
        return np.concatenate(
            [np.asarray(values[b.name], self.dtype).reshape(-1) for b in self.blocks]
        ) if self.blocks else np.zeros(0, self.dtype)

    def values(self, theta: np.ndarray) -> dict[str, np.ndarray]:
        """The wrt inputs at ``theta`` (named, in their shapes)."""
        return {
            b.name: np.asarray(theta[b.offset : b.offset + b.size]).reshape(b.shape)
            for b in self.blocks
        }

    def labels(self) -> list[str]:
        return [b.label(i) for b in self.blocks for i in range(b.size)]

    # -- the scalar, as tensors -----------------------------------------------

    def scalar_of_values(self, values: dict):
        outputs = self.model.function(autodiff.fresh(values))  # each call its own tensors
        total = tf.constant(0.0, self.dtype)
        for name, c in self.cotangents.items():
            y = tf.cast(outputs[name], self.dtype)
            total += tf.reduce_sum(tf.constant(c) * y)
        return total

    def scalar_of_theta(self, theta):
        values = dict(self._constants)
        for b in self.blocks:
            values[b.name] = tf.reshape(theta[b.offset : b.offset + b.size], b.shape)
        return self.scalar_of_values(values)

    def gradient_outputs(self, function_name: str = "f"):
        """A model-style function (dict of tensors -> dict of tensors) giving the
        gradient blocks ``d{function_name}/d{name}``: what finite differences
        difference to check the Hessian."""
        names = self.wrt

        def function(values: dict) -> dict:
            watched = [values[n] for n in names]
            with tf.GradientTape() as tape:
                tape.watch(watched)
                y = self.scalar_of_values(values)
            grads = autodiff.reverse(tape, y, watched, zeros=True)
            return {gradient_name(function_name, n): g for n, g in zip(names, grads)}

        return function

    # -- compiled numpy entry points -------------------------------------------

    def value(self, theta) -> float:
        return float(self._call("value", self.scalar_of_theta, theta))

    def gradient(self, theta) -> np.ndarray:
        return np.asarray(
            self._call("gradient", lambda t: autodiff.gradient_of(self.scalar_of_theta, t), theta)
        )

    def hvp(self, theta, v, mode: str = "forward") -> np.ndarray:
        """H v at theta; ``mode`` "forward" (forward-over-reverse) or "reverse"."""
        rule = HVP_RULES[mode]
        return np.asarray(
            self._call(f"hvp-{mode}", lambda t, u: rule(self.scalar_of_theta, t, u), theta, v)
        )

    def hvps(self, theta, vectors: np.ndarray, mode: str = "forward") -> np.ndarray:
        """H v for each row of ``vectors`` ([k, n] -> [k, n]), in one traced
        function: a ``tf.map_fn`` over the rows, as the traced JVPs take theirs
        (``autodiff.jvp_rows``), traced once whatever k is. ``tf.vectorized_map``
        ran each row's ops batched but cost far more to trace than the rows
        cost to run, up to the dense Hessian's n (hessian.DENSE_LIMIT): in
        process after a first command, ``gradcli hessian`` of tanh_net.py
        1.72 -> 1.06 s, keras_mlp.py (70 products) 5.38 -> 2.73 s, a 10-20-5
        MLP (300) 4.47 -> 1.57 s, a 20-40-20 MLP (1,640) 6.61 -> 4.42 s."""
        vectors = np.asarray(vectors, self.dtype).reshape(-1, self.n)
        rule = HVP_RULES[mode]
        if not self.eager and len(vectors):
            row = tf.TensorSpec([self.n], self.dtype)

            def rows(t, us, rule=rule):
                return tf.map_fn(lambda u: rule(self.scalar_of_theta, t, u), us, fn_output_signature=row)

            try:
                return np.asarray(self._compiled_fn(f"hvps-{mode}", rows)(
                    tf.constant(theta, self.dtype), tf.constant(vectors)
                ))
            except Exception:  # not traceable
                self.eager = True
        rows = [self.hvp(theta, u, mode) for u in vectors]
        return np.stack(rows) if rows else np.zeros((0, self.n), self.dtype)

    def dense_hessian(self, theta, mode: str = "forward") -> np.ndarray:
        """Column j is H e_j, by batched Hessian-vector products (H is not symmetrised)."""
        eye = np.eye(self.n, dtype=self.dtype)
        return self.hvps(theta, eye, mode).T

    def values_along(self, theta, direction, ts) -> np.ndarray:
        """f(theta + t * direction) for each t (a 1-D slice)."""
        return np.array([self.value(theta + t * direction) for t in ts])

    def _compiled_fn(self, key, fn):
        if key not in self._compiled:
            self._compiled[key] = tf.function(fn, autograph=False, reduce_retracing=True)
        return self._compiled[key]

    def _call(self, key, fn, *arrays):
        tensors = [tf.constant(np.asarray(a, self.dtype)) for a in arrays]
        if not self.eager:
            try:
                return self._compiled_fn(key, fn)(*tensors)
            except Exception:
                self.eager = True
        try:
            return fn(*tensors)
        except GradcliError:  # already says where (the model's own error)
            raise
        except Exception as exc:
            raise ModelError(
                f"{where_raised(exc, self.model.path)}: differentiating the model raised "
                f"{type(exc).__name__}: {error_line(exc)}"
            ) from None


HVP_RULES = {
    "forward": autodiff.hvp_forward_over_reverse,
    "reverse": autodiff.hvp_reverse_over_reverse,
}


def gradient_name(function_name: str, input_name: str) -> str:
    """``df/dw``: the name of a gradient block as an 'output' of the gradient function."""
    return f"d{function_name}/d{input_name}"


