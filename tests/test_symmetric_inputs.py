"""Inputs an op reads as a symmetric matrix (``verdicts.symmetric``).

Truth: d logdet(A) along a symmetric S is tr(A^-1 S) (closed form), and
``tf.linalg.cholesky`` computes from A's lower triangle alone (numpy's
factor of the symmetric matrix that triangle makes). TensorFlow's gradient
is the symmetric one, so it is right along E_ij + E_ji and not along one
off-diagonal entry: the premise is checked here too, against those truths.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import check_json, fixture, line_of, pairs

SYMMETRIC = fixture("symmetric_cholesky.py")


def test_tensorflows_cholesky_gradient_is_the_derivative_along_symmetric_directions_only():
    import tensorflow as tf

    rng = np.random.default_rng(3)
    m = rng.standard_normal((3, 3))
    A = m @ m.T + 3.0 * np.eye(3)
    x = tf.constant(A)
    with tf.GradientTape() as tape:
        tape.watch(x)
        logdet = 2.0 * tf.reduce_sum(tf.math.log(tf.linalg.diag_part(tf.linalg.cholesky(x))))
    gradient = tape.gradient(logdet, x).numpy()
    inverse = np.linalg.inv(A)
    for i, j in [(0, 0), (1, 0), (2, 0), (2, 1)]:
        S = np.zeros((3, 3))
        S[i, j] = S[j, i] = 1.0
        assert np.sum(gradient * S) == pytest.approx(np.trace(inverse @ S), rel=1e-12)
    # along one entry of the lower triangle the function moves as along S (its
    # upper triangle is not read), where the symmetric gradient gives half of that
    lower = lambda B: np.tril(B) + np.tril(B, -1).T  # noqa: E731 - the matrix Cholesky reads
    h, E = 1e-6, np.zeros((3, 3))
    E[2, 0] = 1.0
    central = (np.linalg.slogdet(lower(A + h * E))[1] - np.linalg.slogdet(lower(A - h * E))[1]) / (2 * h)
    assert central == pytest.approx(2 * inverse[2, 0], rel=1e-6)
    assert gradient[2, 0] == pytest.approx(inverse[2, 0], rel=1e-12)


def test_an_input_read_by_a_cholesky_passes_along_its_symmetric_directions():
    """Two 3x3 covariances: 6 symmetric directions each, 12 compared per
    output element; the warning names the Cholesky by its line and says what
    was compared. Element by element, every off-diagonal element failed
    (finite differences see a lower one count twice, an upper one not at all)."""
    run, document = check_json(SYMMETRIC)
    assert run.exit_code == 0, run
    line = line_of(SYMMETRIC, "tf.linalg.cholesky(A)")
    for output in ("L", "logdet"):
        pair = pairs(document)[("A", output)]
        assert pair["verdict"] == "pass" and pair["compared"] == 12 * (18 if output == "L" else 2), pair
        assert pair["max_rel_error"] < 1e-6
        (warning,) = [w for w in pair["warnings"] if "symmetric" in w]
        assert f"Cholesky (tf.linalg.cholesky) at tests/models/symmetric_cholesky.py:{line}: " in warning
        assert "compared along the 12 directions of A that move that matrix symmetrically" in warning


def test_an_input_reshaped_into_the_matrix_is_compared_along_the_preimage_of_the_symmetric_ones():
    """A covariance given as its 9 entries, reshaped: 6 directions of p move
    the matrix symmetrically. Element by element it failed, and the culprit
    search named the Reshape."""
    path = fixture("symmetric_cholesky_flat.py")
    run, document = check_json(path)
    assert run.exit_code == 0, run
    pair = pairs(document)[("p", "output")]
    assert pair["verdict"] == "pass" and pair["compared"] == 6, pair
    assert any("compared along the 6 directions of p that move that matrix symmetrically" in w
               for w in pair["warnings"]), pair["warnings"]


def test_a_wrong_gradient_after_a_cholesky_is_the_culprit_not_the_cholesky():
    """The cube after the factor is 2/3 of the truth; the Cholesky's own check
    probes it along symmetric directions, where it is right (probed along any
    direction, it failed, and was named the culprit)."""
    path = fixture("symmetric_cholesky_wrong_after.py")
    run, document = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(document)[("A", "output")]
    assert pair["verdict"] == "mismatch"
    site = pair["culprit"]["site"]
    assert "cube" in site["description"] and "Cholesky" not in site["description"], site
    assert site["location"].endswith(f"symmetric_cholesky_wrong_after.py:{line_of(path, 'cube(tf.linalg')}")


def test_a_gradient_wrong_along_the_symmetric_directions_still_fails():
    """The user's own Cholesky gradient, not halved: twice the truth along
    every off-diagonal symmetric direction. The symmetric comparison fails
    too, so the mismatch stands, and the user's gradient is the culprit."""
    path = fixture("symmetric_cholesky_own_gradient.py")
    run, document = check_json(path)
    assert run.exit_code == 1, run
    pair = pairs(document)[("A", "output")]
    assert pair["verdict"] == "mismatch"
    assert not any("read as symmetric" in w for w in pair["warnings"])
    assert "tf.custom_gradient cholesky" in pair["culprit"]["site"]["description"]


