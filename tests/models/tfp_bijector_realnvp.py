"""tfb.RealNVP, given as the model itself (_tfp_flows.py)."""
from _tfp_flows import bijector_file

model, inputs = bijector_file("realnvp")
