"""tfb.Chain of Shift, Sigmoid and Scale, as a flow (_tfp_flows.py)."""
from _tfp_flows import flow_file

model, log_det_jacobian, inputs = flow_file("chain")
