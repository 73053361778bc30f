"""a tfb.Bijector subclass whose _forward_log_det_jacobian is twice the truth, as a flow (_tfp_flows.py)."""
from _tfp_flows import flow_file

model, log_det_jacobian, inputs = flow_file("wrong_log_det")
