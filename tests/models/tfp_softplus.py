"""tfb.Softplus, as a flow (_tfp_flows.py)."""
from _tfp_flows import flow_file

model, log_det_jacobian, inputs = flow_file("softplus")
