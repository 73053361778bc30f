"""a tfb.Bijector subclass whose inverse log-det has the wrong sign, given as the model itself (_tfp_flows.py)."""
from _tfp_flows import bijector_file

model, inputs = bijector_file("wrong_inverse_log_det")