LOG_DETERMINANTS = ["symmetric_logdet.py", "symmetric_logdet_plus_trace.py"]


@pytest.mark.parametrize("name", LOG_DETERMINANTS)
def test_the_hessian_of_a_log_determinant_is_checked_along_symmetric_directions(run, name):
    """logdet(A) through TensorFlow's Cholesky: its Hessian, along symmetric
    S, is -tr(A^-1 S A^-1 S) (closed form), and its finite-difference check
    passes along the 6 symmetric directions; element by element 54 of its 81
    elements failed (finite differences of the gradient see an upper entry
    not at all). With a trace penalty beside it, A reaches the output around
    the Cholesky, but not its gradient (the penalty's is constant): the same
    Hessian, checked the same way (it failed 54 of 81 before)."""
    path = fixture(name)
    done = run("hessian", path, "--json")
    assert done.exit_code == 0, done
    result = done.result
    H = np.asarray(result["hessian"])
    from gradcli.model.loading import load_model

    A = np.asarray(load_model(path).point["A"])
    inverse = np.linalg.inv(A)
    for i, j in [(0, 0), (1, 0), (2, 1), (2, 2)]:
        S = np.zeros((3, 3))
        S[i, j] = S[j, i] = 1.0
        assert S.ravel() @ H @ S.ravel() == pytest.approx(-np.trace(inverse @ S @ inverse @ S), rel=1e-9)
    (pair,) = result["fd_check"]["pairs"]
    assert pair["verdict"] == "pass" and pair["compared"] == 9 * 6, pair
    assert any("compared along the 6 directions of A" in w for w in pair["warnings"]), pair["warnings"]


def test_a_matrix_that_is_not_symmetric_at_the_point_gets_no_excuse():
    """Given a matrix that is not symmetric, the Cholesky computes from its
    lower triangle alone and its symmetric gradient is wrong for that input
    (HIPS/autograd#56): the mismatch stands, the Cholesky is the culprit (its
    own check probes it along any direction there), and nothing says the
    input was read as symmetric. tests/test_precision_culprit.py holds the
    numbers against the lower triangle's closed form."""
    run, document = check_json(fixture("culprit_cholesky.py"))
    assert run.exit_code == 1, run
    pair = pairs(document)[("a", "output")]
    assert pair["verdict"] == "mismatch" and pair["culprit"]["site"]["op_type"] == "Cholesky"
    assert not any("read as symmetric" in w for w in pair["warnings"])


