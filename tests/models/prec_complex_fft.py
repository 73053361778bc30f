"""A float64 model whose values pass through an FFT in complex64, with a right
custom gradient (``_complex_fft.py``): checked at float32 rules, it passes."""

from _complex_fft import X, make_model

model = make_model(1.0)
inputs = {"x": X}
