"""tfb.MaskedAutoregressiveFlow with a small fixed shift-and-log-scale function, as a flow (_tfp_flows.py)."""
from _tfp_flows import flow_file

model, log_det_jacobian, inputs = flow_file("maf")