@pytest.mark.parametrize("name", LOG_DETERMINANTS)
def test_the_hessian_on_the_choleskys_domain_is_definite_where_the_whole_one_is_semidefinite(run, name):
    """logdet(A) through the Cholesky does not change along A's upper entries,
    so over all 9 directions its Hessian has 3 zero eigenvalues; on the
    symmetric matrices it is concave: restricted to an orthonormal basis N_k
    of them, the Hessian is Q_kl = -tr(A^-1 N_k A^-1 N_l) (closed form),
    negative definite, and the note gives its extreme eigenvalues."""
    import re

    path = fixture(name)
    done = run("hessian", path, "--json")
    assert done.exit_code == 0, done
    result = done.result
    assert result["verdict"] == "negative semidefinite"
    (note,) = [n for n in result["notes"] if n.startswith("restricted to the 6 of 9 directions")]
    assert f"Cholesky at tests/models/{name}:" in note and "negative definite" in note, note
    low, high = map(float, re.search(r"eigenvalues (\S+) to (\S+)\)", note).groups())
    from gradcli.model.loading import load_model

    inverse = np.linalg.inv(np.asarray(load_model(path).point["A"]))
    basis = []
    for i, j in zip(*np.tril_indices(3)):
        N = np.zeros((3, 3))
        N[i, j] = N[j, i] = 1.0 if i == j else 1.0 / np.sqrt(2.0)
        basis.append(N)
    Q = np.array([[-np.trace(inverse @ M @ inverse @ N) for N in basis] for M in basis])
    truth = np.linalg.eigvalsh(Q)
    assert (low, high) == (pytest.approx(truth[0], rel=1e-5), pytest.approx(truth[-1], rel=1e-5))


def test_an_input_that_also_reaches_the_output_around_the_cholesky_gets_no_excuse(run):
    """A second path from A, around the Cholesky, through the user's identity
    whose gradient transposes: wrong only along antisymmetric directions
    (<W^T, S> = <W, S> along symmetric S). There A's antisymmetric directions
    define a derivative, so they are not excused: reverse mode alone (no
    forward-mode probe to catch it) fails, naming the user's identity.
    Truth: analytic A^-1 + W^T (TensorFlow's symmetric logdet gradient and the
    transposing rule), numeric the lower triangle's logdet derivative + W."""
    from tests.models.symmetric_cholesky_second_path import W

    done = run("check", fixture("symmetric_cholesky_second_path.py"), "--autodiff", "reverse", "--json")
    assert done.exit_code == 1, done
    (model,) = done.result["models"]
    (pair,) = model["pairs"]
    assert pair["verdict"] == "mismatch", pair
    assert "tf.custom_gradient identity" in pair["culprit"]["site"]["description"]
    assert not any("read as symmetric" in w for w in pair["warnings"])
    from gradcli.model.loading import load_model

    inverse = np.linalg.inv(np.asarray(load_model(fixture("symmetric_cholesky_second_path.py")).point["A"]))
    lower = 2 * np.tril(inverse, -1) + np.diag(np.diag(inverse))  # logdet of the matrix the lower triangle makes
    assert pair["failing"]
    for element in pair["failing"]:
        i, j = element["input_index"]
        assert element["analytic"] == pytest.approx(inverse[i, j] + W[j, i], rel=1e-9)
        assert element["numeric"] == pytest.approx(lower[i, j] + W[i, j], rel=1e-6, abs=1e-9)


def test_a_second_path_through_complex_values_is_a_path_around_the_cholesky(run):
    """The second path runs through complex tensors (tf.complex, z * z,
    tf.math.real), which carry a derivative: searched along floating tensors
    only, the rule saw no path around the Cholesky and excused the
    antisymmetric directions, where the user's transposing rule is wrong.
    Truth: analytic A^-1 + (2 W o A)^T (the symmetric logdet gradient and
    the transposed rule), numeric the lower triangle's logdet derivative +
    2 W o A."""
    from gradcli.model.loading import load_model
    from tests.models.symmetric_cholesky_complex_second_path import W

    path = fixture("symmetric_cholesky_complex_second_path.py")
    done = run("check", path, "--autodiff", "reverse", "--json")
    assert done.exit_code == 1, done
    (pair,) = done.result["models"][0]["pairs"]
    assert pair["verdict"] == "mismatch" and not any("read as symmetric" in w for w in pair["warnings"]), pair
    A = np.asarray(load_model(path).point["A"])
    inverse = np.linalg.inv(A)
    lower = 2 * np.tril(inverse, -1) + np.diag(np.diag(inverse))
    assert pair["failing"]
    for element in pair["failing"]:
        i, j = element["input_index"]
        assert element["analytic"] == pytest.approx(inverse[i, j] + 2 * W[j, i] * A[j, i], rel=1e-9)
        assert element["numeric"] == pytest.approx(lower[i, j] + 2 * W[i, j] * A[i, j], rel=1e-6, abs=1e-9)


