"""The Rosenbrock function f(x, y) = (1 - x)^2 + 100 (y - x^2)^2, at its minimum (1, 1).

Closed form: gradient (-2(1 - x) - 400 x (y - x^2), 200 (y - x^2)); Hessian
[[2 - 400 y + 1200 x^2, -400 x], [-400 x, 200]], which at (1, 1) is
[[802, -400], [-400, 200]] with eigenvalues 501 -+ sqrt(250601) =
0.399360767... and 1001.60064...: positive definite, condition number 2508.
Elsewhere it is not convex (try --set x=0 --set y=1).
"""


def model(x, y):
    return (1.0 - x) ** 2 + 100.0 * (y - x**2) ** 2


inputs = {"x": 1.0, "y": 1.0}
