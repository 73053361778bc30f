"""tfb.CorrelationCholesky, given as the model itself (_tfp_flows.py): log-dets from event rank 2."""
from _tfp_flows import bijector_file

model, inputs = bijector_file("correlation_cholesky")