def test_an_inverse_beside_the_cholesky_is_not_named_the_culprit():
    """S feeds the Cholesky (logdet) and a MatrixInverse (the quadratic form).
    The culprit search's scan to the output checks the function from the
    inverse's input S, which holds the Cholesky's convention too: probed along
    any direction, TensorFlow's correct inverse was named the culprit. Its
    input is probed along symmetric directions now, and nothing is named.
    Truth: the inverse's own gradient, -S^-T G S^-T, is right (checked here
    against central differences of numpy's inverse)."""
    import tensorflow as tf

    path = fixture("symmetric_inverse_beside_cholesky.py")
    run, document = check_json(path)
    pair = pairs(document)[("S", "output")]
    assert pair["culprit"] is None, pair["culprit"]
    rng = np.random.default_rng(4)
    m = rng.standard_normal((3, 3))
    S, G, D = m @ m.T + 3.0 * np.eye(3), rng.standard_normal((3, 3)), rng.standard_normal((3, 3))
    x = tf.constant(S)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.reduce_sum(tf.linalg.inv(x) * G)
    h = 1e-6
    central = (np.sum(np.linalg.inv(S + h * D) * G) - np.sum(np.linalg.inv(S - h * D) * G)) / (2 * h)
    assert np.sum(tape.gradient(y, x).numpy() * D) == pytest.approx(central, rel=1e-7)


def _lower(B):
    """The matrix a Cholesky reads from B: its lower triangle, mirrored."""
    return np.tril(B) + np.tril(B, -1).T


def _central(f, A, h=1e-6):
    """Central differences of scalar ``f`` at ``A``, entry by entry (numpy)."""
    grad = np.zeros_like(A)
    for index in np.ndindex(A.shape):
        E = np.zeros_like(A)
        E[index] = h
        grad[index] = (f(A + E) - f(A - E)) / (2 * h)
    return grad


@pytest.mark.parametrize("name", ["symmetric_logdet_plus_trace.py", "symmetric_inverse_beside_cholesky.py"])
def test_an_input_that_also_reaches_the_output_around_the_cholesky_is_compared_element_by_element(name):
    """A trace penalty beside logdet(A), and a Gaussian log-density written
    with inv(S) beside logdet(S): correct, and before this rule both failed
    with six of nine elements. Every element is compared now (none excused),
    against TensorFlow's gradient with the Cholesky's part taken as the op
    reads its matrix. Truth: that part, (2 tril(G, -1) + diag(G)) - G with
    G the symmetric gradient of logdet's share (c A^-1), is what
    ``lower_triangle_correction`` takes; and TensorFlow's gradient plus it
    is numpy's central differences of the function computed from the lower
    triangle (slogdet) and the whole matrix (the trace, the inverse)."""
    import tensorflow as tf

    from gradcli.model.loading import load_model
    from gradcli.verdicts.culprit import ModelGraph
    from gradcli.verdicts.symmetric import lower_triangle_correction, path_ends, readers_on_paths

    path = fixture(name)
    run, document = check_json(path)
    assert run.exit_code == 0, run
    ((input_name, _), pair), = pairs(document).items()
    assert pair["verdict"] == "pass" and pair["compared"] == 9 and pair["max_rel_error"] < 1e-6, pair
    (warning,) = [w for w in pair["warnings"] if "symmetric" in w]
    line = line_of(path, "tf.linalg.logdet(")
    assert f"Cholesky (tf.linalg.cholesky) at tests/models/{name}:{line}: " in warning
    assert f"{input_name} reaches output by another path too, so every element was compared" in warning

    model = load_model(path)
    A = np.asarray(model.point[input_name])
    inverse = np.linalg.inv(A)
    if name == "symmetric_logdet_plus_trace.py":
        share, function = 1.0, lambda B: np.linalg.slogdet(_lower(B))[1] + np.trace(B)
    else:
        from tests.models.symmetric_inverse_beside_cholesky import X

        share = -2.0
        function = lambda B: -2.0 * np.linalg.slogdet(_lower(B))[1] - 0.5 * np.sum((X @ np.linalg.inv(B)) * X)  # noqa: E731
    G = share * inverse
    graph = ModelGraph(model)
    readers, around = readers_on_paths(graph, input_name, path_ends(graph, ["output"]))
    assert [op.type for op in readers] == ["Cholesky"] and around
    correction = lower_triangle_correction(graph, input_name, graph.outputs["output"], readers, 1)
    expected = 2 * np.tril(G, -1) + np.diag(np.diag(G)) - G
    np.testing.assert_allclose(correction.reshape(3, 3), expected, rtol=1e-10, atol=1e-12)
    x = tf.constant(A)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = model.function({input_name: x})["output"]
    gradient = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(gradient + correction.reshape(3, 3), _central(function, A), rtol=1e-6, atol=1e-8)


def test_second_derivatives_follow_the_paths_of_the_gradient(run):
    """check --order 2 differentiates the gradient, so the rule searches the
    gradient's paths. logdet(A) + tr(A): the trace's gradient is constant, so
    every path of the gradient passes through the Cholesky: compared along
    the 6 symmetric directions (54 of 81 elements failed). The hand-written
    Gaussian: its gradient reaches S through the inverse too
    (0.5 S^-T X^T X S^-T), so every element is compared, with the Cholesky's
    part as it reads its matrix. Truth for that: TensorFlow's Hessian plus the
    rule's correction is numpy's central differences of the gradient as
    TensorFlow computes it, -2 inv(the matrix the Cholesky reads) + 0.5 inv(S)^T
    X^T X inv(S)^T."""
    from gradcli.model.loading import load_model
    from gradcli.verdicts.culprit import ModelGraph
    from gradcli.verdicts.symmetric import lower_triangle_correction, path_ends, readers_on_paths
    from tests.models.symmetric_inverse_beside_cholesky import X

    done = run("check", fixture("symmetric_logdet_plus_trace.py"), "--order", "2", "--json")
    assert done.exit_code == 0, done
    second = {p["output"]: p for p in done.result["models"][0]["pairs"]}["d(output)/dA"]
    assert second["verdict"] == "pass" and second["compared"] == 9 * 6, second
    assert any("compared along the 6 directions of A" in w for w in second["warnings"])

    path = fixture("symmetric_inverse_beside_cholesky.py")
    done = run("check", path, "--order", "2", "--json")
    assert done.exit_code == 0, done
    second = {p["output"]: p for p in done.result["models"][0]["pairs"]}["d(output)/dS"]
    assert second["verdict"] == "pass" and second["compared"] == 81, second
    assert any("so every element was compared" in w for w in second["warnings"]), second["warnings"]

    H = np.asarray(run("hessian", path, "--json").result["hessian"])
    model = load_model(path)
    S = np.asarray(model.point["S"])
    graph = ModelGraph(model)
    ends = path_ends(graph, ["output"], "S", {"output": np.ones(())})
    readers, around = readers_on_paths(graph, "S", ends)
    assert [op.type for op in readers] == ["Cholesky"] and around
    correction = lower_triangle_correction(graph, "S", ends[0], readers, 9)

    def gradient(B):  # TensorFlow's gradient of the model at B, in numpy
        inverse = np.linalg.inv(B)
        return -2.0 * np.linalg.inv(_lower(B)) + 0.5 * inverse.T @ X.T @ X @ inverse.T

    central = np.zeros((9, 9))
    for m in range(9):
        E = np.zeros(9)
        E[m] = 1e-6
        central[:, m] = (gradient(S + E.reshape(3, 3)) - gradient(S - E.reshape(3, 3))).ravel() / 2e-6
    np.testing.assert_allclose(H + correction, central, rtol=1e-6, atol=1e-8)
